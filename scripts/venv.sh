#!/usr/bin/env bash
# Create or refresh .venv (re-run only when what it was made from changed).
#   scripts/venv.sh test    the test toolchain, requirements-test.txt (make test's setup: 648 MB)
#   scripts/venv.sh audit   ansible-core alone, the collection's one runtime dependency
#                           (make audit: 70 MB); its pin is the ansible-core line of
#                           requirements-test.txt, read from there, so both run one release.
#                           A venv already made for the tests serves the audit as it is.
# GPUHOST_VENV_REQUIREMENTS names another file for `test`: the controller-next lane's copy of
# the checkout has .venv linked to its root's venv of requirements-controller-next.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
reqs=${GPUHOST_VENV_REQUIREMENTS:-requirements-test.txt}
stamp=.venv/.requirements.sha256
full=$(sha256sum "$reqs" | cut -d' ' -f1)
case $mode in
  test) want=$full ;;
  audit)
    core=$(grep -E '^ansible-core==[0-9][0-9.]*$' "$reqs" || true)
    if [ "$(printf '%s\n' "$core" | grep -c .)" != 1 ]; then
      echo "venv.sh: $reqs must pin ansible-core in one line (ansible-core==X.Y.Z)" >&2
      exit 2
    fi
    want=audit-$(printf '%s\n' "$core" | sha256sum | cut -d' ' -f1) ;;
  *) echo "venv.sh: unknown mode '$mode' (test or audit)" >&2; exit 2 ;;
esac
if [ -x .venv/bin/python ]; then
  have=$(cat "$stamp" 2>/dev/null || true)
  if [ "$have" = "$want" ] || { [ "$mode" = audit ] && [ "$have" = "$full" ]; }; then
    exit 0
  fi
fi
python3 -m venv .venv
if [ "$mode" = audit ]; then
  .venv/bin/pip install -q --disable-pip-version-check "$core"
else
  .venv/bin/pip install -q --disable-pip-version-check -r "$reqs"
fi
echo "$want" > "$stamp"
