#!/usr/bin/env bash
# The controller lanes on ansible-core 2.20, 2.21 and the newest 2.22
# (requirements-controller-next.txt) on Python 3.13, in a Debian 13 root used as a chroot
# (scripts/trixie-root.sh builds it once and caches it). In it, on a fresh copy of this
# checkout:
#   1. ansible-test sanity --python 3.13, every test, no ignore file (scripts/sanity.sh), on
#      the newest line (the other outer line, 2.19, runs it in make sanity); then (galaxy)
#      ansible-galaxy collection build and install, as a user does first;
#   2. the unit tier (tests/unit), on the newest line;
#   3. the playbook tests that need no podman: tests/integration/test_audit_playbook.py and
#      test_tune_playbook.py (ansible-playbook against temporary host trees; their podman
#      cases skip there, the 2.19 lane runs them), on the newest line;
#   4. playbooks-2.21 and playbooks-2.20: step 3 again on ansible-core 2.21 and 2.20
#      (requirements-controller-2.2x.txt, a venv of its own each in the same root, made the
#      first time), so every line inside requires_ansible has run the playbooks. The unit
#      tier calls modules in-process (AnsibleModule, module_utils), which the outer lines
#      cover; the playbooks are what each line's controller changes.
#   5. devel: step 3 on ansible-core's devel branch, built from a snapshot of
#      ansible/ansible (GPUHOST_DEVEL_SNAPSHOT: a git repository; default the local mirror
#      /work/.mirror/ansible+ansible/repo). It reports and never fails the lane, as
#      community collections run devel; with no snapshot, or one older than the newest
#      release tested, it says so and is not run.
# A deprecation warning from ansible-core in any of them is a failure: every ansible run
# logs to ANSIBLE_LOG_PATH and that log, the sanity output and pytest's warnings summary
# are searched for it.
#
# Separate from the 2.19 lane (it can run beside make molecule / make integration): its own
# cache (~/.cache/gpuhost-trixie), its own HOME, venv, ~/.ansible, tests/output and pytest
# cache, all inside the root; the checkout itself is only read. The chroot runs in private
# mount and PID namespaces (nothing it mounts or starts outlives it; /sys is not mounted).
#
# Usage: scripts/controller-next.sh [sanity|galaxy|unit|playbooks|playbooks-2.21|
#        playbooks-2.20|unit-2.2x|galaxy-2.2x|devel ...] (default: sanity galaxy unit
#        playbooks playbooks-2.21 playbooks-2.20 devel)
# Env:   PYTEST_N (pytest-xdist workers, default auto), GPUHOST_TRIXIE_CACHE (see
#        trixie-root.sh), GPUHOST_DEVEL_SNAPSHOT (see step 5)
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
  # core_venv FILE: the venv of a requirements file in this (cached) root, made or remade
  # when the file changed; prints its path.
  core_venv() {
    local reqs=$1 venv want
    venv=/opt/venv-$(basename "$reqs" .txt)
    want=$(sha256sum "$reqs" | cut -d' ' -f1)
    if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
      echo "controller-next: making $venv from $reqs" >&2
      rm -rf "$venv"
      python3 -m venv "$venv" >&2
      "$venv/bin/pip" install -q -r "$reqs" >&2
      echo "$want" > "$venv/.requirements.sha256"
    fi
    echo "$venv"
  }
  base_path=$PATH
  AUDIT_PB=tests/integration/test_audit_playbook.py
  mkdir -p "$out"
  failed=()
  for step in "$@"; do
    t=$(date +%s)
    # the venv of this step's ansible-core: .venv (which the tests and make collection
    # use), PATH and the requirements file scripts/venv.sh checks .venv against
    reqs=requirements-controller-next.txt
    case $step in *-2.[0-9]*) reqs=requirements-controller-${step#*-}.txt ;; esac
    if [ "$step" = devel ]; then
      # the devel snapshot the outer script copied in (or why there is none); reported,
      # never a failure of the lane
      if [ ! -f /opt/devel-src/pyproject.toml ]; then
        echo "controller-next: devel: not run: $(cat /opt/devel-why 2>/dev/null || echo 'no snapshot')"
        continue
      fi
      venv=/opt/venv-devel
      if [ ! -x "$venv/bin/ansible" ] || ! cmp -s /opt/devel-src/.commit "$venv/.commit"; then
        rm -rf "$venv"
        { python3 -m venv "$venv" && "$venv/bin/pip" install -q /opt/devel-src pytest==8.3.5 \
            pytest-xdist==3.6.1 && cp /opt/devel-src/.commit "$venv/.commit"; } >&2 \
          || { echo "controller-next: devel: not run: its install failed"; continue; }
      fi
    elif [ "$reqs" = requirements-controller-next.txt ]; then venv=/opt/next-venv; else
      [ -f "$reqs" ] || { echo "controller-next: $step: no $reqs" >&2; failed+=("$step"); continue; }
      venv=$(core_venv "$reqs") || { echo "controller-next: $step: no venv" >&2; failed+=("$step"); continue; }
    fi
    ln -sfn "$venv" .venv
    export GPUHOST_VENV_REQUIREMENTS=$reqs PATH=$venv/bin:$base_path
    echo "controller-next: $step on $(.venv/bin/ansible --version | sed -n 1p)"
    # shellcheck disable=SC2016 # the galaxy step's script is expanded by its own bash
    case $step in
      sanity) cmd=(scripts/sanity.sh) ;;
      # what a user on this line does first: build the collection and install it
      # (ansible-galaxy refuses one whose requires_ansible leaves this release out)
      galaxy|galaxy-2.2[0-9]) cmd=(bash -c 'set -e; d=$(mktemp -d)
            .venv/bin/ansible-galaxy collection build --output-path "$d" .
            .venv/bin/ansible-galaxy collection install -p "$d/c" "$d"/gpuhost-tuning-*.tar.gz
            test -f "$d/c/ansible_collections/gpuhost/tuning/MANIFEST.json"') ;;
      unit|unit-2.2[0-9]) cmd=(.venv/bin/pytest -q -n "$PYTEST_N" -p no:cacheprovider tests/unit) ;;
      # Left to the 2.19 lane: the rendered HTML in Chromium and gpuhost.prom through
      # promtool check the outputs' formats, not ansible-core, and need large packages.
      playbooks|playbooks-2.2[0-9]|devel) cmd=(.venv/bin/pytest -q -n "$PYTEST_N" -p no:cacheprovider
                      tests/integration/test_audit_playbook.py
                      tests/integration/test_tune_playbook.py
                      --deselect "$AUDIT_PB::test_html_report_in_headless_chromium"
                      --deselect "$AUDIT_PB::test_run_metrics_pass_promtool_and_match_the_findings") ;;
      *) echo "controller-next: unknown step $step (sanity, galaxy, unit, playbooks," \
           "unit-2.2x, galaxy-2.2x, playbooks-2.2x, devel)" >&2; exit 2 ;;
    esac
    echo "controller-next: $step: ${cmd[*]}"
    set +e
    "${cmd[@]}" 2>&1 | tee "$out/$step.log"
    rc=${PIPESTATUS[0]}
    set -e
    # ansible-core's deprecation warnings: in the step's own output, in pytest's warnings
    # summary, and in the log of every ansible run the step made.
    # (All matches kept, then the first 20 printed: a `head` in the pipe would cut grep off
    # and, under pipefail, hide the very warnings it was finding.)
    hits=$(grep -n -i -E "DEPRECATION WARNING|DeprecationWarning|\[DEPRECATED\]" "$out/$step.log" \
        ${ANSIBLE_LOG_PATH:+"$ANSIBLE_LOG_PATH"} 2>/dev/null | grep -v "^Binary" || true)
    if [ -n "$hits" ]; then
      printf '%s\n' "$hits" | sed -n 1,20p
      echo "controller-next: $step: deprecation warnings above (a failure in this lane)"
      [ "$rc" != 0 ] || rc=1
    fi
    echo "controller-next: $step rc=$rc in $(( $(date +%s) - t ))s"
    if [ "$step" = devel ]; then
      # reported, never the lane's failure
      echo "controller-next: devel ($(.venv/bin/ansible --version | sed -n '1{s/.*core //;s/]//;p}')," \
           "snapshot $(cat /opt/devel-src/.commit)): $([ "$rc" = 0 ] && echo passed || echo "FAILED (rc=$rc; not a failure of make test)")"
      continue
    fi
    [ "$rc" = 0 ] || failed+=("$step")
  done
  [ ${#failed[@]} -eq 0 ] || { echo "controller-next: failed: ${failed[*]}"; exit 1; }
  exit 0
fi
cd "$(dirname "$0")/.."
start=$(date +%s)
steps=${*:-sanity galaxy unit playbooks playbooks-2.21 playbooks-2.20 devel}
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

# The devel snapshot (step devel): ansible-core's sources at the snapshot's commit copied into
# the root, when they are newer than the newest release this lane tests; else why not.
rm -rf "$root/opt/devel-src" "$root/opt/devel-why"
case " $steps " in *" devel "*)
  snap=${GPUHOST_DEVEL_SNAPSHOT:-/work/.mirror/ansible+ansible/repo}
  newest=$(sed -n 's/^ansible-core==//p' requirements-controller-next.txt)
  if ! git -C "$snap" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    echo "no snapshot of ansible/ansible at $snap (GPUHOST_DEVEL_SNAPSHOT)" > "$root/opt/devel-why"
  else
    dev=$(git -C "$snap" show HEAD:lib/ansible/release.py | sed -n "s/^__version__ = '\(.*\)'/\1/p")
    when=$(git -C "$snap" log -1 --format=%cs HEAD)
    if [ "$(printf '%s\n%s\n' "${dev%%.dev*}" "${newest%%rc*}" | sort -V | head -1)" != "${newest%%rc*}" ]; then
      echo "the snapshot at $snap is ansible-core $dev ($when), older than the newest release tested ($newest)" > "$root/opt/devel-why"
    else
      mkdir -p "$root/opt/devel-src"
      git -C "$snap" archive HEAD | tar -xf - -C "$root/opt/devel-src"
      git -C "$snap" rev-parse --short HEAD > "$root/opt/devel-src/.commit"
    fi
  fi ;;
esac

set +e
unshare --mount --propagation private --pid --fork --kill-child -- \
  "$0" --namespace "$root" "$log" "${PYTEST_N:-auto}" "$lane/ansible_collections/gpuhost/tuning" \
  "$steps"
rc=$?
set -e
cores=""
for venv in /opt/next-venv /opt/venv-requirements-controller-2.21 /opt/venv-requirements-controller-2.20; do
  [ -x "$root$venv/bin/ansible" ] || continue
  # sed reads all of ansible's output: `head -1` closing the pipe early made ansible die of
  # a broken pipe (exit 250), which set -e and pipefail turned into the lane's failure
  cores="$cores${cores:+, }$(chroot "$root" "$venv/bin/ansible" --version | sed -n '1{s/.*core //;s/]//;p}')"
done
echo "controller-next: ansible-core $cores on $(chroot "$root" /opt/next-venv/bin/python --version): rc=$rc in $(( $(date +%s) - start ))s (root ready in ${ready}s; tree $src)"
exit $rc
