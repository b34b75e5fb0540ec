#!/usr/bin/env bash
# The container test tier, as `make molecule` runs it: build the test image if its recipe
# changed, then `molecule test` for each scenario, with a timing per scenario. Scenarios run
# in lanes: the scenarios of one lane one after the other (stopping at a lane's first
# failure), the lanes side by side. Default lanes: the scenarios that share the podman volume
# of apt downloads (gate, kernel: apt does not wait for another apt's lock) in one lane,
# every other scenario in a second lane; their output is printed lane by lane at the end.
#
# Usage: scripts/molecule.sh [scenario...]     (default: every molecule/<name>/molecule.yml
#                                               by name, except smoke; shared/ is config)
# smoke (the tier's own check: systemd container, doubles, testinfra) is not in the default
# list: default, kernel and gate exercise all of it and more. Run it by name.
# Env:   MOLECULE_SCENARIOS="a b" (same as arguments), GPUHOST_TEST_IMAGE, MOLECULE_ARGS
#        (extra arguments for `molecule test`, e.g. "--destroy=never" to keep a container),
#        MOLECULE_SERIAL=1 (one lane: every scenario one after the other).
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

for s in "${scenarios[@]}"; do
  [ -f "molecule/$s/molecule.yml" ] || { echo "molecule.sh: no scenario molecule/$s" >&2; exit 1; }
done

# run_lane LOG SCENARIO...: molecule test for each, in order; timings and the verdict in LOG.
run_lane() {
  local log=$1 s start
  shift
  for s in "$@"; do
    echo "=== molecule test -s $s"
    start=$(date +%s)
    # shellcheck disable=SC2086
    if ! molecule -c molecule/shared/base.yml test -s "$s" ${MOLECULE_ARGS:-}; then
      echo "molecule.sh: scenario $s FAILED after $(( $(date +%s) - start )) s" | tee -a "$log" >&2
      return 1
    fi
    echo "  $s $(( $(date +%s) - start )) s" >>"$log"
  done
}

# The lanes: scenarios whose molecule.yml mounts the shared apt volume, then the others.
shared=() others=()
for s in "${scenarios[@]}"; do
  if [ -z "${MOLECULE_SERIAL:-}" ] && ! grep -q 'gpuhost-molecule-apt-archives' "molecule/$s/molecule.yml"; then
    others+=("$s")
  else
    shared+=("$s")
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/timings"
pids=()
if [ ${#others[@]} -gt 0 ] && [ ${#shared[@]} -gt 0 ]; then
  echo "molecule.sh: lanes side by side: [${others[*]}] and [${shared[*]}]"
  run_lane "$work/timings.b" "${others[@]}" >"$work/lane-b.log" 2>&1 &
  pids+=($!)
  run_lane "$work/timings.a" "${shared[@]}" >"$work/lane-a.log" 2>&1 &
  pids+=($!)
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  for lane in a b; do
    echo "=== molecule.sh: output of lane $lane"
    cat "$work/lane-$lane.log"
  done
  cat "$work/timings.a" "$work/timings.b" >"$work/timings" 2>/dev/null || true
else
  failed=0
  run_lane "$work/timings" "${shared[@]}" "${others[@]}" || failed=1
fi
echo "molecule.sh: timings"
cat "$work/timings"
if [ "$failed" -ne 0 ]; then
  echo "molecule.sh: FAILED after $(( $(date +%s) - t0 )) s" >&2
  exit 1
fi
echo "molecule.sh: ${#scenarios[@]} passed, 0 failed in $(( $(date +%s) - t0 )) s"
