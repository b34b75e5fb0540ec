#!/usr/bin/env bash
# Build the lab's VM disk image, or reuse the one cached under the recipe's hash.
# Prints the image directory (disk.qcow2, id_ed25519, ids.env, build.log) on stdout.
#
# No loop devices, no mounts of the image: mmdebstrap makes the root tree (with systemd-boot,
# the DKMS stand-in and the local apt repo), `mke2fs -d` turns it into ext4, mtools makes the
# ESP, sfdisk lays out a GPT on a plain file and dd puts both file systems at their offsets.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || die "build-image.sh needs root (mmdebstrap --mode=root, chroot for dkms)"
for tool in mmdebstrap mke2fs mkfs.fat mcopy mmd sfdisk qemu-img ssh-keygen; do
  command -v "$tool" >/dev/null || die "$tool not found: run 'make lab' (installs LAB_PKGS)"
done

hash=$(lab_recipe_hash)
image_dir="$LAB_CACHE/images/$hash"
if [ -z "${LAB_REBUILD:-}" ] && [ -f "$image_dir/disk.qcow2" ] && [ -f "$image_dir/ids.env" ]; then
  log "image $hash cached at $image_dir"
  printf '%s\n' "$image_dir"
  exit 0
fi

mkdir -p "$LAB_CACHE/images"
BUILD_DIR=$(mktemp -d "$LAB_CACHE/images/.build-$hash.XXXXXX")
export BUILD_DIR LAB_DIR GPUSTUB_SRC
trap 'rm -rf "$BUILD_DIR"' EXIT
# Every recipe variable is needed by customize.sh (a child of mmdebstrap).
set -a; . "$LAB_RECIPE_FILE"; set +a

log "building image $hash in $BUILD_DIR (log: build.log)"
exec 3>&2 2>>"$BUILD_DIR/build.log"
t0=$(now)

# Throwaway SSH key (never committed: it lives in the cache only) and the image's ids.
ssh-keygen -q -t ed25519 -N '' -C gpuhost-lab -f "$BUILD_DIR/id_ed25519"
uuid() { cat /proc/sys/kernel/random/uuid; }
{
  printf 'MACHINE_ID=%s\n' "$(uuid | tr -d -)"
  printf 'ESP_PARTUUID=%s\nROOT_PARTUUID=%s\nROOT_FSUUID=%s\n' "$(uuid)" "$(uuid)" "$(uuid)"
  printf 'ESP_FSID=%s\n' "$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
  printf 'RECIPE_HASH=%s\n' "$hash"
} >"$BUILD_DIR/ids.env"
. "$BUILD_DIR/ids.env"

mirrors=()
IFS='|' read -r -a mirrors <<<"$LAB_MIRRORS"
# shellcheck disable=SC2086
mmdebstrap --mode=root --variant=apt --skip=cleanup/apt/lists \
  --include="$(tr ' ' ',' <<<"$LAB_GUEST_PKGS")" \
  --customize-hook="\"$LAB_DIR/customize.sh\" \"\$1\"" \
  "$LAB_SUITE" "$BUILD_DIR/rootfs" "${mirrors[@]}" >&2 \
  || { tail -n 40 "$BUILD_DIR/build.log" >&3; die "mmdebstrap failed (log above)"; }
t_rootfs=$(elapsed "$t0")

# Root file system: ext4 straight from the tree (uid/gid/modes/xattrs preserved).
mke2fs -q -t ext4 -L gpuhost-root -U "$ROOT_FSUUID" -d "$BUILD_DIR/rootfs" \
  "$BUILD_DIR/root.img" "${LAB_ROOT_MIB}M" >&2
rm -rf "$BUILD_DIR/rootfs"

# ESP: FAT32 image with mtools (no mount), holding systemd-boot, loader entries, kernels.
esp_kib=$((LAB_ESP_MIB * 1024))
mkfs.fat -F 32 -n ESP -i "$ESP_FSID" -C "$BUILD_DIR/esp.img" "$esp_kib" >&2
(cd "$BUILD_DIR/esp" && for d in $(find . -mindepth 1 -type d | sed 's|^\./||' | LC_ALL=C sort); do
   mmd -i "$BUILD_DIR/esp.img" "::$d"; done
 find . -type f | sed 's|^\./||' | while read -r f; do
   mcopy -i "$BUILD_DIR/esp.img" "$f" "::$f"; done)
mdir -/ -i "$BUILD_DIR/esp.img" :: >&2

# GPT disk: 1 MiB gap, ESP, root, space for the backup GPT; partition UUIDs as in fstab.
esp_start=2048
esp_sectors=$((LAB_ESP_MIB * 2048))
root_start=$((esp_start + esp_sectors))
root_sectors=$((LAB_ROOT_MIB * 2048))
total_mib=$((1 + LAB_ESP_MIB + LAB_ROOT_MIB + 1))
truncate -s "${total_mib}M" "$BUILD_DIR/disk.raw"
sfdisk -q "$BUILD_DIR/disk.raw" >&2 <<SFDISK
label: gpt
start=$esp_start, size=$esp_sectors, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=$ESP_PARTUUID, name=esp
start=$root_start, size=$root_sectors, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, uuid=$ROOT_PARTUUID, name=root
SFDISK
dd if="$BUILD_DIR/esp.img" of="$BUILD_DIR/disk.raw" bs=512 seek="$esp_start" conv=notrunc,sparse status=none
dd if="$BUILD_DIR/root.img" of="$BUILD_DIR/disk.raw" bs=1M seek=$((root_start / 2048)) conv=notrunc,sparse status=none
rm -f "$BUILD_DIR/esp.img" "$BUILD_DIR/root.img"
sfdisk -d "$BUILD_DIR/disk.raw" >&2
qemu-img convert -O qcow2 "$BUILD_DIR/disk.raw" "$BUILD_DIR/disk.qcow2"
rm -f "$BUILD_DIR/disk.raw"
chmod 0444 "$BUILD_DIR/disk.qcow2"   # a base image: runs write only to their overlays

total=$(elapsed "$t0")
printf 'rootfs_seconds=%s\ntotal_seconds=%s\nbuilt=%s\n' "$t_rootfs" "$total" "$(date -Is)" \
  >"$BUILD_DIR/build-time.env"
exec 2>&3 3>&-
log "image built in ${total}s (mmdebstrap+customize ${t_rootfs}s): $(du -h --apparent-size "$BUILD_DIR/disk.qcow2" | cut -f1)"
trap - EXIT
rm -rf "$image_dir"
mv "$BUILD_DIR" "$image_dir"
printf '%s\n' "$image_dir"
