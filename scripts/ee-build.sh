#!/usr/bin/env bash
# Build the execution environment execution-environment.yml defines, with ansible-builder and
# podman, on the local base image scripts/ee-base.sh makes (no registry is reachable here).
# The image name and tag come from the definition (options.tags); the collection from the
# tarball `make build` writes (the definition's additional_build_files), built first here.
#
# pip inside the build fetches from PyPI over HTTPS: this machine's CA bundle is mounted over
# the base's for the build only (podman build -v), never copied into the image.
# Podman runs with molecule/shared/containers.conf (runc, cgroupfs, ulimits these machines
# need). The build context goes to build/ee-context. Measured times: docs/measurements.md.
#
# Usage: scripts/ee-build.sh        (prints the image name)
# Env:   GPUHOST_EE_NO_CACHE=1 builds without podman's layer cache (as on a fresh machine);
#        FORCE=1 rebuilds the base too (scripts/ee-base.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF=$PWD/molecule/shared/containers.conf
BIN=$PWD/.venv/bin
CA=${GPUHOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
log() { echo "ee-build: $*" >&2; }

base=$(scripts/ee-base.sh)
tag=$(scripts/ee-def.sh tag)
start=$(date +%s)
"$BIN/ansible-galaxy" collection build --force --output-path build . >/dev/null
rm -rf build/ee-context
old_id=$(podman image inspect --format '{{ .Id }}' "$tag" 2>/dev/null || true)
nocache=()
[ "${GPUHOST_EE_NO_CACHE:-0}" = 1 ] && nocache=(--no-cache)
log "ansible-builder build $tag on $base"
mounts=()
[ -f "$CA" ] && mounts=("--extra-build-cli-args=-v $CA:/etc/ssl/certs/ca-certificates.crt:ro")
timeout 1800 "$BIN/ansible-builder" build --file execution-environment.yml --context build/ee-context \
  --container-runtime podman "${mounts[@]}" "${nocache[@]}" -v 3 >build/ee-build.log 2>&1 \
  || { tail -40 build/ee-build.log >&2; log "ansible-builder build failed (whole log: build/ee-build.log)"; exit 1; }
size=$(podman image inspect --format '{{ .Size }}' "$tag")
new_id=$(podman image inspect --format '{{ .Id }}' "$tag")
# The previous build of this tag (now untagged) goes, so old builds do not pile up.
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then podman rmi "$old_id" >/dev/null 2>&1 || true; fi
log "built localhost/$tag in $(( $(date +%s) - start )) s ($(( size / 1024 / 1024 )) MiB)"
echo "localhost/$tag"
