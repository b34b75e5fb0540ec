#!/usr/bin/env bash
# `ansible-test sanity` over this checkout, with no ignore file.
#
# ansible-test needs the collection at .../ansible_collections/<namespace>/<name>/, so the
# checkout's files (tracked plus untracked-but-not-ignored: .venv, collections/, tests/output,
# caches are left out by .gitignore) are copied to a temporary
# ansible_collections/gpuhost/tuning and tested there.
#
# Requirements: by default each sanity test gets the virtualenv ansible-test makes for it
# (`--venv --requirements`: pip installs ansible-test's pinned sanity requirements from PyPI
# into ~/.ansible/test/venv/, once; later runs reuse them).
#
# Usage: scripts/sanity.sh [extra ansible-test sanity arguments, e.g. --test pep8]
# Env:   SANITY_KEEP=1 keeps the temporary tree (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYVER=3.11
ANSIBLE_TEST=$ROOT/.venv/bin/ansible-test
if [ ! -x "$ANSIBLE_TEST" ]; then
  echo "sanity.sh: $ANSIBLE_TEST missing: run make venv" >&2
  exit 1
fi
if compgen -G "tests/sanity/ignore-*.txt" >/dev/null; then
  echo "sanity.sh: tests/sanity/ignore-*.txt exists; this collection keeps sanity clean without one" >&2
  exit 1
fi

work=$(mktemp -d /tmp/gpuhost-sanity.XXXXXX)
if [ "${SANITY_KEEP:-0}" != 1 ]; then
  trap 'rm -rf "$work"' EXIT
fi
dest=$work/ansible_collections/gpuhost/tuning
mkdir -p "$dest"

# Files as git sees them (respects .gitignore), only those present on disk.
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done \
  | tar --null --no-recursion -T - -cf - | tar -xf - -C "$dest"

# A git repository in the copy so ansible-test lists exactly these files.
git -C "$dest" init -q
git -C "$dest" add -A
git -C "$dest" -c user.name=sanity -c user.email=sanity@localhost commit -q -m sanity

# ansible-test bootstraps pip into each empty virtualenv with a get-pip script it downloads
# from a host outside PyPI, which is unreachable here. It runs a cached copy when one exists,
# as `python get_pip_X.py --disable-pip-version-check pip==X --no-setuptools --no-wheel`, so
# a stand-in goes there: pip from the interpreter's own ensurepip, then pip==X from PyPI.
pip_version=$("$ROOT/.venv/bin/python" - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
print(get_venv_packages(NativePythonConfig(version="3.11"))["pip"])
PY
)
bootstrap=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [ ! -f "$bootstrap" ]; then
  mkdir -p "$(dirname "$bootstrap")"
  cat > "$bootstrap" <<'PY'
# Stand-in for ansible-test's get-pip bootstrap, written by gpuhost.tuning scripts/sanity.sh:
# the real script's download host is unreachable here, PyPI is not.
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
# In a child process: ensurepip.bootstrap() sets PIP_CONFIG_FILE=/dev/null in its own
# environment, which would hide the machine's pip configuration from the install below.
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
subprocess.check_call([sys.executable, "-m", "pip", "install", "--upgrade"] + args)
PY
  echo "sanity.sh: wrote pip bootstrap stand-in $bootstrap"
fi

cd "$dest"
start=$(date +%s)
set +e
"$ANSIBLE_TEST" sanity --color no --python "$PYVER" --venv --requirements "$@"
rc=$?
set -e
echo "sanity.sh: ansible-test sanity finished rc=$rc in $(( $(date +%s) - start ))s (tree: $dest)"
exit $rc
