"""cpuidle/cpufreq readers and writers on real-looking sysfs trees."""

import os

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils import cpu_write
from fixtures import cpu as cpufix


def test_cpu_list_round_trip():
    assert cpu.parse_cpu_list("0-63,65-127\n") == list(range(64)) + list(range(65, 128))
    assert cpu.parse_cpu_list("") == []
    assert cpu.parse_cpu_list("3") == [3]
    assert cpu.format_cpu_list([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert cpu.format_cpu_list([]) == ""
    with pytest.raises(ValueError, match="not a CPU list"):
        cpu.parse_cpu_list("0-x")
    with pytest.raises(ValueError):
        cpu.parse_cpu_list("9-3")


def test_epyc_tree_reads_like_the_seed_host(tmp_path):
    root = cpufix.epyc_cpus(tmp_path)
    assert cpu.cpuidle_driver(root) == "acpi_idle"
    assert cpu.cpuidle_governor(root) == "menu"
    assert cpu.online_cpus(root) == list(range(128))
    states = cpu.read_states(root)
    assert len(states) == 128
    assert [s["name"] for s in states[77]] == ["POLL", "C1", "C2"]
    c2 = states[77][2]
    assert (c2["latency_us"], c2["residency_us"], c2["desc"]) == (800, 1600, "ACPI IOPORT 0x414")
    assert c2["disabled"] is False and c2["default_status"] == "enabled"


def test_offline_cpus_are_skipped(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=16, offline=(8, 15))
    assert cpu.format_cpu_list(cpu.online_cpus(root)) == "0-7,9-14"
    assert 8 not in cpu.read_states(root)
    assert cpu.read_states(root, cpus=[7, 8]).keys() == {7}
    summary = {s["name"]: s for s in cpu.summarize_states(root)}
    assert len(summary["C2"]["cpus"]) == 14


def test_online_falls_back_to_per_cpu_files(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=8, offline=(3,))
    os.unlink(os.path.join(root, cpufix.CPU, "online"))
    assert cpu.online_cpus(root) == [0, 1, 2, 4, 5, 6, 7]


def test_summary_is_the_audit_schema(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=16, c2_disabled=[0, 1, 2])
    summary = cpu.summarize_states(root)
    assert [s["name"] for s in summary] == ["POLL", "C1", "C2"]
    c2 = summary[2]
    assert c2["latency_us"] == 800
    assert c2["cpus"] == list(range(16))
    assert c2["cpus_disabled"] == [0, 1, 2]


def test_no_cpuidle_and_driver_none(tmp_path):
    vm = cpufix.no_cpuidle(tmp_path / "vm")
    assert cpu.cpuidle_driver(vm) is None
    assert not cpu.cpuidle_available(vm)
    assert cpu.read_states(vm) == {}
    none = cpufix.cpuidle_none(tmp_path / "none")
    assert cpu.cpuidle_driver(none) == "none"
    assert cpu.read_states(none) == {}
    assert cpu.summarize_states(none) == []


def test_selection_is_by_name_not_index_on_mixed_cpus(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    by_name = cpu_write.select_states(root, names=["C6"])
    assert sorted(by_name) == [0, 1, 2, 3]
    assert all(s[0]["name"] == "C6" and s[0]["index"] == 3 for s in by_name.values())
    c3 = cpu_write.select_states(root, names=["C3"])
    assert sorted(c3) == [4, 5, 6, 7]


def test_deeper_than_uses_each_cpus_own_latency(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    sel = cpu_write.select_states(root, deeper_than="C1")
    assert [s["name"] for s in sel[0]] == ["C1E", "C6"]
    assert [s["name"] for s in sel[7]] == ["C2", "C3"]
    deeper_c2 = cpu_write.select_states(root, deeper_than="C2")
    # CPUs without C2 are left alone
    assert sorted(deeper_c2) == [4, 5, 6, 7]
    assert [s["name"] for s in deeper_c2[4]] == ["C3"]


def test_max_latency(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    sel = cpu_write.select_states(root, max_latency_us=100)
    assert [s["name"] for s in sel[1]] == ["C6"]
    assert [s["name"] for s in sel[5]] == ["C3"]
    assert cpu_write.select_states(root, max_latency_us=1000) == {}
    sel = cpu_write.select_states(root, max_latency_us=1)
    assert [s["name"] for s in sel[5]] == ["C2", "C3"]


def test_unknown_names_are_errors_listing_what_exists(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    msg = r"C6 not found on any online CPU \(available: C1, C2, POLL\)"
    with pytest.raises(cpu.CpuError, match=msg):
        cpu_write.select_states(root, names=["C6"])
    with pytest.raises(cpu.CpuError, match="deeper_than"):
        cpu_write.select_states(root, deeper_than="C1E")
    with pytest.raises(cpu.CpuError, match="exactly one"):
        cpu_write.select_states(root, names=["C2"], max_latency_us=10)


def _disable_values(root, cpus, index=2):
    out = []
    for c in cpus:
        rel = "cpu%d/cpuidle/state%d/disable" % (c, index)
        with open(os.path.join(root, cpufix.CPU, rel)) as h:
            out.append(h.read().strip())
    return out


def test_set_states_writes_reads_back_and_is_idempotent(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=16, offline=(9,), c2_disabled=[3])
    sel = cpu_write.select_states(root, names=["C2"])
    result = cpu_write.set_states(root, sel, True)
    assert len(result["changed"]) == 14 and result["unchanged"] == [(3, "C2")]
    assert _disable_values(root, [0, 3, 15]) == ["1", "1", "1"]
    assert not os.path.exists(os.path.join(root, cpufix.CPU, "cpu9", "cpuidle"))
    again = cpu_write.set_states(root, cpu_write.select_states(root, names=["C2"]), True)
    assert again["changed"] == []
    back = cpu_write.set_states(root, cpu_write.select_states(root, names=["C2"]), False,
                                cpus=[0, 1])
    assert back["changed"] == [(0, "C2"), (1, "C2")]
    assert _disable_values(root, [0, 1, 2]) == ["0", "0", "1"]


def test_check_mode_writes_nothing(tmp_path, snapshot_tree):
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    before = snapshot_tree(root)
    result = cpu_write.set_states(root, cpu_write.select_states(root, names=["C2"]), True,
                                  check_mode=True)
    assert len(result["changed"]) == 8
    assert snapshot_tree(root) == before


def test_a_write_that_does_not_take_names_cpu_and_state(tmp_path, monkeypatch):
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    real = cpu_write.write_in_place

    def dropping(path, text):
        if "/cpu5/" in path:
            return  # firmware/hypervisor ignores the write
        real(path, text)

    monkeypatch.setattr(cpu_write, "write_in_place", dropping)
    with pytest.raises(cpu.CpuError) as info:
        cpu_write.set_states(root, cpu_write.select_states(root, names=["C2"]), True)
    assert "cpu5 C2" in str(info.value) and "reads back '0'" in str(info.value)
    assert "cpu4" not in str(info.value)


def test_a_write_error_is_reported(tmp_path, monkeypatch):
    root = cpufix.epyc_cpus(tmp_path, threads=2)

    def denied(path, text):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cpu_write, "write_in_place", denied)
    with pytest.raises(cpu.CpuError, match="cpu0 C2: writing 1 to .*Permission denied"):
        cpu_write.set_states(root, cpu_write.select_states(root, names=["C2"]), True)


def test_missing_disable_file_fails_before_any_write(tmp_path, snapshot_tree):
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    sel = cpu_write.select_states(root, names=["C2"])
    os.unlink(os.path.join(root, cpufix.CPU, "cpu3/cpuidle/state2/disable"))
    before = snapshot_tree(root)
    with pytest.raises(cpu.CpuError, match="missing, nothing written: cpu3 C2"):
        cpu_write.set_states(root, sel, True)
    assert snapshot_tree(root) == before


def test_cpufreq_acpi_and_amd_pstate(tmp_path):
    acpi = cpu.cpufreq_info(cpufix.epyc_cpus(tmp_path / "a", threads=8))
    assert acpi["driver"] == "acpi-cpufreq"
    assert acpi["governors"] == ["performance"]
    assert "schedutil" in acpi["available_governors"]
    assert acpi["amd_pstate_status"] is None
    assert acpi["policies"] == 8
    epp = cpu.cpufreq_info(cpufix.epyc_cpus(
        tmp_path / "b", threads=8, cpufreq_driver="amd-pstate-epp", amd_pstate_status="active"))
    assert epp["driver"] == "amd-pstate-epp"
    assert epp["amd_pstate_status"] == "active"
    assert epp["available_governors"] == ["performance", "powersave"]
    assert epp["epp"] == ["performance"]


def test_cpufreq_mixed_governors_sorted_unique(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    path = os.path.join(root, cpufix.CPU, "cpufreq", "policy2", "scaling_governor")
    with open(path, "w") as handle:
        handle.write("ondemand\n")
    assert cpu.cpufreq_info(root)["governors"] == ["ondemand", "performance"]


def test_cpufreq_absent(tmp_path):
    info = cpu.cpufreq_info(cpufix.no_cpuidle(tmp_path))
    assert info["driver"] is None and info["governors"] is None
    assert info["available_governors"] is None and info["amd_pstate_status"] is None


def test_cpu_module_util_runs_without_ansible(tmp_path):
    """The boot-time service ships cpu.py, cpu_write.py and hostfs.py to hosts: no ansible
    import allowed."""
    import shutil
    import subprocess
    import sys
    utils = os.path.join(os.path.dirname(cpu.__file__))
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("cpu.py", "cpu_write.py", "hostfs.py"):
        shutil.copy(os.path.join(utils, name), str(flat / name))
    root = cpufix.epyc_cpus(tmp_path / "host", threads=4)
    code = ("import sys; sys.path.insert(0, '.'); import cpu, cpu_write; "
            "s = cpu_write.select_states(%r, names=['C2']); "
            "cpu_write.set_states(%r, s, True); "
            "print(cpu.format_cpu_list(cpu.summarize_states(%r)[2]['cpus_disabled'])); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ansible' "
            "or m.startswith('ansible_collections.'))); print(cpu.host_path.__module__)"
            % (root, root, root))
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=str(flat),
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": ""})
    # C2 disabled on all 4 CPUs, nothing from ansible loaded, the flat hostfs used
    assert out.stdout.split("\n")[:3] == ["0-3", "[]", "hostfs"]
