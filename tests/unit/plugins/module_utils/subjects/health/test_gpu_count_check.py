"""subjects/health/gpu_count_check.py: gpu_lost (on the bus, gone from the driver or fallen off it)
and
gpu_count_expected (moved from test_host_health.py; kernel messages in their real formats,
fixtures/kernmsg.py)."""

import os

from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

from auditcase import judge

NOW = hosts.SEED_CAPTURED_AT
MINE = ("gpu_lost", "gpu_count_expected")


def _ids(result, only=MINE):
    return sorted((f["id"], f["severity"], f["subject"]) for f in result["findings"]
                  if f["id"] in only)


def test_expected_count_against_the_bus(tmp_path):
    hosts.seed_host(str(tmp_path))
    wanted = hosts.common_wanted()
    assert _ids(audit.audit(str(tmp_path), dict(wanted, gpu_count=8))) == []
    assert _ids(audit.audit(str(tmp_path), dict(wanted, gpu_count=10))) == [
        ("gpu_count_expected", "high", "pci bus")]
    assert _ids(audit.audit(str(tmp_path), dict(wanted, gpu_count=4))) == [
        ("gpu_count_expected", "low", "pci bus")]


def test_a_gpu_passed_to_a_vm_is_not_lost(tmp_path):
    built = hosts.lost_gpu_host(str(tmp_path))
    os.makedirs(str(tmp_path / "etc/pve/qemu-server"))
    with open(str(tmp_path / "etc/pve/qemu-server/201.conf"), "w") as handle:
        handle.write("memory: 65536\nhostpci0: %s,pcie=1\n" % built["lost"][5:-2])
    # the log still says it fell off the bus (before the VM got it): a finding by text only
    found = [f for f in audit.audit(str(tmp_path), hosts.common_wanted())["findings"]
             if f["id"] == "gpu_lost"]
    assert len(found) == 1 and "not listed by the driver" not in found[0]["current"]


def test_fallen_off_before_this_boot_and_back_is_low(tmp_path):
    hosts.seed_host(str(tmp_path))
    address = "0000:83:00.0"
    nvhealth.proc_stat_btime(str(tmp_path), int(NOW - 3600))
    nvhealth.write_stored_log(str(tmp_path), [
        kernmsg.line(NOW - 7200, kernmsg.off_bus(address)),
        kernmsg.line(NOW - 3599, kernmsg.boot())], NOW)
    assert _ids(audit.audit(str(tmp_path), hosts.common_wanted())) == [
        ("gpu_lost", "low", address)]


def test_the_lost_gpu_is_high_and_named_by_both_sources(audited):
    result = audited("lost_gpu_host")
    (lost,) = judge("gpu_lost", result)
    assert lost["severity"] == "high" and "7 of 8 GPUs in nvidia-smi" in lost["current"]


def test_none_when_every_gpu_is_seen(audited):
    assert judge("gpu_lost", audited("seed_health_host")) == []


def test_na_when_the_drivers_gpus_cannot_be_read(audited):
    assert judge("gpu_lost", audited("seed_host")) == (
        "the driver's GPUs cannot be read (no nvidia-smi, no /proc/driver/nvidia/gpus)")
