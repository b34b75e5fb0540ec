#!/usr/bin/env bash
# Build the container image the molecule scenarios (and the integration tier's real-tool
# tests) run in: Debian with systemd as PID 1, Python for Ansible, DKMS and an "old" Debian
# kernel + headers, so a scenario can install a newer kernel and watch the DKMS gate,
# initramfs and boot entries follow it. One script for every platform: the suite is the
# parameter, everything else (packages, hooks, caching) is shared.
#
#   bookworm  Debian 12 = Proxmox VE 8 userland (dkms 3.0.10, systemd 252, Python 3.11)
#   trixie    Debian 13 = Proxmox VE 9 userland (dkms 3.2.x, systemd 257, Python 3.13)
#
# Made from Debian packages only (mmdebstrap, then `podman import`): no image registry is
# reachable on these machines. The image carries the label gpuhost.recipe = sha256 of this
# script + the suite + the package list + the apt sources; it is rebuilt only when that
# changes (FORCE=1 rebuilds anyway). Inside, /etc/gpuhost-test-image says
# `old_kernel=<abi>` and `new_kernel=<abi>` (also the labels gpuhost.old_kernel and
# gpuhost.new_kernel) so scenarios and tests need not hard-code them.
#
# The apt sources are this machine's own Debian entries (<suite>, -updates, -security),
# renamed to the suite asked for (this machine is bookworm; the same mirrors serve trixie),
# so `apt-get install linux-image-<newer>-amd64` works inside the container later.
#
# Usage: scripts/build-test-image.sh [suite]    (prints the image name; exit 0 when ready)
# Env:   GPUHOST_TEST_SUITE (bookworm, the default, or trixie; the argument wins),
#        GPUHOST_TEST_IMAGE (default $GPUHOST_TEST_IMAGE_REPO:<suite>, the repository
#        localhost/gpuhost-test unless set), FORCE=1
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE=${1:-${GPUHOST_TEST_SUITE:-bookworm}}
IMAGE=${GPUHOST_TEST_IMAGE:-${GPUHOST_TEST_IMAGE_REPO:-localhost/gpuhost-test}:$SUITE}
# The "old" kernel the scenarios start from and the "new" one they upgrade to. Debian's
# archive keeps only recent ABIs: when one disappears, bump it here (the scenarios and
# tests read both from the image).
case $SUITE in
  bookworm) OLD_KERNEL=6.1.0-55-amd64 NEW_KERNEL=6.1.0-56-amd64 ;;
  # Debian 13's ABIs carry a '+' (6.12.107+deb13-amd64): every parser meets it here.
  trixie) OLD_KERNEL=6.12.107+deb13-amd64 NEW_KERNEL=6.12.117+deb13-amd64 ;;
  *) echo "build-test-image: unknown suite '$SUITE' (bookworm or trixie)" >&2; exit 2 ;;
esac
PACKAGES=(
  systemd systemd-sysv dbus
  python3 python3-apt apt ca-certificates
  dkms kmod build-essential
  pciutils procps iproute2
  initramfs-tools zstd
  # the integration tier runs its real-tool test files inside the image (tests/platforms.py)
  python3-pytest
  "linux-image-$OLD_KERNEL" "linux-headers-$OLD_KERNEL"
)

log() { echo "build-test-image: $*" >&2; }

# This machine's Debian apt entries for its own suite (one-line and deb822 files),
# third-party repositories left out, renamed to $SUITE. Printed in deb822 form, ready for
# mmdebstrap.
debian_sources() {
  /usr/bin/python3 - "$SUITE" <<'EOF'
import glob, re, sys
suite = sys.argv[1]
host = "bookworm"
try:
    for line in open("/etc/os-release"):
        if line.startswith("VERSION_CODENAME="):
            host = line.split("=", 1)[1].strip().strip('"') or host
except OSError:
    pass
want = re.compile(r"^%s(-updates|-security|-backports)?$" % re.escape(host))
stanzas = []
files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for path in files:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        line = line.split("#", 1)[0].strip()
        parts = line.split()
        if len(parts) < 4 or parts[0] != "deb":
            continue
        if parts[1].startswith("["):          # [signed-by=...] options
            while parts and not parts[1].endswith("]"):
                parts.pop(1)
            parts.pop(1)
        if want.match(parts[2]):
            stanzas.append({"Types": "deb", "URIs": parts[1],
                            "Suites": parts[2].replace(host, suite, 1),
                            "Components": " ".join(parts[3:])})
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    try:
        text = open(path).read()
    except OSError:
        continue
    for block in re.split(r"\n\s*\n", text):
        fields = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
        if fields.get("Enabled", "yes") == "no" or "deb" not in fields.get("Types", "").split():
            continue
        suites = [s.replace(host, suite, 1) for s in fields.get("Suites", "").split()
                  if want.match(s)]
        if suites and fields.get("URIs"):
            stanzas.append({"Types": "deb", "URIs": fields["URIs"], "Suites": " ".join(suites),
                            "Components": fields.get("Components", "main")})
if not stanzas:
    sys.exit("build-test-image: no Debian %s entries in /etc/apt/sources.list*" % host)
for s in stanzas:
    s["Signed-By"] = "/usr/share/keyrings/debian-archive-keyring.gpg"
    print("\n".join("%s: %s" % kv for kv in s.items()))
    print()
EOF
}

SOURCES=$(debian_sources)
RECIPE=$( { cat "$0"; echo "$SUITE"; printf '%s\n' "${PACKAGES[@]}"; printf '%s\n' "$SOURCES"; } \
  | sha256sum | cut -d' ' -f1)

have=$(podman image inspect --format '{{ index .Labels "gpuhost.recipe" }}' "$IMAGE" 2>/dev/null || true)
old_id=$(podman image inspect --format '{{ .Id }}' "$IMAGE" 2>/dev/null || true)
if [ "${FORCE:-0}" != 1 ] && [ "$have" = "$RECIPE" ]; then
  log "$IMAGE is up to date (recipe ${RECIPE:0:12})"
  echo "$IMAGE"
  exit 0
fi

for tool in mmdebstrap podman; do
  command -v "$tool" >/dev/null || { log "$tool not found: run scripts/apt-ensure.sh mmdebstrap podman runc"; exit 1; }
done

# One build at a time on this machine.
exec 9>/var/tmp/gpuhost-test-image.lock   # (both suites: two mmdebstraps would share the cores)
flock 9

work=$(mktemp -d /var/tmp/gpuhost-test-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "$SOURCES" > "$work/debian.sources"

start=$(date +%s)
log "building $IMAGE (recipe ${RECIPE:0:12}${have:+, was ${have:0:12}})"
# minbase + the list above; no recommends, no docs/man/locales. The apt lists are kept so a
# fresh container can `apt-get install` without an update first (the image is built fresh
# on every new machine, so they are as current as the mirror was at build time).
# The customize hooks are single-quoted on purpose: mmdebstrap runs each in its own shell
# with $1 = the new root, so $1 and $u must reach it unexpanded.
# shellcheck disable=SC2016
mmdebstrap --mode=root --variant=minbase --format=tar \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='force-unsafe-io' \
  --aptopt='Acquire::Languages "none"' \
  --skip=cleanup/apt/lists \
  --customize-hook='echo gpuhost-test > "$1/etc/hostname"' \
  --customize-hook="printf 'suite=%s\\nold_kernel=%s\\nnew_kernel=%s\\nrecipe=%s\\n' $SUITE $OLD_KERNEL $NEW_KERNEL $RECIPE > \"\$1/etc/gpuhost-test-image\"" \
  --customize-hook='rm -f "$1/etc/machine-id"; touch "$1/etc/machine-id"' \
  --customize-hook='for u in getty@tty1.service console-getty.service systemd-firstboot.service; do chroot "$1" systemctl mask "$u" >/dev/null 2>&1 || true; done' \
  "$SUITE" "$work/rootfs.tar" "$work/debian.sources" >"$work/mmdebstrap.log" 2>&1 \
  || {
    tail -40 "$work/mmdebstrap.log" >&2
    if grep -q "Unable to locate package linux-" "$work/mmdebstrap.log"; then
      log "the mirror no longer has linux-image-$OLD_KERNEL: bump OLD_KERNEL in $0"
    fi
    log "mmdebstrap failed"
    exit 1
  }

podman import \
  --change 'CMD ["/sbin/init"]' \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL gpuhost.recipe=$RECIPE" \
  --change "LABEL gpuhost.old_kernel=$OLD_KERNEL" \
  --change "LABEL gpuhost.new_kernel=$NEW_KERNEL" \
  --change "LABEL gpuhost.suite=$SUITE" \
  "$work/rootfs.tar" "$IMAGE" >/dev/null
size=$(podman image inspect --format '{{ .Size }}' "$IMAGE")
log "built $IMAGE in $(( $(date +%s) - start )) s ($(( size / 1024 / 1024 )) MiB)"
# Drop the previous build of this name (now untagged) so old builds do not pile up.
if [ -n "$old_id" ]; then podman rmi "$old_id" >/dev/null 2>&1 || true; fi
echo "$IMAGE"
