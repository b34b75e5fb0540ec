"""cpuidle/cpufreq readers on real-looking sysfs trees (the writers: test_cpu_write.py)."""

import os

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
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
    """The boot-time service ships cpu, cpuidle_state and what they import (hostfs...) to
    hosts, byte for byte under the collection's namespace (unitinstall.library_closure): no
    Ansible import allowed, and the copy runs on its own with only the library folder on
    the path."""
    import subprocess
    import sys
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import unitinstall
    lib = tmp_path / "lib"
    for rel, data in unitinstall.library_closure("subjects.cpu.cpuidle_state", b"").items():
        path = lib / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    root = cpufix.epyc_cpus(tmp_path / "host", threads=4)
    pkg = "ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu"
    code = ("import sys; sys.path.insert(0, %r); "
            "from %s import cpu, cpuidle_state; "
            "s = cpuidle_state.select_states(%r, names=['C2']); "
            "cpuidle_state.set_states(%r, s, True); "
            "print(cpu.format_cpu_list(cpu.summarize_states(%r)[2]['cpus_disabled'])); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ansible')); "
            "print(cpu.host_path.__module__, cpu.__file__.startswith(%r))"
            % (str(lib), pkg, root, root, root, str(lib)))
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=str(tmp_path),
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": ""})
    # C2 disabled on all 4 CPUs, nothing from ansible loaded, the copied hostfs used
    assert out.stdout.split("\n")[:3] == [
        "0-3", "[]", "ansible_collections.gpuhost.tuning.plugins.module_utils.platform."
        "hostfs_base True"]


def _flip_c2(root, cpu_number, value):
    path = os.path.join(root, cpufix.CPU, "cpu%d" % cpu_number, "cpuidle", "state2", "disable")
    with open(path, "w") as handle:
        handle.write(value)


def test_held_states_are_read_once_and_each_caller_gets_its_own_copy(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    with cpu.states_held(root):
        first = cpu.read_states(root, brief=True)
        _flip_c2(root, 3, "1")          # behind the holder's back: not seen while held
        second = cpu.read_states(root, brief=True)
        assert second == first and second[3][2]["disabled"] is False
        second[3][2]["disabled"] = "mutated"
        assert cpu.read_states(root, brief=True)[3][2]["disabled"] is False
        # a narrower or a full read is not held: it reads the host
        assert cpu.read_states(root, cpus=[3], brief=True)[3][2]["disabled"] is True
        assert cpu.read_states(root)[3][2]["disabled"] is True
        cpu.forget_states()             # what a write of a flag does: the next read is fresh
        assert cpu.read_states(root, brief=True)[3][2]["disabled"] is True
    _flip_c2(root, 3, "0")
    assert cpu.read_states(root, brief=True)[3][2]["disabled"] is False   # released


def test_states_are_not_held_without_a_holder(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    assert cpu.read_states(root, brief=True)[1][2]["disabled"] is False
    _flip_c2(root, 1, "1")
    assert cpu.read_states(root, brief=True)[1][2]["disabled"] is True
