# syntax=docker/dockerfile:1
# The dslaunch image: the three binaries, the example configs and hostfiles, and the bundled demo
# data, on a Debian runtime with only the shared libraries they need (docs/containers.md).
#
#   scripts/build-image.sh                  makes the base when no registry gives it, then builds
#   podman build -t dslaunch .              where debian:12-slim can be pulled
#   podman build --build-arg BASE_IMAGE=... a CUDA runtime base later (docs/containers.md, "CUDA")
#
# Two stages: `build` (toolchain and -dev packages, the binaries only: no tests, no benchmarks,
# RelWithDebInfo as scripts/build.sh builds what the tests run, debug sections stripped on the way
# out) and the runtime stage. apt's cache and ccache live in cache mounts, so a rebuild after a
# source change recompiles only what changed. The cache mounts are not `sharing=locked`: with
# buildah 1.28 (podman 4.3) a locked apt cache mount of the build stage hangs the runtime stage's
# RUN (the lock file lives in the cache and apt removes it); one build at a time uses them.

# The base of both stages: a Debian 12 (bookworm) image, or an image derived from one.
ARG BASE_IMAGE=debian:12-slim

FROM ${BASE_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# The build packages of scripts/setup.sh (no test-only ones), and `fortunes`, the demo data's text.
RUN --mount=type=cache,target=/var/cache/apt \
    --mount=type=cache,target=/var/lib/apt/lists \
    rm -f /etc/apt/apt.conf.d/docker-clean \
 && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >/etc/apt/apt.conf.d/keep-cache \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      cmake ninja-build g++ ccache pkg-config \
      libboost-dev nlohmann-json3-dev libcli11-dev libgloo-dev libssh-dev libopenblas-dev \
      fortunes
# Where the sources are compiled, and ccache's settings: a cache mount by default.
# scripts/build-image.sh passes the checkout's own path and the host's ccache settings and mounts
# the host's cache (podman build -v): the compile commands are then those of the host's build, and
# the objects scripts/build.sh compiled are cache hits here.
ARG SRC_DIR=/src
ARG CCACHE_CACHE_DIR=/ccache
ARG CCACHE_BASE_DIR=
ARG CCACHE_HASH_DIR=true
ARG CCACHE_MAX_SIZE=5G
# ccache hashes these locale variables (they change the compiler's messages): the host's values,
# so that its cache entries match; empty means unset.
ARG HOST_LANG=
ARG HOST_LC_ALL=
ARG HOST_LC_CTYPE=
ARG HOST_LC_MESSAGES=
# buildah 1.28 keys the cache of `WORKDIR ${SRC_DIR}` by its text, not its value: a build from another
# checkout path reused the layer and copied the sources to the other path. A RUN step keys on the
# build arguments it sees, so this one makes the layers below differ per SRC_DIR.
RUN mkdir -p "${SRC_DIR}"
WORKDIR ${SRC_DIR}
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY common/ common/
COPY launcher/ launcher/
COPY agent/ agent/
COPY runtime/ runtime/
COPY examples/ examples/
RUN --mount=type=cache,target=/ccache \
    { echo "cache_dir = ${CCACHE_CACHE_DIR}"; echo "hash_dir = ${CCACHE_HASH_DIR}"; \
      echo "max_size = ${CCACHE_MAX_SIZE}"; echo "stats_log = /tmp/ccache-stats.log"; \
      [ -z "${CCACHE_BASE_DIR}" ] || echo "base_dir = ${CCACHE_BASE_DIR}"; } >/etc/ccache.conf \
 && unset LANG LC_ALL LC_CTYPE LC_MESSAGES \
 && if [ -n "$HOST_LANG" ]; then export LANG="$HOST_LANG"; fi \
 && if [ -n "$HOST_LC_ALL" ]; then export LC_ALL="$HOST_LC_ALL"; fi \
 && if [ -n "$HOST_LC_CTYPE" ]; then export LC_CTYPE="$HOST_LC_CTYPE"; fi \
 && if [ -n "$HOST_LC_MESSAGES" ]; then export LC_MESSAGES="$HOST_LC_MESSAGES"; fi \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDSLAUNCH_BUILD_TESTS=OFF -DDSLAUNCH_BUILD_BENCHMARKS=OFF \
 && ninja -C build dslaunch dslaunch-agent dslaunch-worker \
 && { ccache --show-log-stats | grep -Ei 'hit|miss' || true; }
# The demo data is made here, at build time (docs/containers.md, "Data"): it is a pure function of
# the fortunes package and the worker, and the runtime image then needs neither `fortunes` nor a
# writable /opt.
COPY scripts/prepare-data.sh scripts/
RUN scripts/prepare-data.sh \
 && mkdir -p /out/bin \
 && for b in dslaunch dslaunch-agent dslaunch-worker; do strip --strip-debug -o /out/bin/$b build/bin/$b; done \
 && mv data /out/data

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG DEBIAN_FRONTEND=noninteractive
# What `ldd` shows the three binaries need beyond the base (docs/containers.md, "Image layout"):
# libssh (launcher's SSH transport), Gloo (the communicator), OpenBLAS (the runtime's GEMMs),
# and libgomp; procps for `ps` when looking into a running container.
RUN --mount=type=cache,target=/var/cache/apt \
    --mount=type=cache,target=/var/lib/apt/lists \
    rm -f /etc/apt/apt.conf.d/docker-clean \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libssh-4 libgloo0 libopenblas0-pthread libgomp1 procps \
 && rm -f /etc/apt/apt.conf.d/keep-cache
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/data/ /opt/dslaunch/data/
COPY configs/ /opt/dslaunch/configs/
COPY hostfiles/ /opt/dslaunch/hostfiles/
COPY scripts/prepare-data.sh /opt/dslaunch/scripts/
# A fixed uid/gid so that a mounted volume can be prepared for it (chown 1000:1000).
ARG DSLAUNCH_UID=1000
RUN groupadd --gid "${DSLAUNCH_UID}" dslaunch \
 && useradd --uid "${DSLAUNCH_UID}" --gid dslaunch --create-home --shell /bin/sh dslaunch \
 && mkdir -p /work && chown dslaunch:dslaunch /work
USER dslaunch
WORKDIR /work
ENTRYPOINT ["dslaunch"]
CMD ["--help"]
STOPSIGNAL SIGTERM

ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="dslaunch" \
      org.opencontainers.image.description="Cluster job launcher and training runtime (dslaunch, dslaunch-agent, dslaunch-worker)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      org.opencontainers.image.documentation="docs/containers.md"
