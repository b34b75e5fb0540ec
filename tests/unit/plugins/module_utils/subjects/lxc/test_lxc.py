"""Proxmox container config parser: every byte it does not change is kept (the writers:
test_lxc_write.py)."""

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from fixtures import lxc as lxcfix

AFTER = procfs.char_majors(text=lxcfix.proc_devices_text("after"))
BEFORE = procfs.char_majors(text=lxcfix.proc_devices_text("before"))


def conf129(era="before"):
    return lxc.LxcConfig.parse(lxcfix.container_129_text(era))


def test_round_trip_is_byte_identical():
    for text in (lxcfix.container_129_text(), lxcfix.container_130_text(),
                 "arch: amd64\r\nswap: 0\r\n", "arch: amd64\nswap: 0", "", "\n\n",
                 "#caf\xe9 \udcff\narch: amd64\n"):
        assert lxc.LxcConfig.parse(text).render() == text
    raw = "#bytes \xff\xfe\narch: amd64\n".encode("latin-1")
    assert lxc.LxcConfig.parse(raw).render_bytes() == raw


def test_live_section_rules_sections_and_onboot():
    conf = conf129()
    assert conf.sections() == ["pve:pending", "pre-tuning"]
    assert not conf.onboot
    assert lxc.LxcConfig.parse(lxcfix.container_130_text()).onboot
    rules = conf.allow_rules()
    assert [r["value"] for r in rules] == lxcfix.RULES_BEFORE
    assert rules[1]["type"] == "c" and rules[1]["major"] == 504 and rules[1]["minor"] == "*"
    assert rules[1]["access"] == "rwm"
    # the snapshot and pending sections have their own rules, not mixed into the live ones
    assert len(conf.allow_rules("pre-tuning")) == 4
    assert [r["value"] for r in conf.allow_rules("pve:pending")] == ["c 504:* rwm"]
    assert conf.get("memory") == "786432"
    assert conf.get("memory", section="pve:pending") == "819200"
    assert conf.description[0] == "SGLang serving GLM-5-NVFP4 (tensor parallel 8)"


def test_mount_and_dev_entries():
    conf = conf129()
    mounts = conf.mount_entries()
    assert len(mounts) == 13
    assert mounts[0]["source"] == "/dev/nvidia0" and mounts[0]["target"] == "dev/nvidia0"
    assert mounts[0]["options"] == "bind,optional,create=file"
    dev = lxc.LxcConfig.parse("dev0: /dev/nvidia-uvm,mode=0666\n"
                              "dev1: path=/dev/nvidia0,gid=44,mode=0660\n")
    entries = dev.dev_entries()
    assert entries[0]["path"] == "/dev/nvidia-uvm" and entries[0]["options"] == {"mode": "0666"}
    assert entries[1]["path"] == "/dev/nvidia0" and entries[1]["options"]["gid"] == "44"


@pytest.mark.parametrize("value,expected", [
    ("c 195:* rwm", ("c", 195, "*", "rwm")),
    ("c  509:0   rw", ("c", 509, 0, "rw")),
    ("b 7:* rwm", ("b", 7, "*", "rwm")),
    ("c *:* m", ("c", "*", "*", "m")),
    ("a", ("a", "*", "*", "rwm")),
])
def test_parse_rule(value, expected):
    rule = lxc.parse_rule(value)
    assert (rule["type"], rule["major"], rule["minor"], rule["access"]) == expected


def test_equals_form_and_cgroup_v1_keys():
    conf = lxc.LxcConfig.parse("arch: amd64\nlxc.cgroup2.devices.allow = c 504:* rwm\n"
                               "lxc.cgroup.devices.allow: c 507:* rwm\n")
    assert [r["major"] for r in conf.allow_rules()] == [504]
    assert [r["major"] for r in conf.allow_rules(include_v1=True)] == [504, 507]


def test_stale_majors_any_name_counts():
    assert lxc.stale_majors(conf129(), AFTER) == [504, 507]
    assert lxc.stale_majors(conf129(), BEFORE) == []
    assert lxc.stale_majors(conf129(), {509, 195, 226}) == [504, 507]


def test_no_allow_lines_appends_at_end_of_live_section():
    text = "arch: amd64\nswap: 0\n\n[snap1]\narch: amd64\nsnaptime: 1\n"
    conf = lxc.LxcConfig.parse(text)
    new = conf.plan(["c 509:* rwm"]).new_text()
    assert new == ("arch: amd64\nswap: 0\nlxc.cgroup2.devices.allow: c 509:* rwm\n"
                   "\n[snap1]\narch: amd64\nsnaptime: 1\n")


def test_no_final_newline_and_crlf_are_kept():
    conf = lxc.LxcConfig.parse("arch: amd64\nlxc.cgroup2.devices.allow: c 504:* rwm")
    new = conf.plan(["c 509:* rwm"], [504]).new_text()
    assert new == "arch: amd64\nlxc.cgroup2.devices.allow: c 509:* rwm"
    conf = lxc.LxcConfig.parse("arch: amd64\r\nswap: 0\r\n")
    assert conf.plan(["c 509:* rwm"]).new_text() == (
        "arch: amd64\r\nswap: 0\r\nlxc.cgroup2.devices.allow: c 509:* rwm\r\n")
    conf = lxc.LxcConfig.parse("arch: amd64")
    assert conf.plan(["c 1:* r"]).new_text() == "arch: amd64\nlxc.cgroup2.devices.allow: c 1:* r"


def test_all_allow_lines_stale_new_ones_take_their_place():
    text = ("arch: amd64\nlxc.cgroup2.devices.allow: c 504:* rwm\n"
            "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
    new = lxc.LxcConfig.parse(text).plan(["c 509:* rwm"], [504]).new_text()
    assert new == text.replace("504", "509", 1)


def test_narrower_access_is_not_enough_wider_is():
    conf = lxc.LxcConfig.parse("lxc.cgroup2.devices.allow: c 509:* rw\n")
    assert conf.plan(["c 509:* rwm"]).add == ["c 509:* rwm"]
    assert conf.plan(["c 509:* r"]).add == []
    # a minor-specific rule does not cover the whole major
    conf = lxc.LxcConfig.parse("lxc.cgroup2.devices.allow: c 509:0 rwm\n")
    assert conf.plan(["c 509:* rwm"]).add == ["c 509:* rwm"]


def test_list_configs(tmp_path):
    lxcfix.seed_host(tmp_path)
    (tmp_path / "etc/pve/lxc/.129.conf.tmp.123").write_text("x")
    (tmp_path / "etc/pve/lxc/129.conf.bak").write_text("x")
    found = lxc.list_configs(str(tmp_path))
    assert [vmid for vmid, _path in found] == [129, 130]
    assert found[0][1].endswith("/etc/pve/lxc/129.conf")
    assert lxc.list_configs(str(tmp_path / "none")) == []
