#!/usr/bin/env bash
# Static checks, as `make lint` runs them: ruff (Python), ansible-lint (profile production,
# config in .ansible-lint and .yamllint) and antsibull-changelog lint (changelog fragments).
# Offline from Galaxy: the only collections used are ansible.builtin and this one, which
# ansible-lint finds through ./collections (make collection).
# Runs every check, then exits non-zero if any failed; prints the time each took.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
export PATH=$ROOT/.venv/bin:$PATH
export ANSIBLE_CONFIG=$ROOT/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$ROOT/collections}
export NO_COLOR=1 PY_COLORS=0 ANSIBLE_FORCE_COLOR=0

failed=()
check() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: $*"
  if "$@"; then
    echo "== $name: ok ($((SECONDS - start))s)"
  else
    echo "== $name: FAILED ($((SECONDS - start))s)"
    failed+=("$name")
  fi
}

check ruff ruff check .
check ansible-lint ansible-lint --offline -f pep8
check changelog antsibull-changelog lint

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint.sh: failed: ${failed[*]}"
  exit 1
fi
echo "lint.sh: all checks passed"
