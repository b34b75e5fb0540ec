#!/usr/bin/env bash
# mmdebstrap --customize-hook for the lab image: runs on the host with the new root file
# system at $1 (mmdebstrap has mounted /proc, /sys and /dev inside it). Needs from the
# environment: LAB_* (recipe.env), BUILD_DIR (keys and ids made by build-image.sh),
# GPUSTUB_SRC, LAB_DIR.
set -euo pipefail
root=$1
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive "$@"; }
step() { printf '[customize] %s\n' "$*" >&2; }

. "$BUILD_DIR/ids.env"   # MACHINE_ID ESP_PARTUUID ROOT_PARTUUID ROOT_FSUUID ESP_FSID

step "static files from lab/guest"
cp -a --no-preserve=ownership "$LAB_DIR/guest/." "$root/"
chmod 0644 "$root/etc/hostname" "$root/etc/hosts"
printf '%s\n' "$MACHINE_ID" >"$root/etc/machine-id"
cat >"$root/etc/fstab" <<FSTAB
# <file system>             <mount point> <type> <options>          <dump> <pass>
PARTUUID=$ROOT_PARTUUID /             ext4   errors=remount-ro  0      1
PARTUUID=$ESP_PARTUUID /boot/efi     vfat   umask=0077         0      1
FSTAB
mkdir -p "$root/etc/kernel" "$root/boot/efi"
printf 'root=PARTUUID=%s %s\n' "$ROOT_PARTUUID" "$LAB_CMDLINE" >"$root/etc/kernel/cmdline"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$BUILD_DIR/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
# The driver runs apt and dpkg in the guest: timers must not take the dpkg lock meanwhile.
in_root systemctl mask apt-daily.timer apt-daily-upgrade.timer >/dev/null
in_root systemctl enable systemd-networkd.service >/dev/null

step "DKMS: ${LAB_DKMS_NAME}/${LAB_DKMS_VERSION} for ${LAB_KERNEL_OLD}"
src="$root/usr/src/${LAB_DKMS_NAME}-${LAB_DKMS_VERSION}"
mkdir -p "$src"
cp "$GPUSTUB_SRC/dkms.conf" "$GPUSTUB_SRC/Makefile" "$GPUSTUB_SRC/gpustub.c" "$src/"
in_root dkms add -m "$LAB_DKMS_NAME" -v "$LAB_DKMS_VERSION"
in_root dkms build -m "$LAB_DKMS_NAME" -v "$LAB_DKMS_VERSION" -k "$LAB_KERNEL_OLD"
in_root dkms install -m "$LAB_DKMS_NAME" -v "$LAB_DKMS_VERSION" -k "$LAB_KERNEL_OLD"
in_root dkms status
# Load it from the initramfs too, so the initramfs's copy of modprobe.d decides the
# parameter: a new kernel whose initramfs was not regenerated after the DKMS build shows it.
grep -qx gpustub "$root/etc/initramfs-tools/modules" || echo gpustub >>"$root/etc/initramfs-tools/modules"

step "local apt repository with ${LAB_KERNEL_NEW} at ${LAB_GUEST_REPO}"
in_root apt-get clean
in_root apt-get install -y -qq --download-only --no-install-recommends \
  "linux-image-${LAB_KERNEL_NEW}" "linux-headers-${LAB_KERNEL_NEW}"
mkdir -p "$root${LAB_GUEST_REPO}"
mv "$root"/var/cache/apt/archives/*.deb "$root${LAB_GUEST_REPO}/"
in_root sh -c "cd '$LAB_GUEST_REPO' && dpkg-scanpackages -m . /dev/null >Packages 2>/dev/null"
ls -1 "$root${LAB_GUEST_REPO}" >&2
rm -f "$root/etc/apt/sources.list"
rm -rf "$root"/var/lib/apt/lists/*
printf 'deb [trusted=yes] file:%s ./\n' "$LAB_GUEST_REPO" >"$root/etc/apt/sources.list.d/gpuhost-lab.list"
in_root apt-get update -qq

step "initramfs for ${LAB_KERNEL_OLD} (carries modprobe.d and gpustub.ko)"
in_root update-initramfs -u -k "$LAB_KERNEL_OLD"
# Later initramfs builds run inside the guest under TCG, where MODULES=most (Debian's
# default, ~280 modules) takes over 10 minutes per kernel on a loaded 2-core host. The
# booted guest knows its own hardware, so it builds with MODULES=dep. What the lab checks
# is unchanged: /etc/modprobe.d and the modules in /etc/initramfs-tools/modules (gpustub)
# are carried either way. Only the image's first initramfs (built here, on the host, where
# "dep" would see the host's disks) uses "most".
cat >"$root/etc/initramfs-tools/conf.d/gpuhost-lab.conf" <<'CONF'
# gpuhost lab: initramfs builds inside the VM (TCG) take minutes with MODULES=most.
MODULES=dep
CONF

step "systemd-boot on the ESP tree (what 'bootctl install' does on a real install)"
# bootctl install refuses a folder that is not a mounted file system's root (even with
# SYSTEMD_RELAX_ESP_CHECKS), so lay out what it writes by hand: the boot loader, the
# fallback path, loader.conf and the entry-token (machine-id) folder. kernel-install then
# finds /boot/efi/<machine-id>, uses the BLS layout and /etc/kernel/cmdline exactly as the
# zz-systemd-boot hook does in the booted guest, where /boot/efi is the mounted ESP.
esp="$root/boot/efi"
install -d "$esp/EFI/systemd" "$esp/EFI/BOOT" "$esp/EFI/Linux" "$esp/loader/entries" \
  "$esp/$MACHINE_ID"
install -m 0644 "$root/usr/lib/systemd/boot/efi/systemd-bootx64.efi" "$esp/EFI/systemd/"
install -m 0644 "$root/usr/lib/systemd/boot/efi/systemd-bootx64.efi" "$esp/EFI/BOOT/BOOTX64.EFI"
printf '#timeout 3\n#console-mode keep\n' >"$esp/loader/loader.conf"
printf 'type1\n' >"$esp/loader/entries.srel"
# systemd 254+ (Debian 13: 257) takes an ESP only at the root of a mounted file system
# (SYSTEMD_RELAX_ESP_CHECKS waives the vfat type, not that), where 252 (Debian 12) took
# /boot/efi/<entry token> as it was; without one, 257's kernel-install writes no loader
# entry and says nothing. So the ESP tree is bound onto itself for this one call.
esp_args=()
if in_root kernel-install --help 2>/dev/null | grep -q -- '--esp-path'; then
  esp_args=(--esp-path=/boot/efi)
  mount --bind "$esp" "$esp"
fi
in_root env SYSTEMD_RELAX_ESP_CHECKS=1 kernel-install "${esp_args[@]}" add "$LAB_KERNEL_OLD" \
  "/boot/vmlinuz-$LAB_KERNEL_OLD" || { [ -z "${esp_args[*]}" ] || umount "$esp"; exit 1; }
[ -z "${esp_args[*]}" ] || umount "$esp"
entry="$esp/loader/entries/$MACHINE_ID-$LAB_KERNEL_OLD.conf"
# 90-loaderentry writes paths relative to the mount point holding BOOT_ROOT: here that is
# "/", so they start with /boot/efi. On the ESP they are relative to its root.
sed -i -E 's#^(linux|initrd)( +)/boot/efi/#\1\2/#' "$entry"
if ! { [ -f "$entry" ] && grep -q "^options.*root=PARTUUID=$ROOT_PARTUUID" "$entry"; }; then
  echo "kernel-install wrote no loader entry $entry with /etc/kernel/cmdline" >&2
  exit 1
fi
find "$root/boot/efi" -type f >&2
cat "$root/boot/efi/loader/entries/"*.conf >&2
# The ESP's content leaves the root image: /boot/efi stays as the empty mount point.
mkdir -p "$BUILD_DIR/esp"
cp -a "$root/boot/efi/." "$BUILD_DIR/esp/"
find "$root/boot/efi" -mindepth 1 -delete
