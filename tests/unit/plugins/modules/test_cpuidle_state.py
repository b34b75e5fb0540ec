"""cpuidle_state module: main() with arguments, the JSON a user sees."""

import os

from ansible_collections.gpuhost.tuning.plugins.modules import cpuidle_state
from fixtures import cpu as cpufix
from modrun import run_module
from conftest import TESTS


def run(root, check_mode=False, **args):
    args.setdefault("root", str(root))
    return run_module(cpuidle_state, args, check_mode=check_mode)


def disable(root, cpu, index):
    path = os.path.join(root, cpufix.CPU, "cpu%d/cpuidle/state%d/disable" % (cpu, index))
    with open(path) as handle:
        return handle.read().strip()


def test_disable_c2_everywhere_then_idempotent(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, offline=(64,))
    result = run(root, names=["C2"])
    assert result["changed"] is True and result["available"] is True
    assert result["driver"] == "acpi_idle"
    assert result["cpus"] == "0-63,65-127"
    assert result["changed_count"] == 127
    assert result["states"] == [{"name": "C2", "latency_us": 800, "cpus": "0-63,65-127",
                                 "disabled_before": "", "disabled_after": "0-63,65-127"}]
    assert disable(root, 0, 2) == "1" and disable(root, 127, 2) == "1"
    assert disable(root, 0, 1) == "0"
    again = run(root, names=["C2"])
    assert again["changed"] is False and again["changed_count"] == 0
    assert again["states"][0]["disabled_before"] == "0-63,65-127"


def test_check_mode_changes_nothing_and_reports_the_change(tmp_path, snapshot_tree):
    root = cpufix.epyc_cpus(tmp_path, threads=16, c2_disabled=[0])
    before = snapshot_tree(root)
    result = run(root, check_mode=True, deeper_than="C1")
    assert result["changed"] is True
    assert result["states"][0]["disabled_before"] == "0"
    assert result["states"][0]["disabled_after"] == "0-15"
    assert snapshot_tree(root) == before


def test_enable_reverts_only_given_cpus(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=8, c2_disabled=True)
    result = run(root, names=["C2"], state="enabled", cpus=["0-1", "5"])
    assert result["changed"] and result["cpus"] == "0-1,5"
    assert result["states"][0]["disabled_after"] == ""
    assert [disable(root, c, 2) for c in range(8)] == ["0", "0", "1", "1", "1", "0", "1", "1"]


def test_mixed_cpus_by_latency(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    result = run(root, max_latency_us=100)
    names = {s["name"]: s for s in result["states"]}
    assert names["C6"]["cpus"] == "0-3" and names["C3"]["cpus"] == "4-7"
    assert disable(root, 0, 3) == "1" and disable(root, 4, 3) == "1"
    assert disable(root, 4, 2) == "0"


def test_offline_cpus_in_the_list_are_skipped(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=8, offline=(3,))
    result = run(root, names=["C2"], cpus=["2-4"])
    assert result["skipped_cpus"] == "3" and result["cpus"] == "2,4"
    assert result["changed_count"] == 2


def test_unknown_cpu_and_unknown_name_fail(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    result = run(root, names=["C2"], cpus=["8"])
    assert result["failed"] and "CPU 8 not present" in result["msg"]
    result = run(root, names=["C6"])
    assert result["failed"] and "C6 not found on any online CPU" in result["msg"]
    assert "available: C1, C2, POLL" in result["msg"]


def test_options_are_mutually_exclusive(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=2)
    result = run(root, names=["C2"], deeper_than="C1")
    assert result["failed"] and "mutually exclusive" in result["msg"]
    result = run(root)
    assert result["failed"] and "one of the following is required" in result["msg"]


def test_hosts_without_cpuidle_are_not_an_error(tmp_path):
    for root, driver in ((cpufix.no_cpuidle(tmp_path / "vm"), None),
                         (cpufix.cpuidle_none(tmp_path / "none"), "none")):
        result = run(root, names=["C2"])
        assert result.get("failed") is not True
        assert result["available"] is False and result["changed"] is False
        assert result["driver"] == driver and result["states"] == []


def test_dropped_write_fails_naming_cpu_and_state(tmp_path, monkeypatch):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import (
        cpuidle_state as cpu_write,
    )
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    monkeypatch.setattr(cpu_write, "write_in_place", lambda path, text: None)
    result = run(root, names=["C2"])
    assert result["failed"] and "cpu0 C2" in result["msg"] and "reads back '0'" in result["msg"]


def test_ansible_doc_renders_and_matches_the_spec(tmp_path):
    import json
    import subprocess
    import sys
    tests = TESTS
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(tests, "output", "pathlink"))
    doc_bin = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([doc_bin, "--json", "gpuhost.tuning.cpuidle_state"], env=env,
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)["gpuhost.tuning.cpuidle_state"]
    assert set(doc["doc"]["options"]) == {"names", "max_latency_us", "deeper_than", "state",
                                          "cpus", "root"}
    result = run(cpufix.epyc_cpus(tmp_path, threads=2), names=["C2"])
    assert set(result) - {"changed", "invocation"} <= set(doc["return"])
