#!/usr/bin/env bash
# A Proxmox-like host on the stand-in NVIDIA driver 580.95.05 and its two GPU containers,
# for the VM lab's driver run (lab/driver-setup.yml) and molecule's driver scenario
# (molecule/driver/prepare.yml). Usage:
#   driver-host.sh REPO KERNEL DOUBLES STATE [load]
# REPO: the stand-in packages (lab/driver-repo.py) as a local apt repository; KERNEL: the
# kernel the real dkms builds 580.95.05 for; DOUBLES: the folder holding tests/doubles'
# pct, apt-get and apt-cache; STATE: the pct double's state folder (/run in the lab, so
# every container is stopped after a boot); `load`: the module loaded now and at every
# boot, and the boot id noted (the lab's guest; no module loads in a container).
# Containers as Proxmox keeps them (configs in /etc/pve/lxc, ZFS subvolumes under
# /rpool/data, storage.cfg), behind the pct double: 130 with its own 580.95.05 user space
# installed by dpkg, 131 bind-mounting the host's libraries. Safe to run again.
set -euo pipefail
repo=$1 kernel=$2 doubles=$3 state=$4 load=${5:-}
old=580.95.05
echo "deb [trusted=yes] file:$repo ./" >/etc/apt/sources.list.d/gpuhost-driver.list
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  nvidia-kernel-dkms=$old-1 libcuda1=$old-1 libnvidia-ml1=$old-1 nvidia-smi=$old-1
# apt uses a file: repository's .debs in place and caches nothing; from NVIDIA's (https)
# repository they stay in apt's cache, which is where staging keeps the back-out's from
cp "$repo"/*_$old-1_amd64.deb /var/cache/apt/archives/
dkms add -m nvidia -v $old
dkms install -m nvidia -v $old -k "$kernel"
if [ "$load" = load ]; then
  printf 'nvidia\nnvidia-uvm\n' >/etc/modules-load.d/gpuhost-lab-nvidia.conf
  modprobe -a nvidia nvidia-uvm
  test "$(cat /sys/module/nvidia/version)" = "$old"
fi
install -d -m 0755 /etc/pve/lxc "$state"
printf 'zfspool: local-zfs\n\tpool rpool/data\n\tcontent rootdir,images\n\tsparse 1\n' \
  >/etc/pve/storage.cfg
rm -f /etc/pve/lxc/*.conf
gpu='lxc.cgroup2.devices.allow: c 195:* rwm
lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file
lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file
lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file'
lib=/usr/lib/x86_64-linux-gnu
for ct in 130:vllm:deb 131:comfy:bind; do
  id=${ct%%:*}; rest=${ct#*:}; name=${rest%%:*}; how=${rest#*:}
  fs=/rpool/data/subvol-$id-disk-0
  rm -rf "$fs"
  install -d "$fs/etc" "$fs/usr/bin" "$fs/var/lib/dpkg/info" "$fs/var/lib/dpkg/updates" \
    "$fs/var/cache/apt/archives" "/var/lib/lxc/$id"
  : >"$fs/var/lib/dpkg/status"
  : >"$fs/usr/bin/python3"
  echo "$name" >"$fs/etc/hostname"
  ln -sfn "$fs" "/var/lib/lxc/$id/rootfs"     # where Proxmox mounts a running container's root
  {
    printf 'arch: amd64\nhostname: %s\nmemory: 65536\nostype: debian\n' "$name"
    printf 'rootfs: local-zfs:subvol-%s-disk-0,size=64G\n' "$id"
    printf '%s\n' "$gpu"
    if [ "$how" = bind ]; then
      for p in $lib/libcuda.so.1 $lib/libnvidia-ml.so.1 /usr/bin/nvidia-smi; do
        printf 'lxc.mount.entry: %s %s none bind,ro,optional,create=file\n' "$p" "${p#/}"
      done
    fi
  } >"/etc/pve/lxc/$id.conf"
  if [ "$how" = deb ]; then
    dpkg --root="$fs" --force-not-root --force-depends --force-script-chrootless -i \
      "$repo/libcuda1_$old-1_amd64.deb" "$repo/libnvidia-ml1_$old-1_amd64.deb" \
      "$repo/nvidia-smi_$old-1_amd64.deb"
  fi
done
printf '%s\n' '#!/bin/sh' "# tests/doubles/pct (lab/driver-host.sh), state in $state" \
  "GPUHOST_DOUBLES_STATE=$state exec $doubles/pct \"\$@\"" >/usr/local/sbin/pct
chmod 0755 /usr/local/sbin/pct
printf '{"apt_repo": "%s", "containers": {"130": {"status": "running"}, "131": {"status": "running"}}}\n' \
  "$repo" >"$state/pct.json"
if [ "$load" = load ]; then
  install -d -m 0755 /var/lib/gpuhost-lab
  cat /proc/sys/kernel/random/boot_id >/var/lib/gpuhost-lab/boot-id-before
fi
pct list
dkms status
