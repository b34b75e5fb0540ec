#!/usr/bin/env bash
# The base image the execution environment is built on (execution-environment.yml names it:
# images.base_image.name), made here because no image registry is reachable on these
# machines: a Debian 12 (bookworm) minbase root from Debian's archive with mmdebstrap, then
# `podman import`. It holds what ansible-builder's stages expect of a base: Python 3.11 at
# /usr/bin/python3.11 with pip (Debian's python3-pip, so the definition sets
# skip_pip_install: ensurepip is not in Debian's python3), bash, and the CA store.
# ansible-builder installs ansible-core, ansible-runner, bindep and dumb-init on top from PyPI.
#
# The image carries the label gpuhost.recipe = sha256 of this script + the package list; it
# is rebuilt only when that changes (FORCE=1 rebuilds anyway). About 20-40 s here.
#
# Usage: scripts/ee-base.sh          (prints the image name; exit 0 when ready)
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE=bookworm
MIRROR=${GPUHOST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=(python3 python3.11 python3-pip ca-certificates bash)

log() { echo "ee-base: $*" >&2; }

# The name comes from the definition (one declaration): a local name, since it is built here.
IMAGE=$(scripts/ee-def.sh base_image)
case $IMAGE in
  localhost/*) ;;
  *) log "execution-environment.yml names base image $IMAGE: this script builds localhost/ images only"; exit 1 ;;
esac

RECIPE=$( { cat "$0"; printf '%s\n' "${PACKAGES[@]}" "$MIRROR"; } | sha256sum | cut -d' ' -f1)
have=$(podman image inspect --format '{{ index .Labels "gpuhost.recipe" }}' "$IMAGE" 2>/dev/null || true)
old_id=$(podman image inspect --format '{{ .Id }}' "$IMAGE" 2>/dev/null || true)
if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$RECIPE" ]; then
  log "$IMAGE is up to date (recipe ${RECIPE:0:12})"
  echo "$IMAGE"
  exit 0
fi
for tool in mmdebstrap podman; do
  command -v "$tool" >/dev/null || { log "$tool not found: run scripts/apt-ensure.sh mmdebstrap podman runc"; exit 1; }
done

exec 9>/var/tmp/gpuhost-ee-base.lock
flock 9
work=$(mktemp -d /var/tmp/gpuhost-ee-base.XXXXXX)
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
log "building $IMAGE (mmdebstrap $SUITE, recipe ${RECIPE:0:12}${have:+, was ${have:0:12}})"
# No recommends, no docs/man/locales, apt lists dropped (the EE installs nothing with apt:
# the definition's system dependencies are empty, and python3.11 is already there when
# ansible-builder's `apt-get install python3.11` runs).
timeout 1200 mmdebstrap --mode=root --variant=minbase --format=tar \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='force-unsafe-io' \
  "$SUITE" "$work/rootfs.tar" "$MIRROR" >"$work/mmdebstrap.log" 2>&1 \
  || { tail -40 "$work/mmdebstrap.log" >&2; log "mmdebstrap failed"; exit 1; }

podman import --quiet \
  --change 'CMD ["bash"]' \
  --change "LABEL gpuhost.recipe=$RECIPE" \
  "$work/rootfs.tar" "$IMAGE" >/dev/null
size=$(podman image inspect --format '{{ .Size }}' "$IMAGE")
log "built $IMAGE in $(( $(date +%s) - start )) s ($(( size / 1024 / 1024 )) MiB)"
if [ -n "$old_id" ]; then podman rmi "$old_id" >/dev/null 2>&1 || true; fi
echo "$IMAGE"
