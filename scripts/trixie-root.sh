#!/usr/bin/env bash
# A Debian 13 (trixie) root with Python 3.13 and a virtualenv of
# requirements-controller-next.txt, for the controller lane (scripts/controller-next.sh).
#
# Built once per (this script, the requirements file) and reused: the root lives in
# ${GPUHOST_TRIXIE_CACHE:-~/.cache/gpuhost-trixie}/<hash of both>/root, next to a `ready`
# stamp written last, so a build cut short is never reused. Older roots of other hashes are
# removed when a new one is ready. Prints the root's path on stdout.
#
# mmdebstrap (Debian's registry serves trixie; 1.5-4 min here), then the machine's CA
# bundle and resolv.conf copied in (pip and apt inside need them), then the venv (about 1
# min from PyPI). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
REQS=requirements-controller-next.txt
# Debian packages of the root: python3 + venv for the controller, git (ansible-test lists
# the collection's files with it), shellcheck (without it ansible-test skips its test),
# pciutils/gcc/libc6-dev (the unit tier's setpci and the CUDA stand-in library, as
# UNIT_PKGS in the Makefile), make (the tests install the collection with make
# collection), coreutils' timeout (the runner), procps.
PKGS=python3,python3-venv,ca-certificates,git,make,shellcheck,pciutils,gcc,libc6-dev,procps
key=$( { cat "$0" "$REQS"; } | sha256sum | cut -c1-16)
base=${GPUHOST_TRIXIE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost-trixie}
dir=$base/$key
root=$dir/root
mkdir -p "$base"
exec 8>"$base/lock"
flock 8
if [ -f "$dir/ready" ]; then
  echo "trixie-root: reusing $root" >&2
  echo "$root"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "trixie-root: need root (mmdebstrap, chroot)" >&2
  exit 1
fi
command -v mmdebstrap >/dev/null || { echo "trixie-root: mmdebstrap missing: scripts/apt-ensure.sh mmdebstrap" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
start=$(date +%s)
echo "trixie-root: building $root (mmdebstrap trixie, 1.5-4 min)" >&2
mmdebstrap --quiet --variant=apt --include="$PKGS" trixie "$root" >&2
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/gpuhost-host-ca.crt"
# Also as the root's system bundle and in its pip.conf: ansible-test's own pip runs (its
# sanity virtualenvs) do not pass PIP_CERT on.
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf '[global]\ncert = /etc/ssl/certs/gpuhost-host-ca.crt\n' > "$root/etc/pip.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
install -m 0644 "$REQS" "$root/opt/requirements-controller-next.txt"
echo "trixie-root: venv from $REQS" >&2
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  PIP_CERT=/etc/ssl/certs/gpuhost-host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
  sh -ec 'python3 -m venv /opt/next-venv
          /opt/next-venv/bin/pip install -q -r /opt/requirements-controller-next.txt
          sha256sum /opt/requirements-controller-next.txt | cut -d" " -f1 \
            > /opt/next-venv/.requirements.sha256
          /opt/next-venv/bin/python --version; /opt/next-venv/bin/ansible --version | head -1' >&2
date -u +%FT%TZ > "$dir/ready"
echo "trixie-root: ready in $(( $(date +%s) - start ))s" >&2
for old in "$base"/*/; do
  [ "${old%/}" = "$dir" ] || rm -rf "${old%/}"
done
echo "$root"
