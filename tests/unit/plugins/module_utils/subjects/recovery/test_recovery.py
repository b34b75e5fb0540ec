"""recovery: what each GPU needs, from the driver's recovery action (the real H200's
nvidia-smi log says None; doctored copies say Reset, Drain P2P, Reboot), the XID events
since this boot and a pending row remap, and who holds the GPU."""

import time

import pytest
from auditcase import health_facts
from fixtures import nvhealth as health

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import recovery

GPU = "0000:18:00.0"
OTHER = "0000:2a:00.0"


def _read(root, edits=None, lines=()):
    health.write_smi(root, health.smi_xml(health.H200_REAL_PROCESS, gpus=[GPU, OTHER],
                                          edits=edits))
    if lines:
        health.write_kern_log(root, lines)
    found = health_facts(root, cmdout.CommandOutputs(str(root)), driver="580.159.04")
    return found


def test_the_real_h200_needs_nothing(tmp_path):
    found = _read(tmp_path)
    got = recovery.facts(found["nvidia_smi"], found["kernel_log"], [], {})
    assert [(g["address"], g["need"], g["driver_action"]) for g in got] == [
        (GPU, "none", "None"), (OTHER, "none", "None")]


@pytest.mark.parametrize("action,need", [("Reset", "reset"), ("Drain P2P", "drain_p2p"),
                                         ("Drain and Reset", "drain_and_reset"),
                                         ("Reboot", "reboot"), ("None", "none")])
def test_the_drivers_action_is_the_need(tmp_path, action, need):
    found = _read(tmp_path, edits={GPU: {"gpu_recovery_action": action}})
    got = dict((g["address"], g) for g in recovery.facts(
        found["nvidia_smi"], found["kernel_log"], [], {}))
    assert got[GPU]["need"] == need and got[OTHER]["need"] == "none"
    assert got[GPU]["evidence"][0] == "driver recovery action %s" % action


def test_xid_154_with_the_driver_at_reset_names_both(tmp_path):
    now = time.time() - 600
    line = health.xid_line(now, GPU, 154, "GPU recovery action changed from 0x0 (None) to "
                                          "0x1 (GPU Reset Required)")
    found = _read(tmp_path, edits={GPU: {"gpu_recovery_action": "Reset"}}, lines=[line])
    got = dict((g["address"], g) for g in recovery.facts(
        found["nvidia_smi"], found["kernel_log"], [], {}))
    assert got[GPU]["need"] == "reset"
    assert got[GPU]["evidence"][0] == "driver recovery action Reset"
    assert got[GPU]["evidence"][1].startswith("XID 154 x1 (GPU Recovery Action Changed")


def test_the_driver_at_none_outranks_an_xid_a_reset_already_cured(tmp_path):
    line = health.xid_line(time.time() - 600, GPU, 48)   # a DBE: reset class
    found = _read(tmp_path, lines=[line])
    got = dict((g["address"], g) for g in recovery.facts(
        found["nvidia_smi"], found["kernel_log"], [], {}))
    assert got[GPU]["need"] == "none" and any("XID 48" in e for e in got[GPU]["evidence"])


def test_without_the_drivers_answer_the_xid_decides():
    log = {"devices": [{"address": GPU, "kind": "xid", "worst": "reset_gpu", "codes": [
        {"code": 79, "count": 2, "class": "reset_gpu", "description": "GPU has fallen off the bus",
         "last": "2026-12-05T10:00:00Z", "before_boot": False},
        {"code": 48, "count": 1, "class": "reboot", "description": "DBE",
         "before_boot": True}]}]}
    got = recovery.facts({"available": False, "gpus": []}, log, [], {})
    assert got == [{"address": GPU, "need": "reset", "driver_action": None,
                    "evidence": ["XID 79 x2 (GPU has fallen off the bus, last "
                                 "2026-12-05T10:00:00Z)"],
                    "holders": {"containers": [], "vms": [], "processes": []}}]


def test_a_pending_row_remap_needs_a_reset_whatever_the_driver_says():
    smi = {"gpus": [{"address": GPU, "recovery_action": "None", "remapped_rows_pending": True}]}
    got = recovery.facts(smi, {}, [], {})
    assert got[0]["need"] == "reset" and "row remap pending" in got[0]["evidence"]


def test_holders_are_containers_vms_and_host_processes():
    processes = [{"address": GPU, "bound": ["129"], "processes": [
        {"pid": 440, "name": "python3", "container": "131"},
        {"pid": 77, "name": "nvidia-persistenced", "container": None}]},
        {"address": OTHER, "bound": ["130"], "processes": []}]
    passthrough = {"devices": [{"vmid": 200, "address": GPU}, {"vmid": 201, "address": OTHER}]}
    assert recovery.holders(GPU, processes, passthrough) == {
        "containers": ["129", "131"], "vms": ["200"],
        "processes": [{"pid": 77, "name": "nvidia-persistenced"}]}


def test_an_unknown_action_text_is_kept_not_guessed():
    assert recovery.driver_need("Recover IMEX Domain") is None
    assert recovery.driver_need("N/A") is None and recovery.driver_need(None) is None
    assert recovery.driver_need("  drain   AND reset ") == "drain_and_reset"


def _nvlink(inactive):
    return {"available": True, "gpus": [
        {"address": GPU, "index": 0, "links": 18, "active": [], "inactive": inactive},
        {"address": OTHER, "index": 1, "links": 18, "active": list(range(18)), "inactive": []}]}


def test_links_inactive_after_xid_149_need_a_reset_though_the_driver_says_none(tmp_path):
    """The real H200 log (driver at None) with XID 149 (NVLink NETIR) since this boot on one
    GPU, and nvidia-smi nvlink -s showing two of its links inactive."""
    line = health.xid_line(time.time() - 600, GPU, 149, "NVLink: NETIR Error")
    found = _read(tmp_path, lines=[line])
    got = dict((g["address"], g) for g in recovery.facts(
        found["nvidia_smi"], found["kernel_log"], [], {}, _nvlink([3, 7])))
    assert got[GPU]["need"] == "reset"
    assert got[GPU]["evidence"][-1] == "NVLink links 3, 7 inactive after XID 149"
    assert got[OTHER]["need"] == "none"


def test_inactive_links_without_an_nvlink_xid_or_an_xid_before_boot_are_not_a_reset():
    smi = {"gpus": [{"address": GPU, "recovery_action": "None"}]}
    before = {"devices": [{"address": GPU, "kind": "xid", "codes": [
        {"code": 149, "count": 1, "class": "reset_gpu", "description": "NVLink: NETIR Error",
         "before_boot": True}]}]}
    for log in ({}, before):
        got = recovery.facts(smi, log, [], {}, _nvlink([3]))
        assert got[0]["need"] == "none", log
