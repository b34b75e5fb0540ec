"""lxc_write: the device-rule sync of a container config (the seed fix, stale majors of
any name, access that covers, byte-exact edits, CRLF and no final newline kept) and the
live-section edits the pinning part writes with, on the configs and ``/proc/devices`` of
tests/fixtures/lxc.py (moved from test_lxc.py and test_placement.py, which keep the
readers)."""

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc_write
from fixtures import lxc as lxcfix

DRIVERS = ["nvidia", "nvidia-uvm", "nvidia-caps"]
AFTER = procfs.char_majors(text=lxcfix.proc_devices_text("after"))


def conf129(era="before"):
    return lxc.LxcConfig.parse(lxcfix.container_129_text(era))


def test_sync_plans_the_seed_fix():
    sync = lxc_write.sync_device_rules(conf129(), AFTER, DRIVERS)
    assert sync["majors"] == {"nvidia": 195, "nvidia-uvm": 509, "nvidia-caps": 238}
    assert sync["added"] == ["c 509:* rwm", "c 238:* rwm"]
    assert sync["removed"] == ["c 504:* rwm", "c 507:* rwm"]
    assert sync["other_allowed"] == [{"rule": "c 226:* rwm", "major": 226,
                                      "registered_as": ["drm"]}]
    new = sync["plan"].new_text()
    new_lines = new.splitlines()
    # the new rules sit right after the last kept allow line, before the mounts
    at = new_lines.index("lxc.cgroup2.devices.allow: c 226:* rwm")
    assert new_lines[at + 1:at + 3] == ["lxc.cgroup2.devices.allow: c 509:* rwm",
                                        "lxc.cgroup2.devices.allow: c 238:* rwm"]
    assert new_lines[at + 3].startswith("lxc.mount.entry: /dev/nvidia0 ")
    # every other live line kept, in the same order
    old_live = lxcfix.container_129_text().split("\n[pve:pending]", 1)[0].split("\n")
    new_live = new.split("\n[pve:pending]", 1)[0].split("\n")
    gone = ["lxc.cgroup2.devices.allow: c 504:* rwm", "lxc.cgroup2.devices.allow: c 507:* rwm"]
    came = ["lxc.cgroup2.devices.allow: c 509:* rwm", "lxc.cgroup2.devices.allow: c 238:* rwm"]
    assert [ln for ln in old_live if ln not in gone] == [ln for ln in new_live if ln not in came]
    # snapshot and pending sections byte for byte (they still hold 504)
    tail_old = lxcfix.container_129_text().split("\n[pve:pending]", 1)[1]
    assert new.split("\n[pve:pending]", 1)[1] == tail_old
    again = lxc_write.sync_device_rules(lxc.LxcConfig.parse(new), AFTER, DRIVERS)
    assert not again["plan"].changed


def test_seed_literal_reading_caps_under_two_majors():
    twice = procfs.char_majors(text=lxcfix.proc_devices_text("after", caps_twice=True))
    sync = lxc_write.sync_device_rules(conf129(), twice, DRIVERS)
    assert sync["majors_all"]["nvidia-caps"] == [237, 238]
    assert sync["added"] == ["c 509:* rwm", "c 237:* rwm", "c 238:* rwm"]


def test_missing_driver_fails_naming_the_command():
    without = procfs.char_majors(text=lxcfix.proc_devices_text("after", without=("nvidia-uvm",)))
    with pytest.raises(lxc.LxcError) as info:
        lxc_write.sync_device_rules(conf129(), without, DRIVERS)
    msg = str(info.value)
    assert "nvidia-uvm not registered in /proc/devices" in msg
    assert "nvidia-modprobe -u -c=0" in msg and "modprobe nvidia_uvm" in msg
    skipped = lxc_write.sync_device_rules(conf129(), without, DRIVERS, missing="skip")
    assert skipped["missing"] == ["nvidia-uvm"]
    assert skipped["added"] == ["c 238:* rwm"]


def test_nvidia_195_is_never_stale_even_if_not_registered():
    bare = {"mem": [1], "drm": [226], "nvidia-uvm": [509], "nvidia-caps": [238]}
    sync = lxc_write.sync_device_rules(conf129(), bare, DRIVERS)
    assert "c 195:* rwm" not in sync["removed"]
    assert sync["majors"]["nvidia"] == 195


def test_bad_access_and_bad_rules_are_errors():
    with pytest.raises(lxc.LxcError, match="access"):
        lxc_write.sync_device_rules(conf129(), AFTER, DRIVERS, access="rwx")
    with pytest.raises(lxc.LxcError, match="not a device rule"):
        conf129().plan(["x 1:2 r"])


def test_stale_rule_in_equals_form_is_removed_byte_exactly():
    text = ("arch: amd64\nlxc.cgroup2.devices.allow = c 504:* rwm\n"
            "lxc.cgroup2.devices.allow: c 195:* rwm\nswap: 0\n")
    sync = lxc_write.sync_device_rules(lxc.LxcConfig.parse(text), AFTER, DRIVERS)
    assert sync["removed"] == ["c 504:* rwm"]
    assert sync["plan"].new_text() == (
        "arch: amd64\nlxc.cgroup2.devices.allow: c 195:* rwm\n"
        "lxc.cgroup2.devices.allow: c 509:* rwm\nlxc.cgroup2.devices.allow: c 238:* rwm\n"
        "swap: 0\n")


# --- the live-section edit ------------------------------------------------------------


def _set(text, values):
    return lxc_write.with_live_values(lxc.LxcConfig.parse(text), values).render()


def test_with_live_values_adds_after_the_last_lxc_line_and_keeps_sections():
    text = lxcfix.container_129_text("after")
    out = _set(text, [("lxc.cgroup2.cpuset.cpus", "32-63,96-127"),
                      ("lxc.cgroup2.cpuset.mems", "1")])
    live, rest = text.split("\n\n", 1)
    new_live, new_rest = out.split("\n\n", 1)
    assert new_rest == rest  # pending and snapshot sections byte for byte
    assert new_live == live + ("\nlxc.cgroup2.cpuset.cpus: 32-63,96-127"
                               "\nlxc.cgroup2.cpuset.mems: 1")
    # idempotent: the same values again change nothing
    assert _set(out, [("lxc.cgroup2.cpuset.cpus", "32-63,96-127"),
                      ("lxc.cgroup2.cpuset.mems", "1")]) == out


def test_with_live_values_replaces_in_place_keeping_form_and_crlf():
    text = ("arch: amd64\r\nlxc.cgroup2.cpuset.cpus = 0-3\r\ncores: 4\r\n"
            "lxc.cgroup2.cpuset.cpus: 0-7\r\n[snap]\r\nlxc.cgroup2.cpuset.cpus: 0-1\r\n")
    out = _set(text, [("lxc.cgroup2.cpuset.cpus", "8-15")])
    assert out == ("arch: amd64\r\ncores: 4\r\nlxc.cgroup2.cpuset.cpus: 8-15\r\n[snap]\r\n"
                   "lxc.cgroup2.cpuset.cpus: 0-1\r\n")
    assert _set("a: 1\nlxc.cgroup2.cpuset.cpus = 0-3", [("lxc.cgroup2.cpuset.cpus", "4")]) \
        == "a: 1\nlxc.cgroup2.cpuset.cpus = 4"


def test_with_live_values_without_final_newline_and_removal():
    out = _set("arch: amd64\ncores: 4", [("lxc.cgroup2.cpuset.mems", "1")])
    assert out == "arch: amd64\ncores: 4\nlxc.cgroup2.cpuset.mems: 1"
    assert _set(out, [("lxc.cgroup2.cpuset.mems", None)]) == "arch: amd64\ncores: 4"


def test_with_live_lines_puts_back_exact_lines_crlf_and_no_final_newline():
    def put(text, key, raws):
        return lxc_write.with_live_lines(lxc.LxcConfig.parse(text), key, raws).render()

    key = "lxc.cgroup2.cpuset.cpus"
    text = "arch: amd64\r\nlxc.cgroup2.cpuset.cpus: 8-15\r\ncores: 4\r\n[snap]\r\n" \
           "lxc.cgroup2.cpuset.cpus: 0-1\r\n"
    back = put(text, key, ["lxc.cgroup2.cpuset.cpus =  0-3  "])
    assert back == text.replace("lxc.cgroup2.cpuset.cpus: 8-15",
                                "lxc.cgroup2.cpuset.cpus =  0-3  ", 1)
    assert put(back, key, ["lxc.cgroup2.cpuset.cpus: 8-15"]) == text
    assert put("a: 1\nlxc.x: 2\nlxc.cgroup2.cpuset.cpus: 4", key, []) == "a: 1\nlxc.x: 2"
    assert put("a: 1\nlxc.x: 2", key, ["lxc.cgroup2.cpuset.cpus: 4"]) \
        == "a: 1\nlxc.x: 2\nlxc.cgroup2.cpuset.cpus: 4"
    with pytest.raises(lxc.LxcError):
        put("a: 1\n", key, ["lxc.cgroup2.cpuset.mems: 1"])
