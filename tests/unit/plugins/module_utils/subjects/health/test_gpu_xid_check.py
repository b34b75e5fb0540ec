"""subjects/health/gpu_xid_check.py: gpu_xid_events and nvswitch_sxid_events, one finding per GPU or
NVSwitch with events in the kernel log's window (the seed capture's log: XID 79 four times
in three days, fixtures/nvhealth.py)."""

import json
import os
import subprocess
import sys
import time

from auditcase import health_findings, judge
from fixtures import nvhealth

GPU = "0000:18:00.0"


def _device(kind, code, klass, before_boot=False, address="0000:82:00.0"):
    return {"address": address, "kind": kind, "events": 1, "worst": klass,
            "codes": [{"code": code, "class": klass, "description": "test event",
                       "count": 1, "first": "2025-12-31T23:00:00Z",
                       "last": "2025-12-31T23:00:00Z", "message": "the message",
                       "before_boot": before_boot, "repeated": False}]}


def test_the_looping_xid79_is_critical_hardware(audited):
    (item,) = judge("gpu_xid_events", audited("seed_health_host"))
    assert (item["subject"], item["severity"]) == ("0000:82:00.0", "critical")
    assert item["current"].startswith("4 XID events in 7 days: XID 79 x4 (GPU has fallen")
    assert item["remedy"].startswith("hardware service:")
    assert item["detail"].startswith("needs: hardware service; last message: ")
    assert judge("nvswitch_sxid_events", audited("seed_health_host")) == []


def test_a_reset_asked_for_before_this_boot_is_low_and_done(audited):
    facts = audited("seed_health_host")
    facts["kernel_log"]["devices"] = [_device("xid", 48, "reset_gpu", before_boot=True)]
    (item,) = judge("gpu_xid_events", facts, host="gpu07")
    assert item["severity"] == "low"
    assert item["remedy"].startswith("none now: rebooted since; watch for a repeat")
    assert "gpuhost.tuning.reboot_verify -l gpu07 -e gpuhost_reboot_verify_reboot=true" in (
        item["remedy"])
    assert "-e gpuhost_reboot=" not in item["remedy"]


def test_an_sxid_is_the_nvswitchs_finding(audited):
    facts = audited("seed_health_host")
    facts["kernel_log"]["devices"] = [_device("sxid", 12028, "reset_gpu",
                                              address="0000:05:00.0")]
    assert judge("gpu_xid_events", facts) == []
    (item,) = judge("nvswitch_sxid_events", facts)
    assert item["subject"] == "0000:05:00.0" and item["current"].startswith(
        "1 SXID event in 7 days: SXID 12028 x1")


def test_none_without_events(audited):
    facts = audited("seed_health_host")
    facts["kernel_log"]["devices"] = []
    assert judge("gpu_xid_events", facts) == []


def test_na_without_a_kernel_log(audited):
    assert judge("gpu_xid_events", audited("seed_host")).startswith("no kernel log (")


def test_an_ended_xid_says_by_what_and_when(tmp_path):
    line = nvhealth.xid_line
    now = time.time()
    nvhealth.write_kern_log(tmp_path, [line(now - 3600, GPU, 163, "PSHC disengaged"),
                                       line(now - 600, GPU, 162, "PSHC re-engaged")])
    facts, found = health_findings(tmp_path, ["gpu_xid"])
    (item,) = found
    assert item["severity"] == "info"
    assert ", ended by XID 162 at 20" in item["current"]


# NVSentinel issue #1120: one node logged about 800,000 XID 95 lines, 29 distinct.
FLOOD_LINES = 800000
FLOOD_DISTINCT = 29
FLOOD_GPUS = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
              "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0")


def test_800000_xid_95_lines_are_one_finding_per_gpu_in_bounded_time_and_memory(tmp_path):
    """The kern.log of the flood (121 MiB, XID 95 "Uncontained" lines as the driver prints
    them, 29 distinct pid/name pairs over eight GPUs): read within LOG_LIMIT and MAX_KEPT,
    each GPU one gpu_xid_events finding and one gpu_recovery_needed, the audit's errors
    saying how much was left out. Measured here (2026-12-05, 2 cores): 0.57 s to read and judge,
    42 MiB peak RSS of the whole child process (26 MiB of it Python and the imports)."""
    folder = tmp_path / "var" / "log"
    folder.mkdir(parents=True)
    start = time.time() - 3 * 86400
    with open(str(folder / "kern.log"), "w") as handle:
        for n in range(FLOOD_LINES):
            handle.write(nvhealth.xid_line(
                start + n * 0.3, FLOOD_GPUS[n % len(FLOOD_GPUS)], 95,
                "pid=%d, name=python%d, Uncontained: FBHUB. RST: Yes, D-RST: No"
                % (2279400 + n % FLOOD_DISTINCT, n % FLOOD_DISTINCT)) + "\n")
    script = (
        "import json, resource, sys, time\n"
        "sys.path[:0] = %r\n"
        "import auditcase\n"
        "from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import (\n"
        "    cmdout, hostfs_base)\n"
        "from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import (\n"
        "    recovery)\n"
        "t0 = time.time()\n"
        "with hostfs_base.session() as reading:\n"
        "    facts = auditcase.health_facts(%r, cmdout.CommandOutputs(%r))\n"
        "facts['gpu_recovery'] = recovery.facts(facts['nvidia_smi'], facts['kernel_log'], [], {})\n"
        "found = auditcase.column_findings(facts, ['gpu_xid', 'gpu_recovery'])\n"
        "print(json.dumps({'seconds': time.time() - t0, 'found': found,\n"
        "                  'problems': [m for _s, m in reading.problems],\n"
        "                  'rss_kib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))\n"
    ) % (sys.path[:], str(tmp_path), str(tmp_path))
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, check=False)
    finally:        # 121 MiB in the temporary folder (often tmpfs): not kept for pytest's
        os.remove(str(folder / "kern.log"))     # three last runs
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    print("flood: %.2f s, peak RSS %d MiB" % (got["seconds"], got["rss_kib"] >> 10))
    assert got["seconds"] < 10 and got["rss_kib"] < 200 * 1024, got
    by_id = {}
    for item in got["found"]:
        by_id.setdefault(item["id"], []).append(item["subject"])
    assert sorted(by_id["gpu_xid_events"]) == sorted(FLOOD_GPUS)
    assert sorted(by_id["gpu_recovery_needed"]) == sorted(FLOOD_GPUS)
    assert any("older rotations not read" in p or "dropped" in p for p in got["problems"]), \
        got["problems"]
