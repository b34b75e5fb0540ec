"""subjects/host/virt.py: a Proxmox node, a physical host, a container or a VM guest, from the
files systemd-detect-virt reads (systemd src/basic/virt.c), under a root.

Formats: /proc/1/environ is NUL-separated NAME=value (proc(5)); LXC starts init with
container=lxc (lxc src/lxc/start.c), podman with container=podman; systemd inside a
container writes $container to /run/systemd/container; /run/host/container-manager is the
Container Interface file (systemd.io/CONTAINER_INTERFACE);
DMI strings as a Proxmox VE QEMU q35 guest reads them (sys_vendor "QEMU", product_name
"Standard PC (Q35 + ICH9, 2009)"), an i440fx guest ("Standard PC (i440FX + PIIX, 1996)"),
Hyper-V/Azure ("Microsoft Corporation", "Virtual Machine"), VMware ("VMware, Inc.",
"VMware Virtual Platform"); a physical Supermicro node ("Supermicro", "AS -8125GS-TNHR").
"""

import os

import pytest
from fixtures import hosts, procsys

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import virt


def _write(root, path, data):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


def _dmi(root, vendor, product):
    _write(root, "/sys/class/dmi/id/sys_vendor", vendor + "\n")
    _write(root, "/sys/class/dmi/id/product_name", product + "\n")


def test_seed_node_is_a_proxmox_node(tmp_path):
    root = hosts.seed_host(str(tmp_path))["root"]
    _dmi(root, "Supermicro", "AS -8125GS-TNHR")
    facts = virt.detect(root)
    assert (facts["kind"], facts["guest"], facts["proxmox_node"]) == ("proxmox_node", False, True)
    assert facts["technology"] is None


def test_vm_fixture_is_a_vm_guest_by_the_cpuinfo_flag(tmp_path):
    root = hosts.vm_host(str(tmp_path))["root"]
    facts = virt.detect(root)
    assert (facts["kind"], facts["guest"]) == ("vm", True)
    assert facts["evidence"] == ["/proc/cpuinfo flags: hypervisor"]


@pytest.mark.parametrize("vendor,product,technology", [
    ("QEMU", "Standard PC (Q35 + ICH9, 2009)", "qemu"),
    ("QEMU", "Standard PC (i440FX + PIIX, 1996)", "qemu"),
    ("Red Hat", "KVM", "kvm"),
    ("VMware, Inc.", "VMware Virtual Platform", "vmware"),
    ("Microsoft Corporation", "Virtual Machine", "microsoft"),
    ("innotek GmbH", "VirtualBox", "oracle"),
])
def test_dmi_names_the_hypervisor(tmp_path, vendor, product, technology):
    _dmi(tmp_path, vendor, product)
    facts = virt.detect(str(tmp_path))
    assert (facts["kind"], facts["technology"]) == ("vm", technology)
    assert facts["evidence"][0].startswith("/sys/class/dmi/id/")


def test_physical_dmi_without_pve_is_a_host(tmp_path):
    _dmi(tmp_path, "Supermicro", "AS -8125GS-TNHR")
    procsys.cpuinfo(str(tmp_path), threads=2)
    facts = virt.detect(str(tmp_path))
    assert (facts["kind"], facts["guest"], facts["technology"]) == ("host", False, None)
    assert "neither a container nor a VM guest" in virt.describe(facts)


def test_nested_proxmox_node_in_a_vm_is_a_node(tmp_path):
    _dmi(tmp_path, "QEMU", "Standard PC (Q35 + ICH9, 2009)")
    os.makedirs(os.path.join(str(tmp_path), "etc/pve/nodes"))
    facts = virt.detect(str(tmp_path))
    assert (facts["kind"], facts["guest"], facts["technology"]) == ("proxmox_node", False, "qemu")


@pytest.mark.parametrize("path,data,manager", [
    ("/proc/1/environ", b"PATH=/usr/bin\0container=lxc\0TERM=linux\0", "lxc"),
    ("/proc/1/environ", b"container=podman\0", "podman"),
    ("/run/systemd/container", "lxc\n", "lxc"),
    ("/run/host/container-manager", "podman\n", "podman"),
    ("/.dockerenv", "", "docker"),
])
def test_container_markers(tmp_path, path, data, manager):
    _write(tmp_path, path, data)
    # a container sees the node's /sys (DMI of the hardware) and its cpuinfo: still a guest
    _dmi(tmp_path, "Supermicro", "AS -8125GS-TNHR")
    facts = virt.detect(str(tmp_path))
    assert (facts["kind"], facts["guest"], facts["technology"]) == ("container", True, manager)
    assert manager in virt.describe(facts)


def test_container_on_a_node_is_still_a_container(tmp_path):
    """A container whose rootfs has an /etc/pve folder (a copy of a node's) is a container."""
    _write(tmp_path, "/proc/1/environ", b"container=lxc\0")
    os.makedirs(os.path.join(str(tmp_path), "etc/pve"))
    assert virt.detect(str(tmp_path))["kind"] == "container"


def test_empty_root_is_a_host(tmp_path):
    facts = virt.detect(str(tmp_path))
    assert (facts["kind"], facts["guest"], facts["evidence"], facts["dmi"]) == (
        "host", False, [], {})


def test_fifo_environ_is_refused_not_hung(tmp_path):
    os.makedirs(os.path.join(str(tmp_path), "proc/1"))
    os.mkfifo(os.path.join(str(tmp_path), "proc/1/environ"))
    with pytest.raises(hostfs.HostFileError):
        virt.detect(str(tmp_path))


def test_describe_names_kind_and_evidence():
    text = virt.describe({"kind": "vm", "technology": "qemu",
                          "evidence": ["/sys/class/dmi/id/sys_vendor: QEMU"]})
    assert text == "a virtual machine guest (qemu; /sys/class/dmi/id/sys_vendor: QEMU)"


def test_the_refusal_names_a_host_that_could_not_be_read_and_none_for_a_node():
    unread = {"kind": "unknown", "guest": None, "technology": None, "evidence": [],
              "error": "PermissionError: /proc/1/environ"}
    assert virt.refusal(unread, "gpu07", "/", "role tune") == (
        "gpu07 (/) is a host whose kind could not be read (PermissionError: /proc/1/environ): "
        "role tune changes nothing on it. Target the Proxmox VE node that hosts it (the "
        "example inventories hold the nodes only); to tune a GPU VM guest on purpose set "
        "gpuhost_allow_guest=true")
    assert virt.guest_warning(unread, "gpu07") is None
    node = {"kind": "proxmox_node", "guest": False}
    assert virt.refusal(node, "gpu07", "/", "host_tune") is None


def test_an_environ_the_kernel_refuses_even_to_root_tells_nothing(tmp_path, monkeypatch):
    """The lent GPU machine (Firecracker, 2026-12-05): reading /proc/1/environ as root gave
    PermissionError, which made the live audit's fact virt an error (finding audit_error);
    the hypervisor flag still says what the host is."""
    root = hosts.vm_host(str(tmp_path))["root"]
    refused = os.path.join(root, "proc/1/environ")
    os.makedirs(os.path.dirname(refused), exist_ok=True)
    with open(refused, "wb") as handle:
        handle.write(b"container=lxc\0")
    real = hostfs.read_bytes

    def read_bytes(path, *args, **kwargs):
        if path == refused:
            raise PermissionError(13, "Permission denied", path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(hostfs, "read_bytes", read_bytes)
    found = virt.detect(root)
    assert (found["kind"], found["technology"]) == ("vm", "unknown hypervisor")
