# shellcheck shell=bash
# VM helpers for lab/run.sh: start QEMU (TCG) on a copy-on-write overlay, wait for SSH,
# run commands, stop, and show the serial console. Needs: LAB_RUN (the run's folder),
# IMAGE_DIR (from build-image.sh).
OVMF_CODE=${OVMF_CODE:-/usr/share/OVMF/OVMF_CODE_4M.fd}
OVMF_VARS=${OVMF_VARS:-/usr/share/OVMF/OVMF_VARS_4M.fd}
LAB_MEM_MIB=${LAB_MEM_MIB:-2048}
LAB_SMP=${LAB_SMP:-2}
# Boot to SSH took 110-290 s under TCG on the 2-core host at load 7-15: bound it at 600 s.
LAB_SSH_TIMEOUT=${LAB_SSH_TIMEOUT:-600}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

ssh_opts() {
  printf '%s\n' -p "$LAB_SSH_PORT" -i "$IMAGE_DIR/id_ed25519" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=10
}
# The command is a string for the guest's shell, expanded there on purpose.
# shellcheck disable=SC2029
vm_ssh() { local o; mapfile -t o < <(ssh_opts); ssh "${o[@]}" root@127.0.0.1 "$@"; }

# QEMU runs under a supervisor (see vm_start): vm_pid is the supervisor, which outlives
# the QEMU process across a guest reboot; qemu.pid is the current QEMU.
vm_pid() { [ -f "$LAB_RUN/supervisor.pid" ] && cat "$LAB_RUN/supervisor.pid"; }
vm_alive() { local p; p=$(vm_pid) && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }

vm_console_tail() { # lines
  local n=${1:-60}
  if [ -s "$LAB_RUN/console.log" ]; then
    log "serial console, last $n lines ($LAB_RUN/console.log):"
    tail -n "$n" "$LAB_RUN/console.log" | tr -d '\r' | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' >&2
  else
    log "serial console log is empty ($LAB_RUN/console.log)"
  fi
}

vm_write_inventory() {
  cat >"$LAB_RUN/inventory.yml" <<INV
# Written by lab/run.sh for one run of the lab VM (QEMU user networking, SSH on loopback).
all:
  hosts:
    gpuhost-lab:
      ansible_host: 127.0.0.1
      ansible_port: $LAB_SSH_PORT
      ansible_user: root
      ansible_ssh_private_key_file: $IMAGE_DIR/id_ed25519
      ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
      ansible_python_interpreter: /usr/bin/python3
  children:
    lab:
      hosts:
        gpuhost-lab:
INV
}

vm_start() {
  [ -r "$OVMF_CODE" ] || die "UEFI firmware $OVMF_CODE missing: install ovmf"
  qemu-img create -q -f qcow2 -F qcow2 -b "$IMAGE_DIR/disk.qcow2" "$LAB_RUN/overlay.qcow2"
  cp "$OVMF_VARS" "$LAB_RUN/OVMF_VARS.fd"
  LAB_SSH_PORT=${LAB_SSH_PORT:-$(free_port)}
  vm_write_inventory
  : >"$LAB_RUN/console.log"
  # q35, TCG (KVM guests hang on these machines), UEFI. The root disk sits on the root
  # complex (parent pci0000:00, as a passed-through GPU in a VM); an NVMe controller sits
  # behind a PCIe root port, so lspci shows a bridge and DevCtl MaxReadReq (QEMU ignores
  # MRRS writes: the lab's expected "write ignored" failure).
  # Commas inside QEMU's option values (tcg,thread=multi) are QEMU's, not array separators.
  # shellcheck disable=SC2054
  local qemu=(
    qemu-system-x86_64 -name gpuhost-lab -machine q35 -accel tcg,thread=multi
    -smp "$LAB_SMP" -m "$LAB_MEM_MIB"
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE"
    -drive "if=pflash,format=raw,unit=1,file=$LAB_RUN/OVMF_VARS.fd"
    -drive "if=none,id=root,format=qcow2,file=$LAB_RUN/overlay.qcow2,cache=unsafe,discard=unmap"
    -device virtio-blk-pci,drive=root,bootindex=0
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$LAB_SSH_PORT-:22"
    -device virtio-net-pci,netdev=n0
    -device pcie-root-port,id=rp1,chassis=1,slot=1
    -blockdev driver=null-co,node-name=nvnull,size=67108864,read-zeroes=on
    -device nvme,bus=rp1,drive=nvnull,serial=gpuhostlab0
    -device virtio-rng-pci
    -display none -vga none -monitor none
    -chardev "file,id=ser0,path=$LAB_RUN/console.log,append=on" -serial chardev:ser0
    -no-reboot
  )
  printf '%q ' "${qemu[@]}" >"$LAB_RUN/qemu.cmd"; echo >>"$LAB_RUN/qemu.cmd"
  rm -f "$LAB_RUN/stop"
  vm_supervise "${qemu[@]}" </dev/null >>"$LAB_RUN/supervisor.log" 2>&1 &
  echo $! >"$LAB_RUN/supervisor.pid"
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -s "$LAB_RUN/qemu.pid" ] && break
    sleep 1
  done
  if ! { vm_alive && [ -s "$LAB_RUN/qemu.pid" ] && kill -0 "$(cat "$LAB_RUN/qemu.pid")" 2>/dev/null; }; then
    cat "$LAB_RUN/supervisor.log" >&2
    die "qemu did not start (see $LAB_RUN/supervisor.log)"
  fi
  log "VM started: supervisor pid $(vm_pid), qemu pid $(cat "$LAB_RUN/qemu.pid"), ssh 127.0.0.1:$LAB_SSH_PORT, console $LAB_RUN/console.log"
}

# QEMU's in-place reset under TCG hung once in this lab (after "reboot: machine restart"
# the firmware never reached the kernel; the same reboot had worked in the run before).
# So QEMU runs with -no-reboot, and this loop powers the VM on again, same disk and same
# UEFI variables, when the guest kernel asked for a restart; a power-off or a crash ends it.
vm_supervise() {
  local boots=0 rc
  while :; do
    boots=$((boots + 1))
    echo "[supervisor $(date +%T)] power on #$boots"
    "$@" &
    echo $! >"$LAB_RUN/qemu.pid"
    wait $! && rc=0 || rc=$?
    echo "[supervisor $(date +%T)] qemu exited rc=$rc"
    [ -f "$LAB_RUN/stop" ] && break
    if [ "$boots" -lt 20 ] && tail -n 5 "$LAB_RUN/console.log" | grep -q 'reboot: Restarting system'; then
      continue
    fi
    break
  done
  rm -f "$LAB_RUN/qemu.pid"
}

vm_wait_ssh() { # timeout seconds
  local limit=${1:-$LAB_SSH_TIMEOUT} start=$SECONDS
  while :; do
    vm_alive || { vm_console_tail 80; die "QEMU exited before SSH came up"; }
    local o; mapfile -t o < <(ssh_opts)
    if timeout 30 ssh "${o[@]}" root@127.0.0.1 true 2>/dev/null; then
      return 0
    fi
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      vm_console_tail 80
      die "no SSH on 127.0.0.1:$LAB_SSH_PORT after ${limit}s"
    fi
    sleep 3
  done
}

# Power off from inside, wait (bounded) for QEMU to exit, kill it otherwise.
vm_stop() {
  vm_alive || return 0
  touch "$LAB_RUN/stop"
  vm_ssh 'systemctl poweroff --no-block' >/dev/null 2>&1 || true
  for _ in $(seq 1 "${LAB_STOP_TIMEOUT:-120}"); do
    vm_alive || return 0
    sleep 1
  done
  log "VM did not power off in ${LAB_STOP_TIMEOUT:-120}s: killing it"
  vm_kill
}

vm_kill() {
  touch "$LAB_RUN/stop" 2>/dev/null || true
  local p q
  q=$(cat "$LAB_RUN/qemu.pid" 2>/dev/null || true)
  [ -n "$q" ] && kill "$q" 2>/dev/null
  p=$(vm_pid || true)
  [ -n "$p" ] || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || return 0; sleep 1; done
  [ -n "$q" ] && kill -9 "$q" 2>/dev/null
  kill "$p" 2>/dev/null || true
}
