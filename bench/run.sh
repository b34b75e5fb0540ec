#!/usr/bin/env bash
# Fleet benchmark (make bench): N simulated GPU hosts on this machine, each a network namespace
# running its own sshd on its own address with its own seed host tree as gpuhost_root; the
# controller runs in a namespace of its own, so this machine's interfaces, addresses and routes
# are never touched. For each N: wall time of the ping floor, audit, plan (on the untuned seed
# trees), tune (first run and again), audit --check. Results: bench/results.json,
# bench/RESULTS.md, bench/wall_time.png; logs and per-run stats in bench/out/. Everything
# (sshd, namespaces, trees, keys) is removed on exit, failure and Ctrl-C included.
#
# Settings (environment): BENCH_SIZES="1 8 32" BENCH_FORKS=8 BENCH_REPEAT=1
#   BENCH_RUNS="ping audit plan tune audit_check apply peers" (a subset measures less; ping
#   always runs; apply: the plan run's plan applied on fresh trees, then planned again)
#   BENCH_PEER_MAX=N: the peers (bench/peers: the seeds' one-shot script, a task-per-setting
#   role) only for fleets up to N hosts; BENCH_TASKS_MAX=N (default 1): the task-per-setting
#   role only up to N hosts (one host's first run took 74-91 s of CPU on this 2-core machine:
#   ~155 module round trips, 0.5-0.6 s of CPU each; 64 hosts are ~1.3 hours of CPU per run).
#   It runs after everything else, size by size, so a run cut short keeps every other figure.
#   BENCH_TASKS_FIRST_MAX=N (default: BENCH_TASKS_MAX): its first run only up to N hosts;
#   above that every host gets a copy of a tree its first run tuned (the largest such N) and
#   only the no-change run is measured (its `changed` column shows the copy is in that state)
#   BENCH_OUT=DIR (default bench/out): logs and measurements; BENCH_DEST=DIR (default bench/):
#   results.json, RESULTS.md, wall_time.png
#   BENCH_PY313=all|half|none (default none): hosts whose target Python is 3.13 (all, or every
#   second one: bench/fleet.py), their sshd chrooted into bench/trixie-hosts.sh's Debian 13
#   root inside their namespace, their host folder (tree, sshd config, pid file, log) and the
#   run's keys bound in at the same paths; ansible_python_interpreter=/usr/bin/python3.13
#   BENCH_HOST_BASHRC=debian|machine (default debian): the 3.11 hosts' sessions source
#   base-files' root .bashrc (bound over /root/.bashrc in their mount namespace only), or
#   this machine's own (before 2026-12-02 05:20 every run did: pyenv init, 0.17 s of CPU per
#   module round trip on each host)
#   BENCH_TUNE_MAX=N: tune only for fleets up to N hosts (e.g. BENCH_SIZES="1 8 32 64"
#   BENCH_TUNE_MAX=32 adds the 64-host floor and audit without the slow 64-host tune runs)
#   BENCH_SUBNET=10.250.0 (a /24 that exists only inside the benchmark's namespaces)
#   BENCH_HOLD=1: set up the fleet for the largest N, write bench/out/env.sh (source it, then
#   `ip netns exec "$BENCH_CTL" ansible-playbook -i "$BENCH_INVENTORY" ...`), measure nothing,
#   and keep the fleet until Ctrl-C (for finding out where time goes).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
SIZES=${BENCH_SIZES:-"1 8 32"}
FORKS=${BENCH_FORKS:-8}
REPEAT=${BENCH_REPEAT:-1}
RUNS=" ${BENCH_RUNS:-ping audit plan tune audit_check apply peers} "
export BENCH_SUBNET=${BENCH_SUBNET:-10.250.0}
PY=$REPO/.venv/bin/python
OUT=${BENCH_OUT:-$HERE/out}
TASKS_MAX=${BENCH_TASKS_MAX:-1}
TASKS_FIRST_MAX=${BENCH_TASKS_FIRST_MAX:-$TASKS_MAX}
TAG=gpb$$                     # namespace names: $TAG-ctl (controller), $TAG-hNNN (hosts)
CTL=$TAG-ctl
RUN=""
MADE_RUN_SSHD=0
HOLD_PID=""
CHILD=""

log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

teardown() {
  local rc=$? pid ns
  trap - EXIT INT TERM
  set +e
  [ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2>/dev/null
  [ -n "$CHILD" ] && kill "$CHILD" 2>/dev/null
  if [ -n "$RUN" ]; then
    for pidfile in "$RUN"/hosts/*/sshd.pid; do
      [ -f "$pidfile" ] && pid=$(cat "$pidfile") && kill "$pid" 2>/dev/null
    done
  fi
  # Anything still running inside our namespaces was started by this run (ssh control
  # masters, sshd session processes): end it by pid, then delete the namespaces.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TAG-"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
  done
  sleep 0.3
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$TAG-"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns"
  done
  [ -n "$RUN" ] && rm -rf "$RUN"
  [ "$MADE_RUN_SSHD" = 1 ] && rmdir /run/sshd 2>/dev/null
  log "torn down (namespaces $TAG-*, sshd, trees, keys)"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "bench: needs root (network namespaces, sshd)" >&2; exit 1; }
[ -x /usr/sbin/sshd ] || { echo "bench: /usr/sbin/sshd missing: make bench installs openssh-server" >&2; exit 1; }
max=0; for n in $SIZES; do [ "$n" -gt "$max" ] && max=$n; done
[ "$max" -le 200 ] || { echo "bench: at most 200 hosts in one /24" >&2; exit 1; }
PY313_HOSTS=" $("$PY" "$HERE/fleet.py" py313 "$max") "
TRIXIE=""
if [ "$PY313_HOSTS" != "  " ]; then
  log "Python 3.13 hosts:$PY313_HOSTS(Debian 13 root: bench/trixie-hosts.sh)"
  TRIXIE=$("$HERE/trixie-hosts.sh")
fi

# Trees on tmpfs: the seed tree is ~9,500 small files, and a disk-backed /tmp made copying
# it 10x slower than the runs being measured.
RUN=$(mktemp -d /dev/shm/gpuhost-bench.XXXXXX)
rm -rf "$OUT"; mkdir -p "$OUT" "$RUN/ssh" "$RUN/hosts" "$RUN/cp" "$RUN/reports"
if [ ! -d /run/sshd ]; then mkdir -m 0755 /run/sshd; MADE_RUN_SSHD=1; fi

log "keys (throwaway host key and client key for this run)"
ssh-keygen -q -t ed25519 -N '' -C gpuhost-bench-host -f "$RUN/ssh/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C gpuhost-bench-client -f "$RUN/ssh/client_ed25519"
cp "$RUN/ssh/client_ed25519.pub" "$RUN/ssh/authorized_keys"
echo "$BENCH_SUBNET.* $(cut -d' ' -f1,2 "$RUN/ssh/host_ed25519.pub")" > "$RUN/ssh/known_hosts"

log "network: controller namespace $CTL with bridge at $BENCH_SUBNET.1/24, $max host namespaces"
ip netns add "$CTL"
ip -n "$CTL" link set lo up
ip -n "$CTL" link add br0 type bridge
ip -n "$CTL" addr add "$BENCH_SUBNET.1/24" dev br0
ip -n "$CTL" link set br0 up
for i in $(seq 1 "$max"); do
  h=$(printf 'h%03d' "$i"); ns=$TAG-$h; addr=$BENCH_SUBNET.$((i + 1)); dir=$RUN/hosts/$h
  mkdir -p "$dir"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$CTL" link add "v$h" type veth peer name eth0 netns "$ns"
  ip -n "$CTL" link set "v$h" master br0 up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  cat > "$dir/sshd_config" <<EOF
ListenAddress $addr
Port 22
HostKey $RUN/ssh/host_ed25519
PidFile $dir/sshd.pid
AuthorizedKeysFile $RUN/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxSessions 64
MaxStartups 256
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel ERROR
EOF
  if [[ $PY313_HOSTS == *" $i "* ]]; then
    # A private mount namespace (it ends with the sshd): a tmpfs on the root's /dev/shm,
    # the host folder bound at its own path, the keys read-only, the host's own
    # ~/.ansible (remote tmp, the modules' bytecode cache: each host compiles once, as a
    # real host does); then sshd chrooted.
    # shellcheck disable=SC2016  # expanded by the inner shell
    ip netns exec "$ns" unshare --mount --propagation private sh -ec '
      t=$1 dir=$2 keys=$3
      mount -t tmpfs -o mode=0755,size=1m bench-shm "$t/dev/shm"
      mkdir -p "$t$dir" "$t$keys"
      mount --bind "$dir" "$t$dir"
      mount --bind "$keys" "$t$keys"
      mount -o remount,bind,ro "$t$keys"
      mkdir -p "$dir/dot-ansible" "$t/root/.ansible"
      mount --bind "$dir/dot-ansible" "$t/root/.ansible"
      chroot "$t" /usr/sbin/sshd -t -f "$dir/sshd_config"
      exec chroot "$t" /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
    ' sh "$TRIXIE" "$dir" "$RUN/ssh"
  else
    # Debian's bash sources ~/.bashrc for every command sshd runs (SSH_SOURCE_BASHRC), and
    # this machine's /root/.bashrc runs `pyenv init` (0.17 s of CPU per session, every module
    # round trip): a private mount namespace gives the host base-files' root .bashrc, as a
    # fresh Debian root has (the 3.13 hosts' root has it too), and the host's own
    # ~/.ansible (remote tmp, the modules' bytecode cache, empty at the start: each host
    # compiles once, as a real host does). The real files are untouched.
    # shellcheck disable=SC2016  # expanded by the inner shell
    ip netns exec "$ns" unshare --mount --propagation private sh -ec '
      dir=$1
      if [ "${BENCH_HOST_BASHRC:-debian}" = debian ] && [ -f /root/.bashrc ] &&
          [ -f /usr/share/base-files/dot.bashrc ]; then
        mount --bind -o ro /usr/share/base-files/dot.bashrc /root/.bashrc
      fi
      mkdir -p "$dir/dot-ansible" /root/.ansible
      mount --bind "$dir/dot-ansible" /root/.ansible
      /usr/sbin/sshd -t -f "$dir/sshd_config"
      exec /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
    ' sh "$dir"
  fi
done
for i in $(seq 1 "$max"); do
  f=$(printf '%s/hosts/h%03d/sshd.pid' "$RUN" "$i")
  for _ in $(seq 50); do [ -s "$f" ] && break; sleep 0.1; done
  [ -s "$f" ] || { echo "bench: sshd for host $i did not start:" >&2; cat "${f%.pid}.log" >&2; exit 1; }
done
log "$max sshd running"

# The fast settings (bench/README.md). Everything else from the repository's ansible.cfg.
export ANSIBLE_CONFIG=$REPO/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH=$RUN/collections
export ANSIBLE_FORKS=$FORKS
export ANSIBLE_PIPELINING=True
export ANSIBLE_SSH_ARGS="-C -o ControlMaster=auto -o ControlPersist=60s"
export ANSIBLE_HOST_KEY_CHECKING=True   # the run's known_hosts is checked
export ANSIBLE_CALLBACK_PLUGINS=$HERE/callback_plugins
export ANSIBLE_CALLBACKS_ENABLED=bench_stats
export ANSIBLE_LOAD_CALLBACK_PLUGINS=True
export ANSIBLE_NOCOLOR=True
export PATH=$REPO/.venv/bin:$PATH
# A private copy of the collection for this run: `make collection` elsewhere (other work in
# the same checkout) replaces ./collections, and a playbook whose files vanish mid-run fails.
log "collection: private copy of this checkout in the run folder"
"$REPO/.venv/bin/ansible-galaxy" collection install --force -p "$RUN/collections" "$REPO" >/dev/null
INSTALLED=$RUN/collections/ansible_collections/gpuhost/tuning
# The peers (bench/peers) and their collections (ansible.posix, community.general from PyPI's
# ansible package) in the same private collections path; a copy of bench/peers in the run.
if [[ $RUNS == *" peers "* ]]; then
  log "peers: ansible.posix and community.general into the run's collections path"
  "$HERE/peers/install.sh" "$RUN/collections" >&2
  cp -a "$HERE/peers" "$RUN/peers"
fi
PEER_VARS=(-e "peer_dir=$RUN/peers" -e "common_defaults=$INSTALLED/roles/common/defaults/main.yml")
export BENCH_COMMIT BENCH_PY313=${BENCH_PY313:-none} BENCH_TRIXIE=$TRIXIE
BENCH_COMMIT="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no -- plugins roles playbooks 2>/dev/null)" ]; then
  BENCH_COMMIT="$BENCH_COMMIT + uncommitted changes in plugins/roles/playbooks"
fi

# measure N LABEL REP CMD...: one cold run in the controller namespace (bench/measure.py).
measure() {
  local n=$1 label=$2 rep=$3; shift 3
  # In the background + wait, so a signal runs the teardown at once (it ends the namespaces'
  # processes, the measured ansible among them).
  "$PY" "$HERE/measure.py" --out "$OUT" --run "$RUN" --ctl "$CTL" --n "$n" --label "$label" \
    --rep "$rep" --forks "$FORKS" --hosts "$n" -- "$@" &
  CHILD=$!
  wait "$CHILD"
  CHILD=""
}

have_audit=0; have_plan=0; have_tune=0; have_check=0; have_peers=0; have_apply=0
[[ $RUNS == *" peers "* ]] && have_peers=1
[ -f "$INSTALLED/playbooks/audit.yml" ] && [[ $RUNS == *" audit "* ]] && have_audit=1
[ -f "$INSTALLED/playbooks/audit.yml" ] && [[ $RUNS == *" audit_check "* ]] && have_check=1
[ -f "$INSTALLED/playbooks/plan.yml" ] && [[ $RUNS == *" plan "* ]] && have_plan=1
[ -f "$INSTALLED/playbooks/tune.yml" ] && [[ $RUNS == *" tune "* ]] && have_tune=1
[ -f "$INSTALLED/playbooks/apply.yml" ] && [ $have_plan = 1 ] && [[ $RUNS == *" apply "* ]] \
  && have_apply=1
[ $have_audit = 1 ] || log "audit not measured (no playbooks/audit.yml, or not in BENCH_RUNS)"
[ $have_plan = 1 ] || log "plan not measured (no playbooks/plan.yml, or not in BENCH_RUNS)"
[ $have_tune = 1 ] || log "tune not measured (no playbooks/tune.yml, or not in BENCH_RUNS)"
REPORTS=(-e "gpuhost_report_dir=$RUN/reports")

if [ "${BENCH_HOLD:-0}" = 1 ]; then
  "$PY" "$HERE/fleet.py" trees "$RUN" "$max"
  inv=$("$PY" "$HERE/fleet.py" inventory "$RUN" "$max")
  mkdir -p "$RUN/cp/hold"
  {
    export -p | grep -E ' (ANSIBLE_[A-Z_]+|PATH)='
    echo "export ANSIBLE_SSH_CONTROL_PATH_DIR=$RUN/cp/hold"
    echo "export BENCH_CTL=$CTL BENCH_INVENTORY=$inv BENCH_RUN=$RUN"
  } > "$OUT/env.sh"
  log "holding $max hosts: source $OUT/env.sh; Ctrl-C (or kill $$) tears down"
  sleep infinity & HOLD_PID=$!
  wait "$HOLD_PID" || true
  exit 0
fi

for n in $SIZES; do
  log "N=$n: fresh seed trees"
  "$PY" "$HERE/fleet.py" trees "$RUN" "$n"
  inv=$("$PY" "$HERE/fleet.py" inventory "$RUN" "$n")
  # The floor, the audit and the plan alternate (ping 1, audit 1, plan 1, ping 2, ...):
  # measured one after the other, the floor always ran first on a machine that had cooled
  # down between sizes, and the audit's ratio carried that drift. The plan runs here, on the
  # fresh seed trees before any tune run (the audit changes nothing on them, nor does the
  # plan: check mode): untuned, so it has every change to plan, as the fleet it is for.
  for r in $(seq "$REPEAT"); do
    measure "$n" ping "$r" ansible all -i "$inv" -m ansible.builtin.ping
    if [ $have_audit = 1 ]; then
      measure "$n" audit "$r" ansible-playbook -i "$inv" gpuhost.tuning.audit "${REPORTS[@]}"
    fi
    if [ $have_plan = 1 ]; then
      measure "$n" plan "$r" ansible-playbook -i "$inv" gpuhost.tuning.plan "${REPORTS[@]}"
    fi
  done
  # The plans' files (gpuhost_plan_dir: <report dir>/plan, on tmpfs as the audit's reports
  # are), kept for a look: bench/out/plan-N<n>/ (plan.md is the last repeat's).
  if [ $have_plan = 1 ] && [ -d "$RUN/reports/plan" ]; then
    cp -a "$RUN/reports/plan" "$OUT/plan-N$n"
    cp "$RUN/reports/plan/plan.json" "$RUN/plan-N$n.json"
    rm -rf "$RUN/reports/plan"
  fi
  if [ $have_tune = 1 ] && [ "$n" -le "${BENCH_TUNE_MAX:-100000}" ]; then
    measure "$n" tune_first 1 ansible-playbook -i "$inv" gpuhost.tuning.tune "${REPORTS[@]}"
    for r in $(seq "$REPEAT"); do
      measure "$n" tune_again "$r" ansible-playbook -i "$inv" gpuhost.tuning.tune "${REPORTS[@]}"
    done
  fi
  if [ $have_check = 1 ]; then
    for r in $(seq "$REPEAT"); do
      measure "$n" audit_check "$r" ansible-playbook -i "$inv" gpuhost.tuning.audit --check \
        "${REPORTS[@]}"
    done
  fi
  # The plan approved and applied (issue 40's flow at this size): fresh seed trees, the same
  # state the plan above was made from, so every host's fingerprint matches and the apply
  # changes each host as planned; then a new plan must find nothing left to change.
  if [ $have_apply = 1 ] && [ -f "$RUN/plan-N$n.json" ]; then
    log "N=$n: fresh seed trees for apply (the state the plan was made from)"
    "$PY" "$HERE/fleet.py" trees "$RUN" "$n"
    measure "$n" apply 1 ansible-playbook -i "$inv" gpuhost.tuning.apply "${REPORTS[@]}" \
      -e "gpuhost_plan=$RUN/plan-N$n.json"
    measure "$n" replan 1 ansible-playbook -i "$inv" gpuhost.tuning.plan "${REPORTS[@]}"
    cp -a "$RUN/reports/plan" "$OUT/replan-N$n"
    rm -rf "$RUN/reports/plan"
    "$PY" - "$OUT/replan-N$n/plan.json" "$n" <<'PYEOF'
import json
import sys
doc = json.load(open(sys.argv[1]))
left = sorted(h for h, e in doc["hosts"].items() if e["changes"] or e["refused"])
if left or len(doc["hosts"]) != int(sys.argv[2]):
    sys.exit("bench: the plan after the apply still has work or refusals on %d of %d hosts: %s"
             % (len(left), len(doc["hosts"]), ", ".join(left[:10])))
print("bench: the plan after the apply: %d hosts, nothing to change" % len(doc["hosts"]),
      file=sys.stderr)
PYEOF
  fi
  # The one-shot peer on the same hosts, from fresh seed trees: the seeds' one-shot script as
  # one ansible.builtin.script task; first run, then again.
  if [ $have_peers = 1 ] && [ "$n" -le "${BENCH_PEER_MAX:-100000}" ]; then
    log "N=$n: fresh seed trees for peer oneshot"
    "$PY" "$HERE/fleet.py" trees "$RUN" "$n"
    measure "$n" oneshot_first 1 ansible-playbook -i "$inv" "$RUN/peers/oneshot.yml" \
      "${PEER_VARS[@]}"
    for r in $(seq "$REPEAT"); do
      measure "$n" oneshot_again "$r" ansible-playbook -i "$inv" "$RUN/peers/oneshot.yml" \
        "${PEER_VARS[@]}"
    done
  fi
done

# The task-per-setting peer last (minutes per host), size by size: first run on fresh seed
# trees, then again (once). Above BENCH_TASKS_FIRST_MAX the hosts start from a copy of a tree
# that its first run tuned, and only the no-change run is measured.
if [ $have_peers = 1 ]; then
  book=$RUN/peers/task_per_setting.yml
  for n in $SIZES; do
    if [ "$n" -gt "$TASKS_MAX" ] || [ "$n" -gt "${BENCH_PEER_MAX:-100000}" ]; then
      log "N=$n: task-per-setting peer left out (BENCH_TASKS_MAX=$TASKS_MAX)"
      continue
    fi
    inv=$("$PY" "$HERE/fleet.py" inventory "$RUN" "$n")
    if [ "$n" -le "$TASKS_FIRST_MAX" ]; then
      log "N=$n: fresh seed trees for peer tasks"
      "$PY" "$HERE/fleet.py" trees "$RUN" "$n"
      measure "$n" tasks_first 1 ansible-playbook -i "$inv" "$book" "${PEER_VARS[@]}"
      rm -rf "$RUN/tasks-tuned"
      cp -a "$RUN/hosts/h001/root" "$RUN/tasks-tuned"
    elif [ -d "$RUN/tasks-tuned" ]; then
      log "N=$n: task-per-setting first run left out (BENCH_TASKS_FIRST_MAX=$TASKS_FIRST_MAX):" \
        "every host starts from a copy of a tree that its first run tuned"
      "$PY" "$HERE/fleet.py" trees "$RUN" "$n" "$RUN/tasks-tuned"
    else
      log "N=$n: task-per-setting peer left out (no first run to start its no-change run from)"
      continue
    fi
    measure "$n" tasks_again 1 ansible-playbook -i "$inv" "$book" "${PEER_VARS[@]}"
  done
fi

"$PY" "$HERE/report.py" --out "$OUT" --dest "${BENCH_DEST:-$HERE}" --sizes "$SIZES" --forks "$FORKS" --repeat "$REPEAT"
