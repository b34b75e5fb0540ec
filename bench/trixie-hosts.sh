#!/usr/bin/env bash
# The Debian 13 (trixie) root that the fleet benchmark's Python 3.13 hosts run in
# (BENCH_PY313, bench/run.sh): each such host's sshd runs chrooted into it, inside the
# host's network namespace and a private mount namespace with its seed tree bound in at the
# same path, so the modules run on the root's /usr/bin/python3.13.
#
# Made from scripts/trixie-root.sh's root (reused, never changed: the controller lane uses
# it): copied without its controller virtualenv (/opt/next-venv), then openssh-server
# installed into the copy with the copy's own apt (Debian's registry serves trixie), with a
# policy-rc.d that refuses every service start. Built once per (this script, that root) into
# ${GPUHOST_BENCH_TRIXIE_CACHE:-~/.cache/gpuhost-bench-trixie}/<key>/root, next to a `ready`
# stamp written last (a build cut short is never reused); older keys are removed. Prints
# the root's path on stdout. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "trixie-hosts: needs root (chroot)" >&2; exit 1; }
src=$(scripts/trixie-root.sh)
[ -x "$src/usr/bin/python3" ] || { echo "trixie-hosts: no python3 in $src" >&2; exit 1; }
key=$( { cat "$0"; echo "$src"; cat "$(dirname "$src")/ready"; } | sha256sum | cut -c1-16)
base=${GPUHOST_BENCH_TRIXIE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost-bench-trixie}
dir=$base/$key
root=$dir/root
mkdir -p "$base"
exec 8>"$base/lock"
flock 8
if [ -f "$dir/ready" ]; then
  echo "trixie-hosts: reusing $root" >&2
  echo "$root"
  exit 0
fi
rm -rf "$dir"
mkdir -p "$root"
start=$(date +%s)
echo "trixie-hosts: copying $src (without /opt/next-venv)" >&2
tar -C "$src" --exclude=./opt/next-venv -cf - . | tar -C "$root" -xf -
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
echo "trixie-hosts: apt-get install openssh-server in the copy" >&2
# apt and dpkg's scripts want /proc: a private mount namespace, so the mount ends with it.
# shellcheck disable=SC2016  # $1 is the inner shell's
unshare --mount --propagation private sh -ec '
  mount -t proc bench-proc "$1/proc"
  chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    DEBIAN_FRONTEND=noninteractive sh -ec "
      timeout 300 apt-get -q update >/dev/null
      timeout 600 apt-get -q install -y --no-install-recommends openssh-server \
        openssh-sftp-server >/dev/null
      apt-get clean"
' sh "$root" >&2
# sshd's privilege separation directory, and the mount point of the benchmark's tmpfs trees.
mkdir -p "$root/run/sshd" "$root/dev/shm"
chroot "$root" /usr/sbin/sshd -V 2>&1 | head -1 >&2 || true
chroot "$root" /usr/bin/python3 --version >&2
date -u +%FT%TZ > "$dir/ready"
echo "trixie-hosts: ready in $(( $(date +%s) - start ))s" >&2
for old in "$base"/*/; do
  [ "${old%/}" = "$dir" ] || rm -rf "${old%/}"
done
echo "$root"
