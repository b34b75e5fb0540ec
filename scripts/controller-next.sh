#!/usr/bin/env bash
# The controller lane on the newest ansible-core (requirements-controller-next.txt, 2.21.x)
# and Python 3.13, in a Debian 13 root used as a chroot (scripts/trixie-root.sh builds it
# once and caches it). In it, on a fresh copy of this checkout:
#   1. ansible-test sanity --python 3.13, every test, no ignore file (scripts/sanity.sh);
#   2. the unit tier (tests/unit);
#   3. the playbook tests that need no podman: tests/integration/test_audit_playbook.py and
#      test_tune_playbook.py (ansible-playbook against temporary host trees; their podman
#      cases skip there, the 2.19 lane runs them).
# A deprecation warning from ansible-core in any of them is a failure: every ansible run
# logs to ANSIBLE_LOG_PATH and that log, the sanity output and pytest's warnings summary
# are searched for it.
#
# Separate from the 2.19 lane (it can run beside make molecule / make integration): its own
# cache (~/.cache/gpuhost-trixie), its own HOME, venv, ~/.ansible, tests/output and pytest
# cache, all inside the root; the checkout itself is only read. The chroot runs in private
# mount and PID namespaces (nothing it mounts or starts outlives it; /sys is not mounted).
#
# Usage: scripts/controller-next.sh [sanity|unit|playbooks ...]  (default: all three)
# Env:   PYTEST_N (pytest-xdist workers, default auto), GPUHOST_TRIXIE_CACHE (see trixie-root.sh)
set -euo pipefail

if [ "${1:-}" = "--namespace" ]; then
  # In the private namespaces: $2 the root, $3 the ansible log, $4 PYTEST_N, $5 the copy
  # (paths inside the root), $6 the steps.
  mount -t proc proc "$2/proc"
  mount --rbind /dev "$2/dev"
  # its own /dev/shm: the tests' temporary trees go there, and pytest prunes old
  # pytest-of-<user> folders, which must never be the 2.19 lane's
  mount -t tmpfs -o mode=1777 tmpfs "$2/dev/shm"
  mount -t tmpfs -o mode=1777 tmpfs "$2/tmp"
  # shellcheck disable=SC2086 # $6: the steps, one word each
  exec chroot "$2" /usr/bin/env -i PATH=/opt/next-venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb PIP_CERT=/etc/ssl/certs/gpuhost-host-ca.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 GPUHOST_VENV_REQUIREMENTS=requirements-controller-next.txt \
    GPUHOST_SANITY_PYTHON=3.13 ANSIBLE_LOG_PATH="$3" PYTEST_N="$4" \
    /bin/bash "$5/scripts/controller-next.sh" --inside "$5" $6
fi
if [ "${1:-}" = "--inside" ]; then
  # In the chroot: $2 the collection copy, $3... the steps.
  cd "$2"; shift 2
  # a git repository of the copy: sanity.sh and ansible-test list the files with git
  git init -q && git add -A
  git -c user.name=lane -c user.email=lane@localhost commit -q -m controller-next
  out=/tmp/controller-next
  AUDIT_PB=tests/integration/test_audit_playbook.py
  mkdir -p "$out"
  failed=()
  for step in "$@"; do
    t=$(date +%s)
    case $step in
      sanity) cmd=(scripts/sanity.sh) ;;
      unit) cmd=(.venv/bin/pytest -q -n "$PYTEST_N" -p no:cacheprovider tests/unit) ;;
      # Left to the 2.19 lane: the rendered HTML in Chromium and gpuhost.prom through
      # promtool check the outputs' formats, not ansible-core, and need large packages.
      playbooks) cmd=(.venv/bin/pytest -q -n "$PYTEST_N" -p no:cacheprovider
                      tests/integration/test_audit_playbook.py
                      tests/integration/test_tune_playbook.py
                      --deselect "$AUDIT_PB::test_html_report_in_headless_chromium"
                      --deselect "$AUDIT_PB::test_matrix_headings_grouped_and_never_broken_inside_a_word"
                      --deselect "$AUDIT_PB::test_run_metrics_pass_promtool_and_match_the_findings") ;;
      *) echo "controller-next: unknown step $step (sanity, unit, playbooks)" >&2; exit 2 ;;
    esac
    echo "controller-next: $step: ${cmd[*]}"
    set +e
    "${cmd[@]}" 2>&1 | tee "$out/$step.log"
    rc=${PIPESTATUS[0]}
    set -e
    # ansible-core's deprecation warnings: in the step's own output, in pytest's warnings
    # summary, and in the log of every ansible run the step made.
    if grep -n -i -E "DEPRECATION WARNING|DeprecationWarning|\[DEPRECATED\]" "$out/$step.log" \
        ${ANSIBLE_LOG_PATH:+"$ANSIBLE_LOG_PATH"} 2>/dev/null | grep -v "^Binary" | head -20 \
        | grep . ; then
      echo "controller-next: $step: deprecation warnings above (a failure in this lane)"
      [ "$rc" != 0 ] || rc=1
    fi
    echo "controller-next: $step rc=$rc in $(( $(date +%s) - t ))s"
    [ "$rc" = 0 ] || failed+=("$step")
  done
  [ ${#failed[@]} -eq 0 ] || { echo "controller-next: failed: ${failed[*]}"; exit 1; }
  exit 0
fi
cd "$(dirname "$0")/.."
start=$(date +%s)
steps=${*:-sanity unit playbooks}
root=$(scripts/trixie-root.sh)
ready=$(( $(date +%s) - start ))
lane=/gpuhost-next
src=$root$lane/ansible_collections/gpuhost/tuning
rm -rf "${root:?}$lane"
mkdir -p "$src"
# the checkout as git sees it (tracked plus untracked-but-not-ignored), as sanity.sh copies it
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done \
  | tar --null --no-recursion -T - -cf - | tar -xf - -C "$src"
ln -sfn /opt/next-venv "$src/.venv"
log=$lane/ansible.log

set +e
unshare --mount --propagation private --pid --fork --kill-child -- \
  "$0" --namespace "$root" "$log" "${PYTEST_N:-auto}" "$lane/ansible_collections/gpuhost/tuning" \
  "$steps"
rc=$?
set -e
echo "controller-next: ansible-core $(chroot "$root" /opt/next-venv/bin/ansible --version | head -1 | sed 's/.*core //;s/]//') on $(chroot "$root" /opt/next-venv/bin/python --version): rc=$rc in $(( $(date +%s) - start ))s (root ready in ${ready}s; tree $src)"
exit $rc
