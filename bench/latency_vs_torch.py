"""Launch latency on a real GPU: the collection's CUDA probe (the script cuda.py's
child_source() ships, as ``python3 -`` with --latency: an empty PTX kernel, cuLaunchKernel +
cuCtxSynchronize) against the same round trip through PyTorch (a one-element add_ +
torch.cuda.synchronize()), in one run, back to back and with a 1 ms sleep before each
launch. Reads and launches only; no GPU setting is changed. Prints one JSON document; used
on the lent H200 (bench/RESULTS-latency.md).

    python3 bench/latency_vs_torch.py [--count 2000] [--gap-us 1000]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def probe_source():
    """The probe's script as the modules ship it (``cuda.child_source()``), imported from
    this checkout through a temporary ``ansible_collections`` link."""
    links = tempfile.mkdtemp(prefix="gpuhost-latency.")
    try:
        os.makedirs(os.path.join(links, "ansible_collections", "gpuhost"))
        os.symlink(REPO, os.path.join(links, "ansible_collections", "gpuhost", "tuning"))
        sys.path.insert(0, links)
        from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
        return cuda.child_source()
    finally:
        shutil.rmtree(links)


def stats(seconds):
    ordered = sorted(seconds)

    def rank(pct):
        return ordered[max(0, min(len(ordered) - 1, -(-pct * len(ordered) // 100) - 1))]
    return {"p50_us": round(rank(50) * 1e6, 1), "p99_us": round(rank(99) * 1e6, 1),
            "max_us": round(ordered[-1] * 1e6, 1)}


def torch_round_trips(count, gap_us):
    import torch
    x = torch.zeros(1, device="cuda")
    for _warm in range(count // 10 + 5):
        x.add_(1)
        torch.cuda.synchronize()
    out = {}
    for mode, gap in (("back_to_back", 0), ("sleeping", gap_us / 1e6)):
        times = []
        for _trip in range(count):
            if gap:
                time.sleep(gap)
            start = time.perf_counter()
            x.add_(1)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        out[mode] = stats(times)
    return {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), **out}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--gap-us", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    probe = subprocess.run([sys.executable, "-", "--latency", "--latency-count",
                            str(args.count), "--latency-gap-us", str(args.gap_us)],
                           input=probe_source(), capture_output=True, text=True, timeout=600,
                           check=False)
    result = {"probe_rc": probe.returncode, "probe_stderr": probe.stderr[-2000:]}
    try:
        doc = json.loads(probe.stdout)
        result["probe"] = [{"pci_bus_id": d["pci_bus_id"], "name": d["name"],
                            "latency": d.get("latency")} for d in doc["devices"]]
        result["probe_seconds"] = doc.get("seconds")
    except ValueError:
        result["probe_stdout"] = probe.stdout[-2000:]
    try:
        result["pytorch"] = torch_round_trips(args.count, args.gap_us)
    except Exception as exc:   # no torch here: the probe's figures stand alone
        result["pytorch"] = {"error": repr(exc)}
    result["seconds"] = round(time.perf_counter() - started, 1)
    sys.stdout.write(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
