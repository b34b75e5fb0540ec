#!/usr/bin/env bash
# `ansible-test sanity` over this checkout, every test that runs here, with no ignore file.
#
# ansible-test needs the collection at .../ansible_collections/<namespace>/<name>/, so the
# checkout's files (tracked plus untracked-but-not-ignored: .venv, collections/, tests/output,
# caches are left out by .gitignore) are copied to a fresh ansible_collections/gpuhost/tuning
# under a per-checkout cache folder and tested there. The copy is new on every run; only
# ansible-test's delegation virtualenv (tests/output/.tmp/delegation: a Python with pip,
# about 10 s and a PyPI round trip to make) is carried over, for the same ansible-test
# version. It lives under the same path every run, as a virtualenv must.
#
# Requirements: each sanity test gets the virtualenv ansible-test makes for it
# (`--venv --requirements`: pip installs ansible-test's pinned sanity requirements from PyPI
# into ~/.ansible/test/venv/, once; later runs reuse them). shellcheck comes from Debian
# (make sanity installs it); without it ansible-test skips the shellcheck test silently, so
# this script refuses to run without it.
#
# Usage: scripts/sanity.sh [extra ansible-test sanity arguments, e.g. --test pep8]
# Env:   GPUHOST_SANITY_CACHE  cache folder (default ${XDG_CACHE_HOME:-~/.cache}/gpuhost-sanity)
#        GPUHOST_SANITY_PYTHON the --python version (default 3.11; the controller-next lane
#                              runs it with 3.13 inside its Debian 13 root)
# The tested tree stays in the cache folder until the next run (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYVER=${GPUHOST_SANITY_PYTHON:-3.11}
ANSIBLE_TEST=$ROOT/.venv/bin/ansible-test
if [ ! -x "$ANSIBLE_TEST" ]; then
  echo "sanity.sh: $ANSIBLE_TEST missing: run make venv" >&2
  exit 1
fi
if compgen -G "tests/sanity/ignore-*.txt" >/dev/null; then
  echo "sanity.sh: tests/sanity/ignore-*.txt exists; this collection keeps sanity clean without one" >&2
  exit 1
fi
if ! command -v shellcheck >/dev/null; then
  echo "sanity.sh: shellcheck not found (ansible-test would skip its test): apt-get install shellcheck, or run make sanity" >&2
  exit 1
fi
start=$(date +%s)

# One folder per checkout (the lead's clean clone and this one do not share it), one run at
# a time in it.
cache_base=${GPUHOST_SANITY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhost-sanity}
cache=$cache_base/$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
mkdir -p "$cache"
exec 9>"$cache/lock"
if ! flock -n 9; then
  echo "sanity.sh: another sanity run of $ROOT holds $cache/lock; waiting"
  flock 9
fi
work=$cache/tree
dest=$work/ansible_collections/gpuhost/tuning
delegation=tests/output/.tmp/delegation
at_version=$("$ANSIBLE_TEST" --version)
kept=$cache/delegation
rm -rf "$kept"
if [ -f "$dest/$delegation/python$PYVER/marker.txt" ] && \
   [ "$(cat "$cache/delegation.version" 2>/dev/null)" = "$at_version" ]; then
  mv "$dest/$delegation" "$kept"
fi
rm -rf "$work"
mkdir -p "$dest"

# Files as git sees them (respects .gitignore), only those present on disk.
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done \
  | tar --null --no-recursion -T - -cf - | tar -xf - -C "$dest"

# A git repository in the copy so ansible-test lists exactly these files.
git -C "$dest" init -q
git -C "$dest" add -A
git -C "$dest" -c user.name=sanity -c user.email=sanity@localhost commit -q -m sanity

if [ -d "$kept" ]; then
  mkdir -p "$dest/$(dirname "$delegation")"
  mv "$kept" "$dest/$delegation"
fi
printf '%s\n' "$at_version" > "$cache/delegation.version"

# ansible-test bootstraps pip into each empty virtualenv with a get-pip script it downloads
# from a host outside PyPI, which is unreachable here. It runs a cached copy when one exists,
# as `python get_pip_X.py --disable-pip-version-check pip==X --no-setuptools --no-wheel`, so
# a stand-in goes there: pip from the interpreter's own ensurepip, then pip==X from PyPI.
pip_version=$("$ROOT/.venv/bin/python" - "$PYVER" <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
from ansible_test._internal.host_configs import NativePythonConfig
import sys
print(get_venv_packages(NativePythonConfig(version=sys.argv[1]))["pip"])
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

# ansible-test 2.22 pins pylint's dill as a source archive on github.com (a commit between
# releases), which is unreachable here as the get-pip host is. The same kind of stand-in: in
# this venv's copy of ansible-test's requirement files, a requirement given as a URL is
# replaced by the newest release of that package on PyPI when this was written (dill 0.4.1,
# 2026-12-05); each replacement is printed. Only the test tool's own files change.
at_reqs=$("$ROOT/.venv/bin/python" -c 'import ansible_test, os; print(os.path.join(os.path.dirname(ansible_test.__file__), "_data", "requirements"))')
declare -A url_standin=([dill]=0.4.1)
for reqs in "$at_reqs"/*.txt "$at_reqs"/*.in; do
  [ -f "$reqs" ] || continue
  while IFS= read -r line; do
    name=${line%% @ *}
    if [ -n "${url_standin[$name]:-}" ]; then
      sed -i "s|^$name @ https://.*\$|$name==${url_standin[$name]}|" "$reqs"
      echo "sanity.sh: $(basename "$reqs"): $name from a source archive -> $name==${url_standin[$name]} (PyPI)"
    else
      echo "sanity.sh: $(basename "$reqs"): '$line' needs a stand-in (add it to url_standin)" >&2
    fi
  done < <(grep -E '^[A-Za-z0-9_.-]+ @ https://' "$reqs" || true)
done

cd "$dest"
set +e
"$ANSIBLE_TEST" sanity --color no --python "$PYVER" --venv --requirements "$@"
rc=$?
set -e
echo "sanity.sh: ansible-test sanity finished rc=$rc in $(( $(date +%s) - start ))s (tree: $dest)"
exit $rc
