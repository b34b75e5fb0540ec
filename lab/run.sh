#!/usr/bin/env bash
# The VM lab driver (`make lab`): a REAL reboot into a new kernel under QEMU (TCG).
#
# Steps (each timed; LAB_STEPS picks and orders them):
#   image    build the disk image, or reuse the one cached under the recipe hash
#   boot     start the VM on a fresh qcow2 overlay, wait (bounded) for SSH
#   ping     ansible -m ping through the generated inventory
#   setup    first-boot set-up: /etc/pve/lxc/129.conf from /proc/devices (lab/setup.yml)
#   audit    HOOK: LAB_AUDIT_PLAYBOOK (empty = skipped), e.g. gpuhost.tuning.audit, then
#            LAB_AUDIT_CHECK (lab/audit-check.yml: asserts on the report JSON)
#   tune     HOOK: LAB_TUNE_PLAYBOOK (empty = skipped), e.g. gpuhost.tuning.tune; may fail
#            (QEMU ignores MRRS writes) when LAB_TUNE_CHECK (lab/tune-check.yml) then passes
#   upgrade  HOOK: LAB_UPGRADE_PLAYBOOK (default lab/upgrade.yml): new kernel + headers,
#            DKMS gate, initramfs, default boot entry
#   reboot   ansible.builtin.reboot, bounded (lab/reboot.yml)
#   assert   new kernel running, gpustub loaded with disable_hmm=1 (lab/assert.yml)
#   verify   HOOK: LAB_VERIFY_PLAYBOOK (empty = skipped)
#   gate     lab/gate.yml: reboot_verify aimed at a kernel without headers must stop before
#            the reboot, boot configuration untouched (needs the collection run's variables)
# LAB_COLLECTION=1 runs the collection's playbooks in the hooks (`make lab-collection`).
#   driver_setup / driver_gate / driver_upgrade / driver_assert  (LAB_DRIVER=1, `make
#            lab-driver`): the stand-in NVIDIA driver 580.95.05 installed and loaded;
#            gpuhost.tuning.driver_upgrade leaving container 130 behind must stop before
#            the reboot naming it; the whole upgrade to 590.48.01 with the real reboot;
#            the loaded module, DKMS, both containers and the rollout summary checked
#   shutdown power off, delete the overlay
# Every playbook gets -i <run>/inventory.yml and -e @<run>/lab-vars.yml (lab_kernel_old,
# lab_kernel_new, lab_dkms_name, lab_run_dir, ...); LAB_PLAYBOOK_ARGS adds more to all.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$LAB_DIR/vm.sh"

ALL_STEPS="image boot ping setup audit tune upgrade reboot assert verify gate driver_setup driver_gate driver_upgrade driver_assert shutdown"
# LAB_DRIVER=1 (`make lab-driver`): the NVIDIA driver upgrade with lab/vars/driver.yml.
if [ -n "${LAB_DRIVER:-}" ]; then
  : "${LAB_STEPS:=image boot ping driver_setup driver_gate driver_upgrade driver_assert shutdown}"
  LAB_PLAYBOOK_ARGS="-e @$LAB_DIR/vars/driver.yml ${LAB_PLAYBOOK_ARGS:-}"
fi
# LAB_COLLECTION=1 (`make lab-collection`): the collection's own playbooks fill the hooks,
# with lab/vars/collection.yml; reboot_verify reboots by itself, so no `reboot` step.
if [ -n "${LAB_COLLECTION:-}" ]; then
  : "${LAB_AUDIT_PLAYBOOK:=gpuhost.tuning.audit}" "${LAB_TUNE_PLAYBOOK:=gpuhost.tuning.tune}"
  : "${LAB_UPGRADE_PLAYBOOK:=gpuhost.tuning.reboot_verify}"
  : "${LAB_STEPS:=image boot ping setup audit tune upgrade assert gate shutdown}"
  LAB_PLAYBOOK_ARGS="-e @$LAB_DIR/vars/collection.yml ${LAB_PLAYBOOK_ARGS:-}"
fi
LAB_STEPS=${LAB_STEPS:-"image boot ping setup audit upgrade reboot assert verify shutdown"}
LAB_AUDIT_PLAYBOOK=${LAB_AUDIT_PLAYBOOK:-}
LAB_AUDIT_CHECK=${LAB_AUDIT_CHECK:-$LAB_DIR/audit-check.yml}
LAB_TUNE_PLAYBOOK=${LAB_TUNE_PLAYBOOK:-}
LAB_TUNE_CHECK=${LAB_TUNE_CHECK:-$LAB_DIR/tune-check.yml}
LAB_UPGRADE_PLAYBOOK=${LAB_UPGRADE_PLAYBOOK:-$LAB_DIR/upgrade.yml}
LAB_VERIFY_PLAYBOOK=${LAB_VERIFY_PLAYBOOK:-}
LAB_PLAYBOOK_ARGS=${LAB_PLAYBOOK_ARGS:-}
LAB_KEEP=${LAB_KEEP:-}            # 1: leave the VM running at the end (or on failure)
export ANSIBLE_CONFIG=${ANSIBLE_CONFIG:-$REPO_DIR/ansible.cfg}
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$REPO_DIR/collections}
export ANSIBLE_FORCE_COLOR=${ANSIBLE_FORCE_COLOR:-0}
BIN=${LAB_ANSIBLE_BIN:-$REPO_DIR/.venv/bin}
[ -x "$BIN/ansible-playbook" ] || BIN=$(dirname "$(command -v ansible-playbook || echo /nonexistent/x)")
[ -x "$BIN/ansible-playbook" ] || die "ansible-playbook not found: run 'make venv' (or set LAB_ANSIBLE_BIN)"

LAB_RUN=${LAB_RUN:-$LAB_CACHE/runs/$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$LAB_RUN"
LAB_TIMINGS="$LAB_RUN/timings.txt"
: >"$LAB_TIMINGS"
IMAGE_DIR=
t_run=$(now)
failed_step=

finish() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    log "FAILED in step '${failed_step:-?}' (exit $rc); run folder: $LAB_RUN"
    [ -f "$LAB_RUN/console.log" ] && vm_console_tail 60
  fi
  [ -n "$IMAGE_DIR" ] || IMAGE_DIR=$(lab_image_dir)
  if [ -n "$LAB_KEEP" ] && vm_alive; then
    log "LAB_KEEP set: VM left running (pid $(vm_pid)): ssh -p $LAB_SSH_PORT -i $IMAGE_DIR/id_ed25519 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@127.0.0.1"
    log "stop it with: touch $LAB_RUN/stop; kill $(cat "$LAB_RUN/qemu.pid" 2>/dev/null); rm $LAB_RUN/overlay.qcow2"
  else
    vm_kill
    rm -f "$LAB_RUN/overlay.qcow2" "$LAB_RUN/OVMF_VARS.fd"
  fi
  record_time total "$t_run" 2>/dev/null || true
  log "timings (seconds):"; column -t "$LAB_TIMINGS" >&2 2>/dev/null || cat "$LAB_TIMINGS" >&2
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

# The *_ARGS variables are split into words at blanks (no quotes, no globbing).
words() { local -n __words=$1; read -r -a __words <<<"${2:-}"; }

playbook() { # playbook-or-FQCN [args...]
  local pb=$1 common; shift
  words common "$LAB_PLAYBOOK_ARGS"
  "$BIN/ansible-playbook" -i "$LAB_RUN/inventory.yml" -e "@$LAB_RUN/lab-vars.yml" \
    "${common[@]}" "$@" "$pb" 2>&1 | tee -a "$LAB_RUN/ansible.log"
  return "${PIPESTATUS[0]}"
}

write_lab_vars() {
  . "$IMAGE_DIR/ids.env"
  cat >"$LAB_RUN/lab-vars.yml" <<VARS
lab_kernel_old: $LAB_KERNEL_OLD
lab_kernel_new: $LAB_KERNEL_NEW
lab_dkms_name: $LAB_DKMS_NAME
lab_dkms_version: "$LAB_DKMS_VERSION"
lab_guest_repo: $LAB_GUEST_REPO
lab_machine_id: $MACHINE_ID
lab_run_dir: $LAB_RUN
lab_stale_major: "${LAB_STALE_MAJOR:-auto}"
VARS
}

step_image() {
  local hash; hash=$(lab_recipe_hash)
  local cached=cold
  [ -f "$LAB_CACHE/images/$hash/disk.qcow2" ] && [ -z "${LAB_REBUILD:-}" ] && cached=cached
  IMAGE_DIR=$("$LAB_DIR/build-image.sh")
  printf 'image_%s %s\n' "$cached" "$(elapsed "$STEP_T0")" >>"$LAB_TIMINGS"
  write_lab_vars
}
ensure_image_dir() {
  if [ -z "$IMAGE_DIR" ]; then
    IMAGE_DIR=$(lab_image_dir)
    [ -f "$IMAGE_DIR/disk.qcow2" ] || die "no image at $IMAGE_DIR: include the 'image' step"
    write_lab_vars
  fi
}
step_boot() { ensure_image_dir; vm_start; vm_wait_ssh "$LAB_SSH_TIMEOUT"; vm_ssh 'uname -r; systemctl is-system-running || true' >&2; }
step_ping() { "$BIN/ansible" -i "$LAB_RUN/inventory.yml" lab -m ansible.builtin.ping; }
step_setup() { playbook "$LAB_DIR/setup.yml"; }
step_audit() {
  [ -n "$LAB_AUDIT_PLAYBOOK" ] || { log "audit hook empty (set LAB_AUDIT_PLAYBOOK): skipped"; return 0; }
  local args; words args "${LAB_AUDIT_ARGS:-}"
  playbook "$LAB_AUDIT_PLAYBOOK" "${args[@]}"
  [ -z "$LAB_AUDIT_CHECK" ] || playbook "$LAB_AUDIT_CHECK"
}
# tune fails the host when a device ignores the MRRS write (QEMU's NVMe does): that is the
# expected result here, so its exit code is kept and LAB_TUNE_CHECK judges the report.
step_tune() {
  [ -n "$LAB_TUNE_PLAYBOOK" ] || { log "tune hook empty (set LAB_TUNE_PLAYBOOK): skipped"; return 0; }
  local rc=0 args; words args "${LAB_TUNE_ARGS:-}"
  playbook "$LAB_TUNE_PLAYBOOK" "${args[@]}" || rc=$?
  log "tune playbook exited $rc"
  if [ -n "$LAB_TUNE_CHECK" ]; then
    playbook "$LAB_TUNE_CHECK" -e "lab_tune_rc=$rc"
  else
    return "$rc"
  fi
}
step_upgrade() { local args; words args "${LAB_UPGRADE_ARGS:-}"; playbook "$LAB_UPGRADE_PLAYBOOK" "${args[@]}"; }
step_reboot() { playbook "$LAB_DIR/reboot.yml"; }
step_assert() { playbook "$LAB_DIR/assert.yml"; }
step_verify() {
  [ -n "$LAB_VERIFY_PLAYBOOK" ] || { log "verify hook empty (set LAB_VERIFY_PLAYBOOK): skipped"; return 0; }
  local args; words args "${LAB_VERIFY_ARGS:-}"
  playbook "$LAB_VERIFY_PLAYBOOK" "${args[@]}"
}
step_gate() {
  playbook "$LAB_DIR/gate.yml" -e "gpuhost_kernel_version=$LAB_KERNEL_OLD" \
    -e "gpuhost_report_dir=$LAB_RUN/reports/gate"
}
step_driver_setup() { playbook "$LAB_DIR/driver-setup.yml"; }
# Container 130 left out of the staging: the gate must stop before the reboot, naming it.
step_driver_gate() {
  local rc=0 out="$LAB_RUN/driver-gate.log" boot
  boot=$(vm_ssh 'cat /proc/sys/kernel/random/boot_id')
  playbook gpuhost.tuning.driver_upgrade -e '{"gpuhost_driver_containers": [131]}' \
    -e "gpuhost_report_dir=$LAB_RUN/reports/driver-gate" >"$out" || rc=$?
  tail -n 40 "$out" >&2
  [ "$rc" -ne 0 ] || die "driver_upgrade passed with container 130 left at 580.95.05"
  grep -q 'not rebooting: driver gate for 590.48.01: 130: user space 580.95.05, target 590.48.01 (installed-deb): stage it' "$out" \
    || die "the driver gate did not name container 130 (see $out)"
  [ "$(vm_ssh 'cat /proc/sys/kernel/random/boot_id')" = "$boot" ] || die "the guest rebooted past the driver gate"
  log "driver gate stopped before the reboot, naming container 130 (exit $rc)"
}
step_driver_upgrade() { playbook gpuhost.tuning.driver_upgrade; }
step_driver_assert() { playbook "$LAB_DIR/driver-assert.yml"; }
step_shutdown() {
  [ -n "$LAB_KEEP" ] && { log "LAB_KEEP set: not shutting down"; return 0; }
  vm_stop
  rm -f "$LAB_RUN/overlay.qcow2" "$LAB_RUN/OVMF_VARS.fd"
}

log "run folder $LAB_RUN; steps: $LAB_STEPS"
log "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "hooks: audit=$LAB_AUDIT_PLAYBOOK tune=$LAB_TUNE_PLAYBOOK upgrade=$LAB_UPGRADE_PLAYBOOK verify=$LAB_VERIFY_PLAYBOOK; args: $LAB_PLAYBOOK_ARGS"
for s in $LAB_STEPS; do
  declare -F "step_$s" >/dev/null || die "unknown step '$s' (known: $ALL_STEPS)"
done
for s in $LAB_STEPS; do
  failed_step=$s
  log "== step $s"
  STEP_T0=$(now)
  "step_$s"
  record_time "$s" "$STEP_T0"
  log "   load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
failed_step=
log "lab run passed: $LAB_RUN"
