#!/usr/bin/env bash
# The peers' collections (ansible.posix for ansible.posix.sysctl, community.general for
# community.general.modprobe) for the benchmark's task-per-setting peer, installed into a
# collections path of the bench run (never the user's): Galaxy is not reachable, so they come
# from PyPI's `ansible` package (the community bundle that pins both), matched to the
# ansible-core in .venv (ansible 12 = ansible-core 2.19, 13 = 2.20). The wheel is cached in
# .cache/bench-peers/ (gitignored); only the two collections are unpacked.
#
#   bench/peers/install.sh DEST      DEST/ansible_collections/{ansible/posix,community/general}
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DEST=${1:?usage: install.sh DEST}
PY=$REPO/.venv/bin/python
CACHE=$REPO/.cache/bench-peers
core=$("$PY" -c 'import ansible.release as r; print(".".join(r.__version__.split(".")[:2]))')
case $core in
  2.19) want="ansible>=12,<13" ;;
  2.20) want="ansible>=13,<14" ;;
  2.21) want="ansible>=14,<15" ;;
  *) echo "peers: no ansible package known for ansible-core $core" >&2; exit 1 ;;
esac
mkdir -p "$CACHE"
# shellcheck disable=SC2012  # wheel names are pip's: no odd characters
wheel=$(ls "$CACHE"/ansible-*.whl 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$wheel" ]; then
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$CACHE" "$want" >&2
  # shellcheck disable=SC2012
  wheel=$(ls "$CACHE"/ansible-*.whl | sort -V | tail -1)
fi
mkdir -p "$DEST"
"$PY" - "$wheel" "$DEST" <<'PYEOF'
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
keep = ("ansible_collections/ansible/posix/", "ansible_collections/community/general/")
with zipfile.ZipFile(wheel) as zf:
    names = [n for n in zf.namelist() if n.startswith(keep)]
    if not any(n.startswith(keep[0]) for n in names) or \
            not any(n.startswith(keep[1]) for n in names):
        sys.exit("peers: %s lacks ansible.posix or community.general" % wheel)
    zf.extractall(dest, names)
print("%s: %d files of ansible.posix and community.general" % (wheel.rsplit("/", 1)[-1],
                                                              len(names)))
PYEOF
