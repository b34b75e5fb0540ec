#!/usr/bin/env bash
# The container test tier, as `make molecule` runs it: build the test image if its recipe
# changed, then `molecule test` for each scenario, one after the other, stopping at the
# first failure, with a timing per scenario.
#
# Usage: scripts/molecule.sh [scenario...]     (default: every molecule/<name>/molecule.yml
#                                               by name, except smoke; shared/ is config)
# smoke (the tier's own check: systemd container, doubles, testinfra) is not in the default
# list: default, kernel and gate exercise all of it and more. Run it by name.
# Env:   MOLECULE_SCENARIOS="a b" (same as arguments), GPUHOST_TEST_IMAGE, MOLECULE_ARGS
#        (extra arguments for `molecule test`, e.g. "--destroy=never" to keep a container).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# The collection under test is the one `make collection` installed into ./collections.
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$ROOT/collections}
export PATH=$ROOT/.venv/bin:$PATH
# Podman settings of these machines (runc, cgroupfs, ulimits) for every podman call.
export CONTAINERS_CONF=$ROOT/molecule/shared/containers.conf
export GPUHOST_TEST_IMAGE=${GPUHOST_TEST_IMAGE:-localhost/gpuhost-test:bookworm}
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1

if [ ! -d "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/gpuhost/tuning" ]; then
  echo "molecule.sh: gpuhost.tuning is not installed under $ANSIBLE_COLLECTIONS_PATH: run make collection" >&2
  exit 1
fi
if [ ! -x .venv/bin/molecule ]; then
  echo "molecule.sh: .venv/bin/molecule missing: run make venv (requirements-test.txt)" >&2
  exit 1
fi

# The scenario list: arguments, else MOLECULE_SCENARIOS, else every scenario directory.
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ] && [ -n "${MOLECULE_SCENARIOS:-}" ]; then
  read -r -a scenarios <<<"$MOLECULE_SCENARIOS"
fi
if [ ${#scenarios[@]} -eq 0 ]; then
  for f in molecule/*/molecule.yml; do
    name=$(basename "$(dirname "$f")")
    [ "$name" = smoke ] || [ "$name" = shared ] || scenarios+=("$name")
  done
fi
[ ${#scenarios[@]} -gt 0 ] || { echo "molecule.sh: no scenarios under molecule/"; exit 0; }

t0=$(date +%s)
scripts/build-test-image.sh >/dev/null
echo "molecule.sh: image $GPUHOST_TEST_IMAGE ready in $(( $(date +%s) - t0 )) s"

timings=()
for s in "${scenarios[@]}"; do
  [ -f "molecule/$s/molecule.yml" ] || { echo "molecule.sh: no scenario molecule/$s" >&2; exit 1; }
  echo "=== molecule test -s $s"
  start=$(date +%s)
  # shellcheck disable=SC2086
  if ! molecule -c molecule/shared/base.yml test -s "$s" ${MOLECULE_ARGS:-}; then
    echo "molecule.sh: scenario $s FAILED after $(( $(date +%s) - start )) s" >&2
    exit 1
  fi
  timings+=("$s $(( $(date +%s) - start )) s")
done

echo "molecule.sh: timings"
printf '  %s\n' "${timings[@]}"
echo "molecule.sh: ${#scenarios[@]} passed, 0 failed in $(( $(date +%s) - t0 )) s"
