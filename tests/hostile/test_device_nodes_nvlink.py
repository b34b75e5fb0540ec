"""Hostile trees for the device-node and NVLink reads (issue 25 items 5 and 3): FIFOs where
the stored outputs, a container's groups or a unit should be, links out of the root, and
garbage outputs. The audit never hangs, never reads outside the root, and names what it
could not read."""

import os
import threading

from fixtures import devnodes as dn
from fixtures import hosts
from fixtures import lxc as lxcfix

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import nvlink

WANTED = hosts.common_wanted(host="pve-gpu01")


def _audit(root):
    """The audit in a thread: a FIFO read without O_NONBLOCK would hang it."""
    out = {}
    worker = threading.Thread(target=lambda: out.update(result=audit.audit(root, WANTED)))
    worker.daemon = True
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "audit hung"
    return out["result"]


def _onboot_129(seed):
    text = lxcfix.container_129_text("before").replace(
        "ostype: ubuntu\n", "onboot: 1\nostype: ubuntu\n", 1)
    lxcfix.write_config(seed, 129, text)


def test_a_fifo_as_the_stored_listing_is_named_not_read(seed):
    os.makedirs(os.path.join(seed, ".gpuhost-capture"))
    os.mkfifo(os.path.join(seed, ".gpuhost-capture", device_nodes.OUTPUT_NAME))
    result = _audit(seed)
    assert result["checks"]["device_nodes"]["status"] == "n/a"
    assert "stored output not read" in result["device_nodes"]["error"]


def test_fifos_as_a_containers_group_file_and_a_unit_are_skipped(seed, tmp_path):
    _onboot_129(seed)
    conf = lxcfix.container_130_text().replace("subvol-130", "subvol-131") + \
        "dev0: /dev/nvidia0,gid=44\n"
    lxcfix.write_config(seed, 131, conf)
    group = dn.write_rootfs_group(seed, 131, [("video", 44)])
    os.unlink(group)
    os.mkfifo(group)
    units = os.path.join(seed, "etc/systemd/system")
    os.makedirs(units)
    os.mkfifo(os.path.join(units, "nvidia-nodes.service"))
    dn.write_listing(seed, dn.clean_nodes(uvm=504))
    result = _audit(seed)
    ct = [c for c in result["device_nodes"]["containers"] if c["vmid"] == 131][0]
    assert "not a regular file" in ct["groups_note"]
    assert [f["id"] for f in result["findings"] if f["id"] == "lxc_dev_gid_unknown"] == []
    assert [f["id"] for f in result["findings"] if f["id"] == "device_nodes_unit_missing"]


def test_a_rootfs_and_a_unit_folder_linked_out_of_the_root_are_read_inside_it(seed, tmp_path):
    # decoys outside the tree that would clear the findings if they were followed there
    decoy = tmp_path / "outside"
    (decoy / "etc").mkdir(parents=True)
    (decoy / "etc/group").write_text("nvidiaish:x:993:\n")
    (decoy / "system").mkdir()
    (decoy / "system/nvidia-nodes.service").write_text(dn.unit_text())
    _onboot_129(seed)
    conf = lxcfix.container_130_text().replace(
        "rootfs: local-zfs:subvol-130-disk-0,size=16G",
        "rootfs: %s,size=16G" % decoy) + "dev0: /dev/nvidia0,gid=993\n"
    lxcfix.write_config(seed, 131, conf)
    os.makedirs(os.path.join(seed, "etc/systemd"))
    os.symlink(str(decoy / "system"), os.path.join(seed, "etc/systemd/system"))
    dn.write_listing(seed, dn.clean_nodes(uvm=504))
    result = _audit(seed)
    ct = [c for c in result["device_nodes"]["containers"] if c["vmid"] == 131][0]
    assert ct["groups_source"] is None            # the absolute rootfs resolved in the root
    assert result["device_nodes"]["units"] == []  # the link out of the root not followed
    assert [f for f in result["findings"] if f["id"] == "device_nodes_unit_missing"]


def test_garbage_listing_and_nvlink_outputs_give_no_finding_and_no_crash(seed):
    dn.write_listing(seed, "c 195:x /dev/nvidia0\nz 1:2 /dev/nvidia1\n\x00\xff junk\n" * 50)
    folder = os.path.join(seed, ".gpuhost-capture")
    for name in (nvlink.STATUS_NAME, nvlink.ERRORS_NAME):
        with open(os.path.join(folder, name), "w") as handle:
            handle.write("Link 0: 25 GB/s\nGPU x: ?\n\t Link 9999999999999999999: <inactive>\n")
    result = _audit(seed)
    assert not [f for f in result["findings"] if f["id"].startswith(("lxc_device", "nvlink"))]
    assert not [e for e in result["errors"] if e["section"] in ("device_nodes", "nvlink")]
    assert device_nodes.parse_listing("c 195:x /dev/nvidia0\n") == {}
