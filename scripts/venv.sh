#!/usr/bin/env bash
# Create or refresh .venv from requirements-test.txt (re-run only when the file changed).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements-test.txt | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
echo "$want" > "$stamp"
