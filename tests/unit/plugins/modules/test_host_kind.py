"""host_kind: the preflight's reading of what the host is, from the audit's own reader."""

import os

from ansible_collections.gpuhost.tuning.plugins.modules import host_kind
from modrun import run_module


def _write(root, path, data):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as handle:
        handle.write(data)


def test_an_lxc_container_is_a_guest(tmp_path):
    # /proc/1/environ as LXC starts init: NUL-separated NAME=value
    _write(tmp_path, "/proc/1/environ", b"container=lxc\0TERM=linux\0")
    result = run_module(host_kind, {"root": str(tmp_path)})
    assert result["changed"] is False
    assert result["virt"]["kind"] == "container" and result["virt"]["guest"] is True
    assert result["virt"]["technology"] == "lxc"
    assert result["refusal"] == (
        "the host (%s) is a container (lxc: /proc/1/environ container=lxc): this role changes "
        "nothing on it. Target the Proxmox VE node that hosts it (the example inventories "
        "hold the nodes only); to tune a GPU VM guest on purpose set gpuhost_allow_guest=true"
        % tmp_path)
    named = run_module(host_kind, {"root": str(tmp_path), "host": "pve-ct129",
                                   "changer": "role tune"})
    assert named["refusal"].startswith("pve-ct129 (%s) is a container" % tmp_path)
    assert ": role tune changes nothing on it." in named["refusal"]
    assert named["warning"] == ("pve-ct129 is a container guest (/proc/1/environ "
                                "container=lxc); changed because gpuhost_allow_guest is true")


def test_a_proxmox_node_in_a_qemu_vm_is_a_node(tmp_path):
    # a nested lab node: QEMU's DMI strings, but /etc/pve is there
    _write(tmp_path, "/sys/class/dmi/id/sys_vendor", b"QEMU\n")
    _write(tmp_path, "/sys/class/dmi/id/product_name", b"Standard PC (Q35 + ICH9, 2009)\n")
    os.makedirs(os.path.join(str(tmp_path), "etc/pve"))
    result = run_module(host_kind, {"root": str(tmp_path)})
    assert result["virt"]["kind"] == "proxmox_node" and result["virt"]["guest"] is False
    assert result["refusal"] is None and result["warning"] is None


def test_a_qemu_guest_without_pve_is_a_vm(tmp_path):
    _write(tmp_path, "/sys/class/dmi/id/sys_vendor", b"QEMU\n")
    _write(tmp_path, "/sys/class/dmi/id/product_name", b"Standard PC (Q35 + ICH9, 2009)\n")
    result = run_module(host_kind, {"root": str(tmp_path)})
    assert result["virt"]["kind"] == "vm" and result["virt"]["guest"] is True
    assert " is a virtual machine guest (" in result["refusal"]
    assert "and not a Proxmox VE node (no /etc/pve): this role" in result["refusal"]


def test_a_root_that_is_not_a_folder_is_refused(tmp_path):
    _write(tmp_path, "/file", b"x")
    result = run_module(host_kind, {"root": str(tmp_path / "file")})
    assert result.get("failed") is True and "root" in result["msg"]
