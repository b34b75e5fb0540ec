#!/usr/bin/env bash
# The container test tier, as `make molecule` runs it: build the test images if their recipe
# changed, then `molecule test` for each scenario on each platform (Debian 12 "bookworm" =
# Proxmox VE 8 userland, Debian 13 "trixie" = Proxmox VE 9), with a timing per run. Runs go
# in lanes: the runs of one lane one after the other (stopping at a lane's first failure),
# the lanes side by side. Default lanes: per platform, the scenarios that share that
# platform's podman volume of apt downloads (gate, kernel: apt does not wait for another
# apt's lock) in one lane; every other scenario of every platform in one more lane. Their
# output is printed lane by lane at the end. Containers are named gpuhost-<scenario>-<suite>
# and each run has its own ephemeral folder, so the lanes never meet.
#
# Usage: scripts/molecule.sh [scenario...]     (default: every molecule/<name>/molecule.yml
#                                               by name, except NAMED_ONLY; shared/ is config)
# NAMED_ONLY scenarios run only when named: smoke (the tier's own check: systemd container,
# doubles, testinfra; default, kernel and gate exercise all of it and more) and driver (the
# NVIDIA driver upgrade, `make molecule-driver`: 80-85 s of CPU per suite, controller and
# container, measured quiet; on both suites the tier's CPU grows from 377 to 540 s, and its
# lane is make test's longest, with 3-4.5 minutes to the 30-minute budget in CI; the
# integration tier's test_driver_upgrade.py runs its module paths with the real dkms).
# Env:   MOLECULE_SCENARIOS="a b" (same as arguments), MOLECULE_SUITES (default
#        "bookworm trixie"), GPUHOST_TEST_IMAGE_REPO (default localhost/gpuhost-test: the
#        images are <repo>:<suite>), MOLECULE_ARGS (extra arguments for `molecule test`,
#        e.g. "--destroy=never" to keep a container), MOLECULE_SERIAL=1 (one lane: every
#        run one after the other).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# The collection under test is the one `make collection` installed into ./collections.
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$ROOT/collections}
export PATH=$ROOT/.venv/bin:$PATH
# Podman settings of these machines (runc, cgroupfs, ulimits) for every podman call.
export CONTAINERS_CONF=$ROOT/molecule/shared/containers.conf
REPO_IMAGE=${GPUHOST_TEST_IMAGE_REPO:-localhost/gpuhost-test}
read -r -a suites <<<"${MOLECULE_SUITES:-bookworm trixie}"
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
NAMED_ONLY="smoke driver"
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ] && [ -n "${MOLECULE_SCENARIOS:-}" ]; then
  read -r -a scenarios <<<"$MOLECULE_SCENARIOS"
fi
if [ ${#scenarios[@]} -eq 0 ]; then
  for f in molecule/*/molecule.yml; do
    name=$(basename "$(dirname "$f")")
    case " $NAMED_ONLY shared " in *" $name "*) continue ;; esac
    scenarios+=("$name")
  done
fi
[ ${#scenarios[@]} -gt 0 ] || { echo "molecule.sh: no scenarios under molecule/"; exit 0; }

t0=$(date +%s)
declare -A old_kernel new_kernel
for suite in "${suites[@]}"; do
  GPUHOST_TEST_IMAGE=$REPO_IMAGE:$suite scripts/build-test-image.sh "$suite" >/dev/null
  old_kernel[$suite]=$(podman image inspect --format '{{ index .Labels "gpuhost.old_kernel" }}' "$REPO_IMAGE:$suite")
  new_kernel[$suite]=$(podman image inspect --format '{{ index .Labels "gpuhost.new_kernel" }}' "$REPO_IMAGE:$suite")
  echo "molecule.sh: image $REPO_IMAGE:$suite ready at $(( $(date +%s) - t0 )) s (kernels ${old_kernel[$suite]} -> ${new_kernel[$suite]})"
done
# Each run's ephemeral folder (molecule's state, the reports): one per checkout, platform
# and scenario, kept between runs so `destroy` finds a container a killed run left.
EPHEMERAL=${XDG_CACHE_HOME:-$HOME/.cache}/molecule/gpuhost-$(printf '%s' "$ROOT" | sha256sum | cut -c1-8)

for s in "${scenarios[@]}"; do
  [ -f "molecule/$s/molecule.yml" ] || { echo "molecule.sh: no scenario molecule/$s" >&2; exit 1; }
done

# sample_cpu CONTAINER FILE: the container's CPU time so far (podman stats, ns: its cgroup,
# every process in it) into FILE every 10 s, the largest seen, until killed. What the
# controller side (molecule, ansible-playbook, podman exec) spends is measured by
# /usr/bin/time; the container's processes (apt, dpkg, dkms, update-initramfs, the modules)
# are not children of molecule, so they are sampled here.
sample_cpu() {
  local c=$1 f=$2 v have=0
  while sleep 10; do
    v=$(timeout 30 podman stats --no-stream --format '{{.CPUNano}}' "$c" 2>/dev/null) || continue
    case $v in ''|*[!0-9]*) continue ;; esac
    if [ "$v" -gt "$have" ]; then have=$v; echo "$have" >"$f"; fi
  done
}

# run_lane LOG SUITE:SCENARIO...: molecule test for each, in order; timings (wall, the CPU
# time of the controller side and of the container, the load before and after) and the
# verdict in LOG.
run_lane() {
  local log=$1 run suite s start rc sampler cpu_c load0
  shift
  for run in "$@"; do
    suite=${run%%:*} s=${run#*:}
    echo "=== molecule test -s $s on $suite"
    start=$(date +%s)
    load0=$(uptime | sed 's/.*load average: *//; s/,.*//')
    rm -f "$work/cpu.$suite.$s" "$work/time.$suite.$s"
    sample_cpu "gpuhost-$s-$suite" "$work/cpu.$suite.$s" &
    sampler=$!
    rc=0
    # shellcheck disable=SC2086
    GPUHOST_TEST_SUITE=$suite GPUHOST_TEST_IMAGE=$REPO_IMAGE:$suite \
      GPUHOST_OLD_KERNEL=${old_kernel[$suite]} GPUHOST_NEW_KERNEL=${new_kernel[$suite]} \
      MOLECULE_EPHEMERAL_DIRECTORY=$EPHEMERAL/$suite/$s \
      /usr/bin/time -f '%U %S' -o "$work/time.$suite.$s" \
      molecule -c molecule/shared/base.yml test -s "$s" ${MOLECULE_ARGS:-} || rc=$?
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    # (on a failure time's first line says so; the figures are on its last)
    cpu_c=$(tail -n 1 "$work/time.$suite.$s" 2>/dev/null | awk '{printf "%d", $1 + $2}')
    cpu_c="CPU controller ${cpu_c:-?} s, container $(awk '{printf "%d", $1 / 1e9}' \
      "$work/cpu.$suite.$s" 2>/dev/null || echo "?") s; load $load0 -> $(uptime \
      | sed 's/.*load average: *//; s/,.*//')"
    if [ "$rc" -ne 0 ]; then
      echo "molecule.sh: scenario $s on $suite FAILED after $(( $(date +%s) - start )) s ($cpu_c)" | tee -a "$log" >&2
      return 1
    fi
    echo "  $s on $suite $(( $(date +%s) - start )) s ($cpu_c)" >>"$log"
  done
}

# The lanes: per platform, the runs whose molecule.yml mounts the platform's apt volume;
# then one lane of all the other runs.
lanes=() others=""
for suite in "${suites[@]}"; do
  shared=""
  for s in "${scenarios[@]}"; do
    if grep -q 'gpuhost-molecule-apt-archives' "molecule/$s/molecule.yml"; then
      shared+=" $suite:$s"
    else
      others+=" $suite:$s"
    fi
  done
  [ -z "$shared" ] || lanes+=("${shared# }")
done
[ -z "$others" ] || lanes+=("${others# }")
if [ -n "${MOLECULE_SERIAL:-}" ]; then
  lanes=("${lanes[*]}")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs=0
pids=()
echo "molecule.sh: ${#lanes[@]} lane(s) side by side:$(printf ' [%s]' "${lanes[@]}")"
for i in "${!lanes[@]}"; do
  read -r -a lane <<<"${lanes[$i]}"
  runs=$(( runs + ${#lane[@]} ))
  run_lane "$work/timings.$i" "${lane[@]}" >"$work/lane-$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
for i in "${!lanes[@]}"; do
  echo "=== molecule.sh: output of lane $i [${lanes[$i]}]"
  cat "$work/lane-$i.log"
done
echo "molecule.sh: timings"
cat "$work"/timings.* 2>/dev/null || true
if [ "$failed" -ne 0 ]; then
  echo "molecule.sh: FAILED after $(( $(date +%s) - t0 )) s" >&2
  exit 1
fi
echo "molecule.sh: $runs passed, 0 failed in $(( $(date +%s) - t0 )) s"
