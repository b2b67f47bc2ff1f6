#!/usr/bin/env bash
# The first run of a newcomer, timed (README, "Try it on a fresh Debian 12 machine"): a fresh
# Debian 12 root made by mmdebstrap (minbase, nothing of this project installed), a fresh clone of
# this checkout's HEAD in it, and `time scripts/demo.sh` inside it by chroot, so the packages are
# really installed and everything is really compiled, without ccache's cache. The machine's CUDA
# toolkit, where there is one, is mounted in as it is on the machines this project is built on.
# Needs root, mmdebstrap and the Debian mirror. Prints the demo's output and its last line:
#   first run: N s wall, U s user, S s sys
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $EUID -eq 0 ]] || { echo "bench-first-run: needs root (mmdebstrap, chroot, mounts)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "bench-first-run: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }
root="$(mktemp -d /var/tmp/dslaunch-first-run-XXXXXX)"
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" 2>/dev/null || true; done
  # A bind mount left in place would let rm reach the host's files (the CUDA toolkit is on the
  # same file system): the root is removed only when nothing is mounted below it any more.
  if grep -q " $root/" /proc/mounts; then
    echo "bench-first-run: mounts remain under $root; left in place" >&2
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
mount_into() {  # mount_into SOURCE TARGET_IN_ROOT [OPTION]: bind-mounts and remembers it
  mount "${3:---bind}" "$1" "$root$2"
  mounted+=("$root$2")
}
mmdebstrap --quiet --variant=minbase bookworm "$root" http://deb.debian.org/debian
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount_into /proc /proc
mount_into /sys /sys --rbind
mount_into /dev /dev --rbind
cuda="$(readlink -f /usr/local/cuda 2>/dev/null || true)"
if [[ -n "$cuda" && -d "$cuda" ]]; then
  mkdir -p "$root$cuda"
  mount_into "$cuda" "$cuda"
  ln -sfn "$(basename "$cuda")" "$root/usr/local/cuda"
fi
git clone --quiet "$PWD" "$root/root/dslaunch"
chroot "$root" /usr/bin/env -i PATH=/usr/local/cuda/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
  bash -c 'cd /root/dslaunch && TIMEFORMAT="first run: %R s wall, %U s user, %S s sys" && time scripts/demo.sh'
