#!/usr/bin/env bash
# Create or refresh .venv from requirements-test.txt (re-run only when the file changed).
# GPUHOST_VENV_REQUIREMENTS names another file: the controller-next lane's copy of the
# checkout has .venv linked to its root's venv of requirements-controller-next.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
reqs=${GPUHOST_VENV_REQUIREMENTS:-requirements-test.txt}
stamp=.venv/.requirements.sha256
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r "$reqs"
echo "$want" > "$stamp"
