#!/usr/bin/env bash
# molecule driver scenario, prepare: the host on the stand-in NVIDIA driver 580.95.05 and
# its two GPU containers (see ../prepare.yml). Usage: driver-host.sh REPO OLD_KERNEL
set -euo pipefail
repo=$1 kernel=$2 old=580.95.05
echo "deb [trusted=yes] file:$repo ./" >/etc/apt/sources.list.d/gpuhost-driver.list
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  nvidia-kernel-dkms=$old-1 libcuda1=$old-1 libnvidia-ml1=$old-1 nvidia-smi=$old-1
# apt uses a file: repository's .debs in place and caches nothing; from NVIDIA's (https)
# repository they stay in apt's cache, which is where staging keeps the back-out's from
cp "$repo"/*_$old-1_amd64.deb /var/cache/apt/archives/
dkms add -m nvidia -v $old
dkms install -m nvidia -v $old -k "$kernel"
# Proxmox's storage and the containers (ZFS subvolumes as folders)
install -d -m 0755 /etc/pve/lxc /var/lib/gpuhost-doubles
printf 'zfspool: local-zfs\n\tpool rpool/data\n\tcontent rootdir,images\n\tsparse 1\n' \
  >/etc/pve/storage.cfg
gpu='lxc.cgroup2.devices.allow: c 195:* rwm
lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file
lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file
lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file'
lib=/usr/lib/x86_64-linux-gnu
for ct in 130:vllm:deb 131:comfy:bind; do
  id=${ct%%:*}; rest=${ct#*:}; name=${rest%%:*}; how=${rest#*:}
  fs=/rpool/data/subvol-$id-disk-0
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
printf '%s\n' '#!/bin/sh' '# tests/doubles/pct (molecule driver scenario)' \
  'exec /usr/local/lib/gpuhost-doubles/pct "$@"' >/usr/local/sbin/pct
chmod 0755 /usr/local/sbin/pct
printf '{"apt_repo": "%s", "containers": {"130": {"status": "running"}, "131": {"status": "running"}}}\n' \
  "$repo" >/var/lib/gpuhost-doubles/pct.json
pct list
dkms status
