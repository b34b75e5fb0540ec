"""subjects/device_nodes/device_nodes_check.py: the device nodes a GPU container binds at start
(moved from
test_devnodes.py): missing or stale nodes, the boot unit that makes them, /dev groups and
/dev/char links, on `ls -lan`-format listings of /dev (fixtures/devnodes.py)."""

import os

from fixtures import devnodes as dn
from fixtures import hosts
from fixtures import lxc as lxcfix

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

WANTED = hosts.common_wanted(host="pve-gpu01")
IDS = ("lxc_device_node_missing", "lxc_device_node_major", "lxc_dev_gid_unknown",
       "device_nodes_unit_missing", "lxc_dev_char_links_missing")


_host = dn.gpu_container_host


def _mine(result):
    return [f for f in result["findings"] if f["id"] in IDS]


def test_a_clean_host_with_the_unit_gives_none(tmp_path):
    result = audit.audit(_host(tmp_path), WANTED)
    assert _mine(result) == []
    assert result["checks"]["device_nodes"]["status"] == "ok"


def test_missing_uvm_is_named_with_its_container_and_the_boot_fix(tmp_path):
    result = audit.audit(_host(tmp_path, dn.clean_nodes(without=["/dev/nvidia-uvm"]),
                               unit=False), WANTED)
    found = dict(((f["id"], f["subject"]), f) for f in _mine(result))
    missing = found[("lxc_device_node_missing", "lxc 129 /dev/nvidia-uvm")]
    assert missing["severity"] == "high"
    assert "starts without it" in missing["detail"]           # optional bind
    assert "nvidia-modprobe -u -c=0" in missing["remedy"]
    assert "gpuhost_tune_device_nodes=true" in missing["remedy"]
    unit = found[("device_nodes_unit_missing", "pve-guests.service")]
    assert "/dev/nvidia-uvm" in unit["current"] and "129" in unit["current"]
    assert len(_mine(result)) == 2


def test_a_dev_entry_whose_node_is_missing_stops_the_start(tmp_path):
    conf = lxcfix.container_130_text() + "dev0: /dev/nvidia-uvm,mode=0666\ndev1: /dev/nvidia0\n"
    result = audit.audit(_host(tmp_path, dn.clean_nodes(without=["/dev/nvidia-uvm"]),
                               extra=[(131, conf)]), WANTED)
    found = [f for f in _mine(result) if f["subject"] == "lxc 131 /dev/nvidia-uvm"]
    assert [f["id"] for f in found] == ["lxc_device_node_missing"]
    assert "does not start" in found[0]["detail"]
    assert "dev0 binds /dev/nvidia-uvm" in found[0]["current"]


def test_no_unit_is_needed_when_no_gpu_container_starts_at_boot(tmp_path):
    result = audit.audit(_host(tmp_path, onboot=False, unit=False), WANTED)
    assert _mine(result) == []


def test_a_unit_not_enabled_or_not_before_pve_guests_does_not_count(tmp_path):
    root = _host(tmp_path, unit=False)
    dn.write_unit(root, "late.service", dn.unit_text(before=None))
    dn.write_unit(root, "off.service", enabled=False)
    result = audit.audit(root, WANTED)
    [unit] = [f for f in _mine(result) if f["id"] == "device_nodes_unit_missing"]
    assert "late.service" in unit["detail"] and "off.service" in unit["detail"]


def test_a_unit_that_makes_only_uvm_leaves_the_gpu_nodes_uncovered(tmp_path):
    root = _host(tmp_path, unit=False)
    dn.write_unit(root, text=dn.unit_text(execs=("/usr/bin/nvidia-modprobe -u -c=0",)))
    result = audit.audit(root, WANTED)
    [unit] = [f for f in _mine(result) if f["id"] == "device_nodes_unit_missing"]
    assert "/dev/nvidia-uvm" not in unit["current"]
    assert "/dev/nvidia0" in unit["current"] and "/dev/nvidiactl" in unit["current"]


def test_the_udev_recipe_counts_as_creating_the_nodes(tmp_path):
    root = _host(tmp_path, unit=False)
    rules = os.path.join(root, "etc/udev/rules.d")
    os.makedirs(rules)
    with open(os.path.join(rules, "70-nvidia.rules"), "w") as handle:
        handle.write(dn.UDEV_RULE)
    assert _mine(audit.audit(root, WANTED)) == []


def test_a_node_with_an_old_major_or_a_placeholder_file_is_named(tmp_path):
    listing = dn.clean_nodes(override={
        "/dev/nvidia-uvm": "c 504:0 /dev/nvidia-uvm",          # made before the reboot
        "/dev/nvidia-uvm-tools": "f - /dev/nvidia-uvm-tools"})  # an lxc create=file leftover
    result = audit.audit(_host(tmp_path, listing), WANTED)
    found = dict((f["subject"], f) for f in _mine(result))
    assert found["lxc 129 /dev/nvidia-uvm"]["id"] == "lxc_device_node_major"
    assert found["lxc 129 /dev/nvidia-uvm"]["current"] == "/dev/nvidia-uvm is 504:0"
    assert "509" in found["lxc 129 /dev/nvidia-uvm"]["expected"]
    assert "regular file" in found["lxc 129 /dev/nvidia-uvm-tools"]["current"]
    assert len(found) == 2


def test_dev_gid_against_the_containers_own_groups(tmp_path):
    conf = lxcfix.container_130_text().replace(
        "rootfs: local-zfs:subvol-130-disk-0,size=16G",
        "rootfs: local-zfs:subvol-131-disk-0,size=16G") + (
        "dev0: /dev/nvidia0,gid=44\ndev1: /dev/nvidiactl,gid=993\n")
    root = _host(tmp_path, extra=[(131, conf)])
    dn.write_rootfs_group(root, 131, [("root", 0), ("video", 44), ("render", 104)])
    result = audit.audit(root, WANTED)
    [gid] = [f for f in _mine(result) if f["id"] == "lxc_dev_gid_unknown"]
    assert gid["subject"] == "lxc 131 /dev/nvidiactl"
    assert "gid=993" in gid["current"] and "subvol-131-disk-0/etc/group" in gid["current"]
    assert result["checks"]["device_nodes"].get("note") in (None, "")


def test_dev_gid_unreadable_rootfs_is_a_note_not_a_finding(tmp_path):
    conf = lxcfix.container_130_text().replace(
        "rootfs: local-zfs:subvol-130-disk-0,size=16G",
        "rootfs: local-lvm:vm-131-disk-0,size=16G") + "dev0: /dev/nvidia0,gid=993\n"
    root = _host(tmp_path, extra=[(131, conf)])
    result = audit.audit(root, WANTED)
    assert [f for f in _mine(result) if f["id"] == "lxc_dev_gid_unknown"] == []
    fact = [ct for ct in result["device_nodes"]["containers"] if ct["vmid"] == 131][0]
    assert fact["groups_note"] and "local-lvm" in fact["groups_note"]
    assert "lxc 131: gid= not checked" in str(result["checks"]["device_nodes"])


def test_stale_majors_never_fire_on_dev_entries(tmp_path):
    conf = lxcfix.container_130_text() + "dev0: /dev/nvidia-uvm\ndev1: /dev/nvidia0\n"
    root = _host(tmp_path, extra=[(131, conf)])
    lxcfix.proc_devices(root, "after", without=("nvidia-uvm",))
    result = audit.audit(root, WANTED)
    assert not [f for f in result["findings"] if f["id"] == "lxc_stale_majors"
                and f["subject"] == "lxc 131"]
    ct = [c for c in result["lxc"] if c["vmid"] == 131][0]
    assert ct["gpu"] and ct["stale_majors"] == []


def test_nesting_container_without_dev_char_links(tmp_path):
    result = audit.audit(_host(tmp_path, dn.clean_nodes(char_links=False)), WANTED)
    [links] = _mine(result)
    assert links["id"] == "lxc_dev_char_links_missing" and links["subject"] == "lxc 129"
    assert "/dev/char/509:0 (/dev/nvidia-uvm)" in links["current"]
    assert "create-dev-char-symlinks" in links["remedy"]


def test_a_dev_char_link_to_another_node_is_not_ok(tmp_path):
    listing = dn.clean_nodes().replace("l ../nvidia1 /dev/char/195:1",
                                       "l ../nvidia0 /dev/char/195:1")
    [links] = _mine(audit.audit(_host(tmp_path, listing), WANTED))
    assert links["current"].endswith("/dev/char/195:1 (/dev/nvidia1)")


def test_without_a_listing_the_column_is_not_applicable(tmp_path):
    result = audit.audit(_host(tmp_path, listing=False, unit=False), WANTED)
    assert _mine(result) == []
    assert result["checks"]["device_nodes"]["status"] == "n/a"
    assert "dev-nodes" in result["checks"]["device_nodes"]["note"]
