#!/usr/bin/env bash
# The cgroup guest: lxc_cgroup_devices against a REAL dynamic major on a REAL kernel.
#
# A QEMU TCG guest boots Debian's kernel with a small initramfs (static busybox, LXC, the
# host's python3, the collection's module and its module_utils, and lab/cgroup/uvmstub.c
# built against Debian's headers: a char device named nvidia-uvm with a dynamic major).
# Inside (lab/cgroup/init): the module is loaded, /proc/devices read, a container whose
# 129.conf allows a stale major is refused the node (EPERM), lxc_cgroup_devices repairs
# 129.conf from /proc/devices, the restarted container opens the node (the driver's open
# succeeds), and a second run changes nothing. This script builds (cached), boots, and
# judges the console. Needs root (dpkg -x keeps owners), qemu-system-x86, lxc,
# busybox-static, python3, gcc and make; the Debian mirror once, for the kernel packages.
set -euo pipefail
LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lab/lib.sh
. "$LAB_DIR/lib.sh"
SRC="$LAB_DIR/cgroup"
TIMEOUT=${LAB_CGROUP_TIMEOUT:-300}

start=$(now)
abi=${LAB_CGROUP_KERNEL:-$(apt-cache depends linux-image-amd64 |
  sed -n 's/.*Depends: linux-image-\(.*-amd64\)$/\1/p' | head -1)}
[ -n "$abi" ] || die "no kernel: apt-cache knows no linux-image-amd64 (apt-get update?)"
CACHE="$LAB_CACHE/cgroup-guest/$abi"
KROOT="$CACHE/kroot"
HEADERS="$KROOT/usr/src/linux-headers-$abi"
mkdir -p "$CACHE"

if [ ! -f "$KROOT/boot/vmlinuz-$abi" ] || [ ! -f "$HEADERS/Module.symvers" ]; then
  log "downloading Debian's $abi kernel and headers"
  rm -rf "$CACHE/debs" "$KROOT"
  mkdir -p "$CACHE/debs" "$KROOT"
  common=$(apt-cache depends "linux-headers-$abi" | sed -n 's/.*Depends: \(linux-headers-.*-common\)$/\1/p')
  kbuild=$(apt-cache depends "linux-headers-$abi" | sed -n 's/.*Depends: \(linux-kbuild-[0-9.]*\)$/\1/p')
  (cd "$CACHE/debs" && apt-get download -q "linux-image-$abi" "linux-headers-$abi" "$common" "$kbuild" \
    2>&1 | grep -v "couldn't be accessed by user '_apt'" >&2)
  dpkg-deb --fsys-tarfile "$CACHE"/debs/linux-image-"$abi"_*.deb |
    tar -x -C "$KROOT" "./boot/vmlinuz-$abi"
  for deb in "$CACHE"/debs/linux-headers-*.deb "$CACHE"/debs/linux-kbuild-*.deb; do
    dpkg -x "$deb" "$KROOT"
  done
  # The headers' Makefile includes the -common one by its installed path.
  sed -i "s|include /usr/src/|include $KROOT/usr/src/|" "$HEADERS/Makefile"
  rm -rf "$CACHE/debs"
fi
record_time cgroup-kernel "$start"

t=$(now)
BUILD="$CACHE/build"
rm -rf "$BUILD"
mkdir -p "$BUILD"
cp "$SRC/uvmstub.c" "$SRC/Kbuild" "$BUILD/"
make -s -C "$HEADERS" M="$BUILD" modules >"$CACHE/build.log" 2>&1 ||
  { cat "$CACHE/build.log" >&2; die "uvmstub did not build against $HEADERS"; }
modinfo -F vermagic "$BUILD/uvmstub.ko" | grep -q "^$abi " || die "uvmstub.ko is not for $abi"
record_time cgroup-module "$t"

# The initramfs: staged fresh every run (the collection's code is the live checkout).
t=$(now)
STAGE="$CACHE/stage"
rm -rf "$STAGE"
mkdir -p "$STAGE"/{bin,dev,proc,sys,run,tmp,etc,var/lib/lxc,usr/lib/x86_64-linux-gnu/lxc/rootfs}
cp /bin/busybox "$STAGE/bin/busybox"
ln -s busybox "$STAGE/bin/sh"   # /init runs as #!/bin/sh
! ldd /bin/busybox >/dev/null 2>&1 || die "/bin/busybox is not static (busybox-static)"
cp "$SRC/init" "$STAGE/init"
chmod 0755 "$STAGE/init"
cp "$BUILD/uvmstub.ko" "$STAGE/"
py=$(readlink -f /usr/bin/python3)
pylib=/usr/lib/$(basename "$py")
bins=(/usr/bin/lxc-start "$py")
mkdir -p "$STAGE/usr/bin" "$STAGE/usr/share/lxc"
cp /usr/bin/lxc-start "$STAGE/usr/bin/"
cp "$py" "$STAGE/usr/bin/"
ln -s "$(basename "$py")" "$STAGE/usr/bin/python3"
cp -r /usr/share/lxc/config "$STAGE/usr/share/lxc/"
# The standard library without what a module never imports; compiled files kept (TCG).
tar -C / -cf - --exclude="${pylib#/}/test" --exclude="${pylib#/}/config-*" \
  --exclude="${pylib#/}/idlelib" --exclude="${pylib#/}/tkinter" --exclude="${pylib#/}/lib2to3" \
  --exclude="${pylib#/}/ensurepip" --exclude="${pylib#/}/pydoc_data" \
  --exclude="${pylib#/}/turtledemo" --exclude="${pylib#/}/site-packages" \
  --exclude="${pylib#/}/dist-packages" "${pylib#/}" | tar -C "$STAGE" -xf -
for lib in $(ldd "${bins[@]}" "$pylib"/lib-dynload/*.so 2>/dev/null |
  awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }' | sort -u); do
  mkdir -p "$STAGE$(dirname "$lib")"
  cp -L "$lib" "$STAGE$lib"
done
[ -e "$STAGE/lib64" ] || { mkdir -p "$STAGE/lib64" && cp -L /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/"; }
# The module as AnsiballZ lays it out: ansible.module_utils and the collection's files.
PYSITE="$STAGE/usr/lib/gpuhost"
ansible_dir=$("$REPO_DIR/.venv/bin/python" -c 'import ansible, os; print(os.path.dirname(ansible.__file__))')
mkdir -p "$PYSITE/ansible" "$PYSITE/ansible_collections/gpuhost/tuning/plugins/modules"
cp -r "$ansible_dir/module_utils" "$PYSITE/ansible/"
cp -r "$REPO_DIR/plugins/module_utils" "$PYSITE/ansible_collections/gpuhost/tuning/plugins/"
cp "$REPO_DIR/plugins/modules/lxc_cgroup_devices.py" "$PYSITE/ansible_collections/gpuhost/tuning/plugins/modules/"
for d in ansible ansible_collections ansible_collections/gpuhost ansible_collections/gpuhost/tuning \
  ansible_collections/gpuhost/tuning/plugins ansible_collections/gpuhost/tuning/plugins/modules; do
  : >"$PYSITE/$d/__init__.py"
done
find "$PYSITE" -name __pycache__ -prune -exec rm -rf {} +
printf '{"ANSIBLE_MODULE_ARGS": {"vmid": 129, "drivers": ["nvidia-uvm"]}}\n' >"$STAGE/module-args.json"
# The container's root: busybox only.
CT="$STAGE/var/lib/lxc/129/rootfs"
mkdir -p "$CT"/{bin,dev,proc,sys,tmp}
cp /bin/busybox "$CT/bin/"
ln -s busybox "$CT/bin/sh"
(cd "$STAGE" && find . | cpio -o -H newc --quiet | gzip -1 >"$CACHE/initrd.gz")
rm -rf "$STAGE"
record_time cgroup-initramfs "$t"
log "initramfs $(du -h "$CACHE/initrd.gz" | cut -f1), kernel $abi"

t=$(now)
CONSOLE="$CACHE/console.log"
rm -f "$CONSOLE"
timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg -bios /usr/share/qemu/qboot.rom -nodefaults \
  -net none -m 1024 -smp 1 -display none -no-reboot -serial "file:$CONSOLE" \
  -kernel "$KROOT/boot/vmlinuz-$abi" -initrd "$CACHE/initrd.gz" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4" </dev/null ||
  { tail -40 "$CONSOLE" >&2; die "QEMU did not finish in ${TIMEOUT}s (or failed)"; }
record_time cgroup-guest "$t"

# The verdict, from the guest's lines only.
python3 "$SRC/verdict.py" "$CONSOLE" ||
  { tail -60 "$CONSOLE" >&2; die "the cgroup guest did not prove the repair"; }
record_time cgroup-total "$start"
