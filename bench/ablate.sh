#!/usr/bin/env bash
# Where does the audit's and the tune's time go? Runs variants against a live fleet held by
# `BENCH_HOLD=1 BENCH_SIZES=16 bench/run.sh` (in another shell) and prints one table:
# wall and CPU of each variant against the ping floor. Variants switch parts off with the
# roles' own public switches, or run a private copy of the collection without the roles'
# argument specs (ansible-core validates them in one task per role per host) or without the
# audit's per-host debug and fail-gate tasks. Nothing in the checkout is changed.
#   bench/ablate.sh            table in bench/ABLATION.md, runs in bench/out/ablate/
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$(dirname "$HERE")/.venv/bin/python
# shellcheck disable=SC1091
. "$HERE/out/env.sh"   # written by the held fleet: ANSIBLE_*, BENCH_CTL, BENCH_INVENTORY, BENCH_RUN
OUT=$HERE/out/ablate
rm -rf "$OUT"; mkdir -p "$OUT"
N=$(grep -c '^h[0-9]' "$BENCH_INVENTORY")
export ANSIBLE_CALLBACK_PLUGINS=$HERE/callback_plugins ANSIBLE_CALLBACKS_ENABLED=bench_stats
export ANSIBLE_LOAD_CALLBACK_PLUGINS=True
BASE=$ANSIBLE_COLLECTIONS_PATH

# Variant collections: lean-specs (no meta/argument_specs.yml at all), lean (also no audit
# debug/fail-gate tasks). Role common has no main spec of its own (its options are checked in
# each dependent role's spec), so there is no separate variant without it.
variant() {
  local name=$1 dest=$BENCH_RUN/variants/$1
  rm -rf "$dest"; mkdir -p "$dest"; cp -a "$BASE/ansible_collections" "$dest/"
  rm -f "$dest"/ansible_collections/gpuhost/tuning/roles/*/meta/argument_specs.yml
  if [ "$name" = lean ]; then
    "$PY" - "$dest/ansible_collections/gpuhost/tuning/roles/audit/tasks/main.yml" <<'EOF2'
import sys
import yaml
path = sys.argv[1]
tasks = yaml.safe_load(open(path))
keep = [t for t in tasks if not t["name"].startswith(("Show the ranked", "Fail hosts"))]
yaml.safe_dump(keep, open(path, "w"), sort_keys=False)
EOF2
  fi
  echo "$dest"
}
LEAN_SPECS=$(variant lean-specs)
LEAN=$(variant lean)
# host_tune ad hoc, its wanted values in option wanted: the host and role common's default
# sysctl values (the other keys take the spec's defaults).
TUNE_ARGS=$("$PY" - "$(dirname "$HERE")/roles/common/defaults/main.yml" <<'EOF2'
import json
import sys
import yaml
d = yaml.safe_load(open(sys.argv[1]))
print(json.dumps({"root": "{{ gpuhost_root }}",
                  "wanted": {"host": "{{ inventory_hostname }}", "sysctl": d["gpuhost_sysctl"]}}))
EOF2
)

m() {  # m LABEL COLLECTIONS_PATH CMD...
  local label=$1 cpath=$2; shift 2
  ANSIBLE_COLLECTIONS_PATH=$cpath "$PY" "$HERE/measure.py" --out "$OUT" --run "$BENCH_RUN" \
    --ctl "$BENCH_CTL" --n "$N" --label "$label" --rep 1 --forks "${ANSIBLE_FORKS:-8}" \
    --hosts "$N" -- "$@"
}
R=(-e "gpuhost_report_dir=$BENCH_RUN/reports")
I=(-i "$BENCH_INVENTORY")
m ping "$BASE" ansible all "${I[@]}" -m ansible.builtin.ping
# The fast settings, one at a time the other way: no pipelining, fact gathering (the setup
# module) instead of ping. (Interpreter discovery is not measured: on these machines it finds
# a broken pyenv shim and the module fails.)
m ping_no_pipelining "$BASE" ansible all "${I[@]}" -m ansible.builtin.ping \
  -e ansible_pipelining=false
m gather_facts "$BASE" ansible all "${I[@]}" -m ansible.builtin.setup
m host_audit_adhoc "$BASE" ansible all "${I[@]}" -m gpuhost.tuning.host_audit -a 'root={{ gpuhost_root }}'
m audit "$BASE" ansible-playbook "${I[@]}" gpuhost.tuning.audit "${R[@]}"
m audit_no_specs "$LEAN_SPECS" ansible-playbook "${I[@]}" gpuhost.tuning.audit "${R[@]}"
m audit_no_specs_debug_gate "$LEAN" ansible-playbook "${I[@]}" gpuhost.tuning.audit "${R[@]}"
m tune_first "$BASE" ansible-playbook "${I[@]}" gpuhost.tuning.tune "${R[@]}"
m tune_again "$BASE" ansible-playbook "${I[@]}" gpuhost.tuning.tune "${R[@]}"
m tune_again_no_report "$BASE" ansible-playbook "${I[@]}" gpuhost.tuning.tune "${R[@]}" \
  -e gpuhost_tune_report=false
m tune_again_no_specs "$LEAN_SPECS" ansible-playbook "${I[@]}" gpuhost.tuning.tune "${R[@]}"
m tune_again_no_specs_no_report "$LEAN_SPECS" ansible-playbook "${I[@]}" gpuhost.tuning.tune \
  "${R[@]}" -e gpuhost_tune_report=false
# The module alone, ad hoc: the floor of a tune pass through Ansible.
m host_tune_adhoc_again "$BASE" ansible all "${I[@]}" -m gpuhost.tuning.host_tune -a "$TUNE_ARGS"

"$PY" - "$OUT" "$N" "$HERE/ABLATION.md" <<'EOF'
import datetime
import json
import os
import sys
out, n, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
recs = [json.loads(line) for line in open(os.path.join(out, "measurements.jsonl"))]
floor = next(r for r in recs if r["label"] == "ping")
fcpu = floor["controller_cpu"] + floor["hosts_cpu"]
lines = []
emit = lines.append
emit("# Where the time goes: variants against the ping floor")
emit("")
emit("Produced by bench/ablate.sh against a held %d-host fleet on %s (%d cores, load %.1f-%.1f "
      "during the runs). One cold run each; CPU = controller + hosts, independent of other "
      "load. `tune_again*` runs change nothing." % (
          n, datetime.date.today().isoformat(), os.cpu_count(),
          min(r["load_before"] for r in recs), max(r["load_before"] for r in recs)))
emit("")
emit("| variant (N=%d) | wall s | x floor | CPU s ctl + hosts | x floor CPU | task runs/host "
      "| host round trips/host |" % n)
emit("|---|---:|---:|---:|---:|---:|---:|")
for r in recs:
    stats = json.load(open(os.path.join(out, r["log"] + ".stats.json")))
    runs = sum(c["ok"] + c["failed"]
               for c in stats["hosts"].values()) / float(n)
    trips = sum(t["results"] - t["skipped"] for t in stats["tasks"]
                if t.get("where") == "host") / float(n)
    cpu = r["controller_cpu"] + r["hosts_cpu"]
    emit("| %s%s | %.1f | %.2f | %.1f + %.1f | %.2f | %.2f | %.2f |" % (
        r["label"], "" if r["rc"] == 0 else " (rc %d)" % r["rc"], r["seconds"],
        r["seconds"] / floor["seconds"], r["controller_cpu"], r["hosts_cpu"], cpu / fcpu,
        runs, trips))
emit("")
with open(dest, "w") as handle:
    handle.write("\n".join(lines))
sys.stdout.write("\n".join(lines))
EOF
