"""subjects/health/gpu_xid_check.py: gpu_xid_events and nvswitch_sxid_events, one finding per GPU or
NVSwitch with events in the kernel log's window (the seed capture's log: XID 79 four times
in three days, fixtures/nvhealth.py)."""

from auditcase import judge


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
