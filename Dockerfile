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
# buildah 1.28 (podman 4.3) the runtime stage's RUN hung on the apt cache mounts the build stage
# had locked; one build at a time needs no lock.

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
      libboost-dev nlohmann-json3-dev libcli11-dev libgloo-dev libssh-dev libopenblas-dev liburing-dev \
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
# The sources go to /src; the compile step copies them to SRC_DIR when that is another path.
# (buildah 1.28 keys the layer cache of COPY and WORKDIR by their text, not by the build
# arguments in it, so `COPY . ${SRC_DIR}/` would reuse a layer made with another SRC_DIR; RUN's
# key holds the arguments' values.)
COPY CMakeLists.txt /src/
COPY cmake/ /src/cmake/
COPY common/ /src/common/
COPY launcher/ /src/launcher/
COPY agent/ /src/agent/
COPY runtime/ /src/runtime/
COPY examples/ /src/examples/
COPY scripts/prepare-data.sh /src/scripts/
RUN --mount=type=cache,target=/ccache \
    { echo "cache_dir = ${CCACHE_CACHE_DIR}"; echo "hash_dir = ${CCACHE_HASH_DIR}"; \
      echo "max_size = ${CCACHE_MAX_SIZE}"; echo "stats_log = /tmp/ccache-stats.log"; \
      [ -z "${CCACHE_BASE_DIR}" ] || echo "base_dir = ${CCACHE_BASE_DIR}"; } >/etc/ccache.conf \
 && unset LANG LC_ALL LC_CTYPE LC_MESSAGES \
 && if [ -n "$HOST_LANG" ]; then export LANG="$HOST_LANG"; fi \
 && if [ -n "$HOST_LC_ALL" ]; then export LC_ALL="$HOST_LC_ALL"; fi \
 && if [ -n "$HOST_LC_CTYPE" ]; then export LC_CTYPE="$HOST_LC_CTYPE"; fi \
 && if [ -n "$HOST_LC_MESSAGES" ]; then export LC_MESSAGES="$HOST_LC_MESSAGES"; fi \
 && if [ "${SRC_DIR}" != /src ]; then mkdir -p "${SRC_DIR}" && cp -a /src/. "${SRC_DIR}/"; fi \
 && cd "${SRC_DIR}" && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDSLAUNCH_BUILD_TESTS=OFF -DDSLAUNCH_BUILD_BENCHMARKS=OFF \
 && ninja -C build dslaunch dslaunch-agent dslaunch-worker \
 && { ccache --show-log-stats | grep -Ei 'hit|miss' || true; }
# The demo data is made here, at build time (docs/containers.md, "Data"): it is a pure function of
# the fortunes package and the worker, and the runtime image then needs neither `fortunes` nor a
# writable /opt.
RUN cd "${SRC_DIR}" && scripts/prepare-data.sh \
 && mkdir -p /out/bin \
 && for b in dslaunch dslaunch-agent dslaunch-worker; do strip --strip-debug -o /out/bin/$b build/bin/$b; done \
 && mv data /out/data

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG DEBIAN_FRONTEND=noninteractive
# What `ldd` shows the three binaries need beyond the base (docs/containers.md, "Image layout"):
# libssh (launcher's SSH transport), Gloo (the communicator), OpenBLAS (the runtime's GEMMs),
# and libgomp; procps for `ps` when looking into a running container.
# (The base's apt settings stay as they are here: images built on this one behave as on the base.)
RUN --mount=type=cache,target=/var/cache/apt \
    --mount=type=cache,target=/var/lib/apt/lists \
    apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libssh-4 libgloo0 libopenblas0-pthread libgomp1 liburing2 procps
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

# org.opencontainers.image.version, .created and .revision: scripts/build-image.sh gives them as
# `--label` (the version from CMakeLists.txt). A LABEL made of build arguments would be taken
# from buildah's layer cache, which keys it by its text, with the values of the first build.
LABEL org.opencontainers.image.title="dslaunch" \
      org.opencontainers.image.description="Cluster job launcher and training runtime (dslaunch, dslaunch-agent, dslaunch-worker)" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
