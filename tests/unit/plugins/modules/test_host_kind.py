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


def test_a_proxmox_node_in_a_qemu_vm_is_a_node(tmp_path):
    # a nested lab node: QEMU's DMI strings, but /etc/pve is there
    _write(tmp_path, "/sys/class/dmi/id/sys_vendor", b"QEMU\n")
    _write(tmp_path, "/sys/class/dmi/id/product_name", b"Standard PC (Q35 + ICH9, 2009)\n")
    os.makedirs(os.path.join(str(tmp_path), "etc/pve"))
    result = run_module(host_kind, {"root": str(tmp_path)})
    assert result["virt"]["kind"] == "proxmox_node" and result["virt"]["guest"] is False


def test_a_qemu_guest_without_pve_is_a_vm(tmp_path):
    _write(tmp_path, "/sys/class/dmi/id/sys_vendor", b"QEMU\n")
    _write(tmp_path, "/sys/class/dmi/id/product_name", b"Standard PC (Q35 + ICH9, 2009)\n")
    result = run_module(host_kind, {"root": str(tmp_path)})
    assert result["virt"]["kind"] == "vm" and result["virt"]["guest"] is True


def test_a_root_that_is_not_a_folder_is_refused(tmp_path):
    _write(tmp_path, "/file", b"x")
    result = run_module(host_kind, {"root": str(tmp_path / "file")})
    assert result.get("failed") is True and "root" in result["msg"]
