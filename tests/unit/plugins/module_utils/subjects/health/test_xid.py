"""xid: NVIDIA's Xid catalogue folded into what an operator does (docs.nvidia.com/deploy/
xid-errors, the "Resolution Bucket" column), XID 154's own recovery action as the driver
prints it ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"),
NVSwitch SXIDs, and the per-device summary over a window with the repeat rule."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import xid

NOW = 1767225600
DAY = 86400


@pytest.mark.parametrize("code,klass", [(79, "reboot"), (48, "reset_gpu"), (31, "restart_app"),
                                        (43, "none"), (95, "reset_gpu"), (94, "restart_app"),
                                        (119, "reset_gpu")])
def test_catalogue_codes(code, klass):
    assert xid.classify(code)[0] == klass


def test_unknown_code_is_named():
    assert xid.classify(9999) == ("unknown", "XID 9999 (not in the catalogue)")


@pytest.mark.parametrize("action,klass", [("Node Reboot Required", "reboot"),
                                          ("GPU Reset Required", "reset_gpu"),
                                          ("Drain P2P", "reset_gpu"), ("None", "none"),
                                          ("Something New", "unknown")])
def test_xid_154_takes_its_action_from_the_text(action, klass):
    text = "GPU recovery action changed from 0x0 (None) to 0x2 (%s)" % action
    assert xid.classify(154, text) == (klass, "GPU Recovery Action Changed (%s)" % action)


def test_xid_154_without_the_action_is_unknown():
    assert xid.classify(154, "") == ("unknown", "GPU Recovery Action Changed (action not "
                                                "given)")


def test_sxid_fatal_or_not():
    assert xid.classify_sxid(" Fatal ")[0] == "reboot"
    assert xid.classify_sxid("Non-fatal")[0] == "none" and xid.classify_sxid(None)[0] == "none"


def test_worst_class_and_the_ranks():
    assert xid.worst_class([]) is None
    assert xid.worst_class(["none", "reboot", "restart_app"]) == "reboot"
    assert xid.worst_class(["unknown", "restart_app"]) == "unknown"
    assert set(xid.CLASS_SEVERITY) == set(xid.CLASSES) == set(xid.CLASS_TEXT)


def _event(code, age, address="0000:01:00.0", kind="xid", message=None):
    klass, description = xid.classify(code, message or "")
    return {"kind": kind, "address": address, "code": code, "class": klass,
            "description": description, "time": None if age is None else NOW - age,
            "message": message or "Xid (PCI:%s): %d" % (address, code)}


def test_summarize_counts_per_device_and_code_inside_the_window():
    events = [_event(31, 3600), _event(31, 60), _event(79, 2 * DAY, "0000:02:00.0"),
              _event(31, 10 * DAY),                       # outside the 7-day window
              _event(8, None, "0000:02:00.0")]            # no time stamp: inside
    out = xid.summarize(events, NOW, 7)
    assert [(d["address"], d["events"], d["worst"]) for d in out] == [
        ("0000:01:00.0", 2, "restart_app"), ("0000:02:00.0", 2, "reboot")]
    code = out[0]["codes"][0]
    assert (code["code"], code["count"], code["first"], code["last"]) == (
        31, 2, NOW - 3600, NOW - 60)
    assert code["message"].endswith(": 31")
    # worst class first
    assert [c["code"] for c in out[1]["codes"]] == [79, 8]


def test_a_reset_class_xid_three_times_is_hardware_service():
    out = xid.summarize([_event(48, a) for a in (100, 200, 300)], NOW, 7)
    code = out[0]["codes"][0]
    assert code["class"] == "hardware" and code["repeated"] is True
    assert out[0]["worst"] == "hardware"
    twice = xid.summarize([_event(48, a) for a in (100, 200)], NOW, 7)
    assert twice[0]["codes"][0]["class"] == "reset_gpu"
    # a restart_app XID never becomes hardware however often
    many = xid.summarize([_event(31, a) for a in range(1, 10)], NOW, 7)
    assert many[0]["worst"] == "restart_app"


def test_before_boot_only_when_every_event_of_the_code_was_before_it():
    boot = NOW - DAY
    out = xid.summarize([_event(79, 2 * DAY), _event(79, 3 * DAY)], NOW, 7, boot_time=boot)
    assert out[0]["codes"][0]["before_boot"] is True
    out = xid.summarize([_event(79, 2 * DAY), _event(79, 60)], NOW, 7, boot_time=boot)
    assert out[0]["codes"][0]["before_boot"] is False


def test_sxids_are_their_own_kind_and_an_unknown_address_is_kept():
    events = [_event(20034, 60, "0000:05:00.0", "sxid"), _event(79, 60, None)]
    events[0].update({"class": "reboot", "description": "NVSwitch fatal error"})
    out = xid.summarize(events, NOW, 7)
    assert sorted((d["kind"], d["address"]) for d in out) == [
        ("sxid", "0000:05:00.0"), ("xid", "unknown")]


def test_a_later_xid_162_ends_the_163_before_it_on_that_gpu_only():
    """NVSentinel's shipped cancellation (PR #1270): XID 162 (PSHC re-engaged) ends XID 163
    (PSHC disengaged) on the same GPU; a 163 after the 162, or on another GPU, stays."""
    other = "0000:02:00.0"
    out = xid.summarize([_event(163, 3600), _event(162, 600), _event(163, 3600, other),
                         _event(162, 7200, "0000:03:00.0"), _event(163, 60, "0000:03:00.0")],
                        NOW, 7)
    got = dict((d["address"], d) for d in out)
    code = dict((c["code"], c) for c in got["0000:01:00.0"]["codes"])[163]
    assert code["class"] == "none" and code["cancelled_by"] == {"code": 162, "at": NOW - 600}
    assert got["0000:01:00.0"]["worst"] == "none"
    assert got[other]["worst"] == "unknown" and "cancelled_by" not in got[other]["codes"][0]
    later = dict((c["code"], c) for c in got["0000:03:00.0"]["codes"])[163]
    assert later["class"] == "unknown" and "cancelled_by" not in later


def test_without_times_nothing_is_cancelled():
    out = xid.summarize([_event(163, None), _event(162, None)], NOW, 7)
    assert out[0]["worst"] == "unknown"
