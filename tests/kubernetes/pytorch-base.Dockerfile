# A stand-in for a PyTorch image in the kubernetes tier (docs/kubernetes.md, "Your own train.py"):
# no registry is reachable here, so Debian's own PyTorch (python3-torch, 1.13, CPU) on the Debian
# base that scripts/build-image.sh makes. deploy/pytorch/Dockerfile is then built FROM it.
ARG BASE_IMAGE=localhost/debian:12-slim
FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-torch \
 && rm -rf /var/lib/apt/lists/*
