#!/usr/bin/env bash
# Peer (a) of the fleet benchmark: the seeds' one-shot runtime fix script (message 1279 of the
# session in /work/shared/seeds/000_*.txt, "The Anatomy of the Fix Script": ten numbered steps
# with echo lines, set -e, `&& echo OK || echo FAILED` on the one expected failure, the
# C2 loop counting its writes), rebuilt from that description for the seed tree.
#
# Adapted to a host's gpuhost_root tree, paths only:
#   - ROOT=$1 (the host's gpuhost_root) is put before every file path the script names
#     (/sys/devices/system/cpu/cpu*/cpuidle/state2/disable);
#   - sysctl, setpci and modprobe are the bench's stand-ins (bench/peers/bin, first on PATH,
#     GPUHOST_ROOT=$ROOT): the same command lines, acting on $ROOT/proc/sys, the config
#     space under $ROOT/sys/bus/pci (the real setpci with -A linux-sysfs, as the tune tests
#     use it) and $ROOT/sys/module. They refuse to run without a root other than /.
#   - the GPU and root-port addresses are the seed tree's (the script named its host's).
# Everything else is as the seed ran it: the whole Device Control word 0x5937 (MRRS 4096,
# MPS 256; docs/hardware-facts.md says why the collection writes bits 14:12 only), no
# persistence, no snapshot, no check of what took.
set -e
ROOT=${1:?usage: fix-runtime.sh ROOT}
case $ROOT in /|//*) echo "fix-runtime.sh: ROOT must be a host tree, not $ROOT" >&2; exit 2 ;; esac
export GPUHOST_ROOT=$ROOT

echo "=== 1. Load nvidia_peermem ==="
modprobe nvidia_peermem && echo "OK" || echo "FAILED"

echo "=== 2. PCIe MaxReadReq 4096 on every GPU and its root port ==="
for bdf in 0000:01:00.0 0000:00:01.1 0000:02:00.0 0000:00:01.2 \
           0000:03:00.0 0000:00:03.1 0000:04:00.0 0000:00:03.2 \
           0000:81:00.0 0000:80:01.1 0000:82:00.0 0000:80:01.2 \
           0000:83:00.0 0000:80:03.1 0000:84:00.0 0000:80:03.2; do
  setpci -s "$bdf" CAP_EXP+0x08.w=5937
  echo "  $bdf: $(setpci -s "$bdf" CAP_EXP+0x08.w)"
done

echo "=== 3. NUMA balancing off ==="
sysctl -w kernel.numa_balancing=0

echo "=== 4. C2 off on every CPU ==="
C2_COUNT=0
for f in "$ROOT"/sys/devices/system/cpu/cpu*/cpuidle/state2/disable; do
  echo 1 > "$f" 2>/dev/null && C2_COUNT=$((C2_COUNT + 1))
done
echo "Disabled C2 on $C2_COUNT CPUs"

echo "=== 5. Network buffers 16 MiB ==="
sysctl -w net.core.rmem_max=16777216
sysctl -w net.core.wmem_max=16777216

echo "=== 6. Scheduler autogroup off ==="
sysctl -w kernel.sched_autogroup_enabled=0

echo "=== 7. Swappiness 10 ==="
sysctl -w vm.swappiness=10

echo "=== 8. Dirty ratios 10 / 5 ==="
sysctl -w vm.dirty_ratio=10
sysctl -w vm.dirty_background_ratio=5

echo "=== 9. perf_event_paranoid 1 ==="
sysctl -w kernel.perf_event_paranoid=1

echo "=== 10. NMI watchdog off ==="
sysctl -w kernel.nmi_watchdog=0

echo "All runtime fixes applied"
