#!/usr/bin/env bash
# Issue 43's run on a lent GPU machine (reads, copies and compute kernels only: no GPU
# setting, no reset): the ceiling probe beside PyTorch on every GPU, the live nvidia-smi
# -q -x the audit reads, and the audit playbook on the live host with the CUDA pass and the
# ceiling on, timed. Runs from the checkout's root; ansible-core travels as wheels in .whl/
# (docs/measurements.md says how they were fetched). Everything lands in $OUT.
#   OUT=/tmp/out bash bench/live_gpu.sh
set -u
OUT=${OUT:-/tmp/gpuhost-live}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
links=/tmp/gpuhost-links
mkdir -p "$links/ansible_collections/gpuhost"
ln -sfn "$PWD" "$links/ansible_collections/gpuhost/tuning"
export ANSIBLE_COLLECTIONS_PATH=$links ANSIBLE_LOCAL_TEMP=/tmp/ansible-local
{
  date -u; uname -r; nvidia-smi -L
  nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
} > "$OUT/machine.txt" 2>&1
nvidia-smi -q -x > "$OUT/nvidia-smi-q-x.xml" 2>&1
read -r -a extra <<< "${GPUHOST_CEILING_ARGS:-}"
for run in 1 2 3; do
  python3 bench/ceiling.py "${extra[@]}" --out "$OUT/ceiling-$run.json" \
    > "$OUT/ceiling-$run.txt" 2>&1
  tail -n 12 "$OUT/ceiling-$run.txt"
done
start=$(python3 -c 'import time; print(time.time())')
python3 /tmp/site/bin/ansible-playbook -i localhost, -c local gpuhost.tuning.audit \
  -e ansible_python_interpreter=python3 -e gpuhost_audit_report_dir="$OUT/reports" \
  -e gpuhost_audit_cuda=true -e gpuhost_audit_cuda_ceiling=true > "$OUT/audit-play.txt" 2>&1
rc=$?
python3 -c 'import sys, time; print("audit playbook rc=%s in %.1f s" % (sys.argv[1], time.time() - float(sys.argv[2])))' "$rc" "$start" | tee -a "$OUT/machine.txt"
tail -n 25 "$OUT/audit-play.txt"
# the report folder: one file back each (at most 8 files come back)
cp "$OUT/reports/localhost.json" "$OUT/audit-localhost.json" 2>/dev/null
cp "$OUT/reports/summary.md" "$OUT/audit-summary.md" 2>/dev/null
rm -rf "$OUT/reports" "$OUT"/ceiling-*.txt
