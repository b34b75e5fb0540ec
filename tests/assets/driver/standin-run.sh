#!/bin/sh
# This script was generated using Makeself 2.1.5
# (a gpuhost.tuning TEST STAND-IN for NVIDIA's driver installer, built by
# tests/driverstandin.py; its header has the fields of NVIDIA's .run that
# driver_stage reads, and it speaks the installer options the collection uses)
# shellcheck disable=SC2034,SC2015,SC2317  # makeself's header fields; the payload follows exit
CRCsum="0000000000"
MD5="00000000000000000000000000000000"
label="NVIDIA Accelerated Graphics Driver for Linux-x86_64 @VERSION@"
script="./nvidia-installer"
targetdir="NVIDIA-Linux-x86_64-@VERSION@"
version="@VERSION@"
# Environment (tests only): GPUHOST_RUN_ROOT the root it installs into (required, never
# /), GPUHOST_RUN_DKMS the dkms program for --dkms, GPUHOST_DOUBLES_LOG its call log.
root="${GPUHOST_RUN_ROOT:-}"
log="${GPUHOST_DOUBLES_LOG:-}"
record() {
    [ -n "$log" ] || return 0
    args=""
    for a in "$@"; do args="$args, \"$a\""; done
    printf '{"tool": "nvidia-installer", "argv": ["%s"%s], "root": "%s", "rc": %s}\n' \
        "$(basename "$0")" "$args" "$root" "$rc" >> "$log"
}
rc=0
kmod=yes; dkms=no; kernel=""; silent=no; extract=no
for arg in "$@"; do
    case "$arg" in
        -s|--silent) silent=yes ;;
        -q|--no-questions|--ui=none|-a|--accept-license|--no-x-check|--no-nouveau-check|-N|--no-network) ;;
        --no-kernel-module) kmod=no ;;
        --dkms) dkms=yes ;;
        --no-dkms) dkms=no ;;
        --kernel-name=*) kernel="${arg#--kernel-name=}" ;;
        -x|--extract-only) extract=yes ;;
        -v|--version) echo "nvidia-installer:  version $version"; rc=0; record "$@"; exit 0 ;;
        --info) printf 'Identification: %s\nTarget directory: %s\n' "$label" "$targetdir"; record "$@"; exit 0 ;;
        *) echo "ERROR: Unrecognized option: '$arg'" >&2; rc=1; record "$@"; exit 1 ;;
    esac
done
payload() { sed '1,/^__GPUHOST_PAYLOAD_BELOW__$/d' "$0" | base64 -d | tar -xz -C "$1"; }
if [ "$extract" = yes ]; then
    mkdir -p "$targetdir" && payload "$targetdir"; rc=$?; record "$@"; exit $rc
fi
if [ -z "$root" ] || [ "$root" = / ]; then
    echo "ERROR: stand-in installer: GPUHOST_RUN_ROOT must name a test root" >&2
    rc=2; record "$@"; exit 2
fi
[ "$silent" = yes ] || { echo "ERROR: stand-in installer: only --silent installs" >&2; rc=1; record "$@"; exit 1; }
lib="$root/usr/lib/x86_64-linux-gnu"
# uninstall what an earlier .run installed (the real installer does this first), from its
# backup log (nvidia-installer's /var/lib/nvidia/log: "1.0-<digits> (<version>)", the
# driver's description, then "<n>: <path>" per installed file)
if [ -f "$root/var/lib/nvidia/log" ]; then
    old="$(sed -n '1s/.*(\(.*\)).*/\1/p' "$root/var/lib/nvidia/log")"
    if [ -n "$old" ] && [ -n "${GPUHOST_RUN_DKMS:-}" ] && [ -d "$root/var/lib/dkms/nvidia/$old" ]; then
        "$GPUHOST_RUN_DKMS" remove -m nvidia -v "$old" --all >/dev/null 2>&1
    fi
    sed -n 's/^[0-9][0-9]*: //p' "$root/var/lib/nvidia/log" | while read -r f; do rm -f "$root$f"; done
fi
mkdir -p "$lib" "$root/usr/bin" "$root/var/lib/nvidia" "$root/var/log" || { rc=1; record "$@"; exit 1; }
backup="$root/var/lib/nvidia/log.new"
printf '1.0-%s (%s)\n%s\n' "$(echo "$version" | tr -d .)" "$version" "$label" > "$backup"
n=0
for so in libcuda.so libnvidia-ml.so; do
    echo "stand-in $so $version" > "$lib/$so.$version" || { rc=1; record "$@"; exit 1; }
    ln -sf "$so.$version" "$lib/$so.1"
    for f in "$so.$version" "$so.1"; do
        n=$((n + 1)); echo "$n: /usr/lib/x86_64-linux-gnu/$f" >> "$backup"
    done
done
printf '#!/bin/sh\necho "nvidia-installer:  version %s"\n' "$version" > "$root/usr/bin/nvidia-installer"
chmod 755 "$root/usr/bin/nvidia-installer"
ln -sf nvidia-installer "$root/usr/bin/nvidia-uninstall"
echo "$((n + 1)): /usr/bin/nvidia-installer" >> "$backup"
echo "$((n + 2)): /usr/bin/nvidia-uninstall" >> "$backup"
mv "$backup" "$root/var/lib/nvidia/log"
{
    echo "nvidia-installer log file '/var/log/nvidia-installer.log'"
    echo "creation time: $(date)"
    echo "installer version: $version"
    echo ""
    echo "command line:"
    echo "    ./nvidia-installer $*"
} > "$root/var/log/nvidia-installer.log"
if [ "$kmod" = yes ]; then
    if [ "$dkms" != yes ]; then
        echo "ERROR: stand-in installer: the kernel module installs only with --dkms" >&2
        rc=1; record "$@"; exit 1
    fi
    src="$root/usr/src/nvidia-$version"
    mkdir -p "$src" && payload "$src" || { rc=1; record "$@"; exit 1; }
    d="${GPUHOST_RUN_DKMS:?GPUHOST_RUN_DKMS names dkms for --dkms}"
    "$d" add -m nvidia -v "$version" >/dev/null 2>&1
    "$d" install -m nvidia -v "$version" ${kernel:+-k "$kernel"} --force >&2 || { rc=1; record "$@"; exit 1; }
    echo "Kernel module: DKMS nvidia/$version" >> "$root/var/log/nvidia-installer.log"
fi
echo "Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64 (version: $version) is now complete." >> "$root/var/log/nvidia-installer.log"
record "$@"
exit 0
__GPUHOST_PAYLOAD_BELOW__
