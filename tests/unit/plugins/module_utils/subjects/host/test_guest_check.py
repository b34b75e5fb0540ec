"""subjects/host/guest_check.py: host_is_guest says, in the Audit column, that the host is a
guest."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import guest_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit


def _facts(kind, guest_flag, technology=None, evidence=()):
    return {"virt": {"kind": kind, "guest": guest_flag, "technology": technology,
                     "evidence": list(evidence)}}


def test_a_container_is_one_info_finding_naming_the_evidence():
    (item,) = guest_check.host_is_guest(
        _facts("container", True, "lxc", ["/proc/1/environ container=lxc"]), {})
    assert item["subject"] == "container"
    assert item["current"] == "a container (lxc; /proc/1/environ container=lxc)"
    assert "gpuhost_allow_guest" in item["remedy"]


def test_nodes_and_hosts_have_none():
    assert list(guest_check.host_is_guest(_facts("proxmox_node", False), {})) == []
    assert list(guest_check.host_is_guest(_facts("host", False), {})) == []
    assert list(guest_check.host_is_guest({}, {})) == []


def test_registered_in_the_audit_column_as_info():
    assert "host_is_guest" in audit.CHECK_OF and audit.CHECK_OF["host_is_guest"] == "audit"
    findings = audit.findings(_facts("vm", True, "qemu", ["/proc/cpuinfo flags: hypervisor"]))
    assert [(f["id"], f["severity"]) for f in findings] == [("host_is_guest", "info")]
