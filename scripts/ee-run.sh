#!/usr/bin/env bash
# Run the collection's audit inside the execution environment, as AWX/AAP runs a job: an
# ansible-runner private data dir (inventory/, env/extravars, project/site.yml importing
# gpuhost.tuning.audit), `ansible-runner run --process-isolation` with podman and the EE image.
# The fleet is two host trees the playbook tests also audit (tests/fixtures/hosts.py):
# `seed` (an 8-GPU Proxmox host with XID and ECC history) and `vm` (an H200 VM),
# each reached with the local connection through its gpuhost_root, inside the container.
#
# Everything goes under DIR: hosts/<name>/ (the trees), runner/ (the private data dir and
# its artifacts), reports/ (what the audit writes). DIR is bind-mounted at the same path in
# the container, so reports name the same roots as a run on this machine would. The
# container has no network (--network=none) and runs as root (--user=0: the bind mounts are
# owned by root here; the EE's default user 1000 could not write the artifacts).
# The collection and ansible-core come from the image alone: ansible-runner passes the
# container no environment of this shell, and this machine's collections are not mounted.
#
# Usage: scripts/ee-run.sh DIR     (DIR must not exist or be empty; exits with the job's rc)
# Env:   GPUHOST_EE_IMAGE (default localhost/<options.tags[0] of execution-environment.yml>)
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF=$PWD/molecule/shared/containers.conf
BIN=$PWD/.venv/bin
log() { echo "ee-run: $*" >&2; }

[ $# -eq 1 ] || { log "usage: $0 DIR"; exit 2; }
mkdir -p "$1"
dir=$(cd "$1" && pwd)
[ -z "$(ls -A "$dir")" ] || { log "$dir is not empty"; exit 2; }
image=${GPUHOST_EE_IMAGE:-localhost/$(scripts/ee-def.sh tag)}
podman image exists "$image" || { log "image $image not built: scripts/ee-build.sh (make ee)"; exit 1; }

PYTHONPATH=$PWD/tests "$BIN/python" - "$dir" <<'PYEOF'
import os
import sys
from fixtures import hosts
base = sys.argv[1]
for name, build in (("seed", hosts.seed_health_host), ("vm", hosts.vm_host)):
    root = os.path.join(base, "hosts", name)
    os.makedirs(root)
    build(root)
PYEOF

data=$dir/runner
mkdir -p "$data/inventory" "$data/env" "$data/project"
cat >"$data/inventory/hosts" <<INI
[gpuhosts]
seed gpuhost_root=$dir/hosts/seed
vm gpuhost_root=$dir/hosts/vm

[all:vars]
ansible_connection=local
ansible_python_interpreter=/usr/bin/python3.11
INI
printf 'gpuhost_audit_report_dir: %s\n' "$dir/reports" >"$data/env/extravars"
printf 'ANSIBLE_NOCOLOR: "1"\n' >"$data/env/envvars"
cat >"$data/project/site.yml" <<'YML'
---
- name: The collection's audit, as a project's job template runs it
  ansible.builtin.import_playbook: gpuhost.tuning.audit
YML

start=$(date +%s%N)
rc=0
timeout 600 "$BIN/ansible-runner" run "$data" -p site.yml --ident ee-audit \
  --process-isolation --process-isolation-executable podman --container-image "$image" \
  --container-volume-mount "$dir:$dir" \
  --container-option=--user=0 --container-option=--network=none >"$dir/runner.out" 2>&1 || rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
log "ansible-runner in $image: rc $rc in $(( ms / 1000 )).$(( ms % 1000 / 100 )) s (output: $dir/runner.out, artifacts: $data/artifacts/ee-audit)"
[ "$rc" -eq 0 ] || tail -30 "$dir/runner.out" >&2
exit "$rc"
