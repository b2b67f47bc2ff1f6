#!/usr/bin/env bash
# Builds the dslaunch container image from the Dockerfile at the repository root (docs/containers.md).
#
#   scripts/build-image.sh [--tag NAME] [--base IMAGE] [-- EXTRA BUILD ARGS...]
#
#   --tag NAME     the image to make (default localhost/dslaunch:latest, or $DSLAUNCH_IMAGE)
#   --base IMAGE   the base image, the Dockerfile's BASE_IMAGE argument (default debian:12-slim);
#                  e.g. a CUDA runtime image later
#
# With podman (preferred; docker when it is the only engine that answers). When the base is
# debian:12-slim and no registry can give it (none is reachable on the project's machines), the
# base is made from Debian packages instead: `mmdebstrap --variant=minbase bookworm` and
# `podman import` as localhost/debian:12-slim, once (skipped while that image exists). Podman
# needs two settings on these machines ([containers] default_ulimits = [] and [engine] runtime =
# "runc" in /etc/containers/containers.conf); they are added only when the file does not set
# them already, and nothing else in it is touched. Prints the build time and the image's size.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${DSLAUNCH_IMAGE:-localhost/dslaunch:latest}"
base="debian:12-slim"
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: scripts/build-image.sh [--tag NAME] [--base IMAGE] [-- EXTRA BUILD ARGS...]" >&2; exit 2 ;;
  esac
done

# The base made from Debian packages when debian:12-slim cannot be pulled.
local_base="localhost/debian:12-slim"
containers_conf=/etc/containers/containers.conf

# Engine: podman when installed, else a docker whose daemon answers.
if command -v podman >/dev/null 2>&1; then
  engine=podman
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  engine=docker
else
  echo "build-image: neither podman nor a running docker daemon found: run scripts/setup.sh (installs podman)" >&2
  exit 1
fi

# Adds `key = value` to [section] of containers.conf unless the key is set (uncommented) in that
# section already; creates the section (and the file) when missing.
ensure_conf() {
  local section="$1" key="$2" value="$3"
  python3 - "$containers_conf" "$section" "$key" "$value" <<'PY'
import os, re, sys
path, section, key, value = sys.argv[1:5]
lines = open(path).read().splitlines() if os.path.exists(path) else []
current, header_at = None, None
for i, line in enumerate(lines):
    m = re.match(r"\s*\[([^\]]+)\]\s*$", line)
    if m:
        current = m.group(1).strip()
        if current == section:
            header_at = i
        continue
    if current == section and re.match(rf"\s*{re.escape(key)}\s*=", line):
        sys.exit(0)  # set already: leave it as the administrator wrote it
if header_at is None:
    lines += ["", f"[{section}]"] if lines else [f"[{section}]"]
    header_at = len(lines) - 1
lines.insert(header_at + 1, f"{key} = {value}  # added by dslaunch scripts/build-image.sh")
os.makedirs(os.path.dirname(path), exist_ok=True)
tmp = path + ".dslaunch-tmp"
with open(tmp, "w") as f:
    f.write("\n".join(lines) + "\n")
os.replace(tmp, path)
print(f"build-image: {path}: [{section}] {key} = {value}")
PY
}

if [[ "$engine" == podman && $EUID -eq 0 ]]; then
  # Podman's default nofile/nproc limits exceed this VM's hard limits (setrlimit fails), and crun
  # refuses the kernel's hybrid cgroup layout (/work/shared/NOTES.md, "Containers").
  ensure_conf containers default_ulimits '[]'
  ensure_conf engine runtime '"runc"'
fi

image_exists() {
  if [[ "$engine" == podman ]]; then podman image exists "$1"; else docker image inspect "$1" >/dev/null 2>&1; fi
}

if [[ "$base" == "debian:12-slim" ]]; then
  if image_exists "$local_base"; then
    base="$local_base"
  elif ! image_exists "docker.io/library/debian:12-slim" && ! "$engine" pull -q "docker.io/library/debian:12-slim" >/dev/null 2>&1; then
    command -v mmdebstrap >/dev/null 2>&1 || { echo "build-image: no registry gives debian:12-slim and mmdebstrap is missing: run scripts/setup.sh" >&2; exit 1; }
    echo "build-image: no registry gives debian:12-slim; making $local_base from Debian packages (mmdebstrap)"
    rootfs="$(mktemp -d)"
    trap 'rm -rf "$rootfs"' EXIT
    t0=$SECONDS
    # As Debian's own -slim images: no manual pages, documentation (but the copyright files),
    # translations or info pages, now and in every package installed later (the options are
    # kept in the image's /etc/dpkg/dpkg.cfg.d).
    mmdebstrap --quiet --variant=minbase \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-include=/usr/share/locale/locale.alias' --dpkgopt='path-exclude=/usr/share/info/*' \
      bookworm "$rootfs/rootfs.tar"
    "$engine" import "$rootfs/rootfs.tar" "$local_base" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
    echo "build-image: $local_base made in $((SECONDS - t0)) s"
    base="$local_base"
  fi
fi

# The host's ccache, when there is one (podman only: docker build has no -v): the build stage
# compiles in a directory of the same path with the same ccache settings, so that the objects
# scripts/build.sh compiled on the host are cache hits (docs/containers.md, "Build").
# DSLAUNCH_IMAGE_HOST_CCACHE=0 leaves it out (the build then uses its own cache mount).
ccache_args=()
if [[ "$engine" == podman && "${DSLAUNCH_IMAGE_HOST_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  host_cache="$(ccache -k cache_dir)"
  mkdir -p "$host_cache"
  ccache_args=(-v "$host_cache:/host-ccache" --build-arg CCACHE_CACHE_DIR=/host-ccache
    --build-arg "CCACHE_BASE_DIR=$(ccache -k base_dir)" --build-arg "CCACHE_HASH_DIR=$(ccache -k hash_dir)"
    --build-arg "CCACHE_MAX_SIZE=$(ccache -k max_size)" --build-arg "SRC_DIR=$PWD"
    --build-arg "HOST_LANG=${LANG:-}" --build-arg "HOST_LC_ALL=${LC_ALL:-}"
    --build-arg "HOST_LC_CTYPE=${LC_CTYPE:-}" --build-arg "HOST_LC_MESSAGES=${LC_MESSAGES:-}")
fi

# --network host: the build stage installs its packages from Debian's mirror, and a build
# container reaches it only through the host's network on these machines.
# The OCI labels' revision and date (docs/containers.md, "Build").
version="$(sed -n 's/^project(dslaunch VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
label_args=(--label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  --label "org.opencontainers.image.version=$version")
if revision="$(git rev-parse HEAD 2>/dev/null)"; then
  git diff --quiet HEAD 2>/dev/null || revision+="-dirty"
  label_args+=(--label "org.opencontainers.image.revision=$revision")
fi
t0=$(date +%s.%N)
"$engine" build --network host --build-arg "BASE_IMAGE=$base" "${ccache_args[@]}" "${label_args[@]}" \
  -t "$tag" -f Dockerfile "${extra[@]}" .
t1=$(date +%s.%N)
size=$("$engine" image inspect --format '{{.Size}}' "$tag")
python3 -c "import sys; print(f'build-image: {sys.argv[1]} from {sys.argv[2]} in {float(sys.argv[4]) - float(sys.argv[3]):.1f} s, {int(sys.argv[5]) / 1e6:.1f} MB')" \
  "$tag" "$base" "$t0" "$t1" "$size"
