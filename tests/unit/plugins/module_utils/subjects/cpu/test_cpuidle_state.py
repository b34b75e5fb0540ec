"""cpu_write: choosing idle states by name or latency, writing their ``disable`` flags
with read-back, check mode and the errors that name CPU and state, on the EPYC sysfs
trees of tests/fixtures/cpu.py (moved from test_cpu.py, which keeps the readers)."""

import os

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpuidle_state
from fixtures import cpu as cpufix


def test_selection_is_by_name_not_index_on_mixed_cpus(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    by_name = cpuidle_state.select_states(root, names=["C6"])
    assert sorted(by_name) == [0, 1, 2, 3]
    assert all(s[0]["name"] == "C6" and s[0]["index"] == 3 for s in by_name.values())
    c3 = cpuidle_state.select_states(root, names=["C3"])
    assert sorted(c3) == [4, 5, 6, 7]


def test_deeper_than_uses_each_cpus_own_latency(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    sel = cpuidle_state.select_states(root, deeper_than="C1")
    assert [s["name"] for s in sel[0]] == ["C1E", "C6"]
    assert [s["name"] for s in sel[7]] == ["C2", "C3"]
    deeper_c2 = cpuidle_state.select_states(root, deeper_than="C2")
    # CPUs without C2 are left alone
    assert sorted(deeper_c2) == [4, 5, 6, 7]
    assert [s["name"] for s in deeper_c2[4]] == ["C3"]


def test_max_latency(tmp_path):
    root = cpufix.mixed_cpus(tmp_path)
    sel = cpuidle_state.select_states(root, max_latency_us=100)
    assert [s["name"] for s in sel[1]] == ["C6"]
    assert [s["name"] for s in sel[5]] == ["C3"]
    assert cpuidle_state.select_states(root, max_latency_us=1000) == {}
    sel = cpuidle_state.select_states(root, max_latency_us=1)
    assert [s["name"] for s in sel[5]] == ["C2", "C3"]


def test_unknown_names_are_errors_listing_what_exists(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    msg = r"C6 not found on any online CPU \(available: C1, C2, POLL\)"
    with pytest.raises(cpu.CpuError, match=msg):
        cpuidle_state.select_states(root, names=["C6"])
    with pytest.raises(cpu.CpuError, match="deeper_than"):
        cpuidle_state.select_states(root, deeper_than="C1E")
    with pytest.raises(cpu.CpuError, match="exactly one"):
        cpuidle_state.select_states(root, names=["C2"], max_latency_us=10)


def _disable_values(root, cpus, index=2):
    out = []
    for c in cpus:
        rel = "cpu%d/cpuidle/state%d/disable" % (c, index)
        with open(os.path.join(root, cpufix.CPU, rel)) as h:
            out.append(h.read().strip())
    return out


def test_set_states_writes_reads_back_and_is_idempotent(tmp_path):
    root = cpufix.epyc_cpus(tmp_path, threads=16, offline=(9,), c2_disabled=[3])
    sel = cpuidle_state.select_states(root, names=["C2"])
    result = cpuidle_state.set_states(root, sel, True)
    assert len(result["changed"]) == 14 and result["unchanged"] == [(3, "C2")]
    assert _disable_values(root, [0, 3, 15]) == ["1", "1", "1"]
    assert not os.path.exists(os.path.join(root, cpufix.CPU, "cpu9", "cpuidle"))
    again = cpuidle_state.set_states(root, cpuidle_state.select_states(root, names=["C2"]), True)
    assert again["changed"] == []
    back = cpuidle_state.set_states(root, cpuidle_state.select_states(root, names=["C2"]), False,
                                    cpus=[0, 1])
    assert back["changed"] == [(0, "C2"), (1, "C2")]
    assert _disable_values(root, [0, 1, 2]) == ["0", "0", "1"]


def test_check_mode_writes_nothing(tmp_path, snapshot_tree):
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    before = snapshot_tree(root)
    result = cpuidle_state.set_states(root, cpuidle_state.select_states(root, names=["C2"]), True,
                                      check_mode=True)
    assert len(result["changed"]) == 8
    assert snapshot_tree(root) == before


def test_a_write_that_does_not_take_names_cpu_and_state(tmp_path, monkeypatch):
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    real = cpuidle_state.write_in_place

    def dropping(path, text):
        if "/cpu5/" in path:
            return  # firmware/hypervisor ignores the write
        real(path, text)

    monkeypatch.setattr(cpuidle_state, "write_in_place", dropping)
    with pytest.raises(cpu.CpuError) as info:
        cpuidle_state.set_states(root, cpuidle_state.select_states(root, names=["C2"]), True)
    assert "cpu5 C2" in str(info.value) and "reads back '0'" in str(info.value)
    assert "cpu4" not in str(info.value)


def test_a_write_error_is_reported(tmp_path, monkeypatch):
    root = cpufix.epyc_cpus(tmp_path, threads=2)

    def denied(path, text):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cpuidle_state, "write_in_place", denied)
    with pytest.raises(cpu.CpuError, match="cpu0 C2: writing 1 to .*Permission denied"):
        cpuidle_state.set_states(root, cpuidle_state.select_states(root, names=["C2"]), True)


def test_missing_disable_file_fails_before_any_write(tmp_path, snapshot_tree):
    root = cpufix.epyc_cpus(tmp_path, threads=4)
    sel = cpuidle_state.select_states(root, names=["C2"])
    os.unlink(os.path.join(root, cpufix.CPU, "cpu3/cpuidle/state2/disable"))
    before = snapshot_tree(root)
    with pytest.raises(cpu.CpuError, match="missing, nothing written: cpu3 C2"):
        cpuidle_state.set_states(root, sel, True)
    assert snapshot_tree(root) == before


def test_a_written_flag_is_read_back_fresh_under_a_holder(tmp_path):
    """A tune pass holds the idle states (cpu.states_held); its verify after the cpuidle
    write must see the kernel's new flags, not the read from before the write."""
    root = cpufix.epyc_cpus(tmp_path, threads=8)
    with cpu.states_held(root):
        before = cpu.read_states(root, brief=True)
        assert not any(s["disabled"] for s in before[5] if s["name"] == "C2")
        cpuidle_state.set_states(root, cpuidle_state.select_states(root, names=["C2"]), True)
        after = cpu.read_states(root, brief=True)
    assert all(s["disabled"] for s in after[5] if s["name"] == "C2")
