"""audit_device_nodes: the device_nodes subject's declaration: the nodes container 129 of
the seed host binds, not listed (a tree is not the live host and holds no stored listing),
and the default when its reader fails."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    audit_device_nodes,
)


def test_the_seed_hosts_bound_nodes_without_a_listing(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_device_nodes, tmp_path, known={"char_majors": {}})
    nodes = got["device_nodes"]
    assert errors == [] and nodes["available"] is False and "not run" in nodes["error"]
    assert [c["vmid"] for c in nodes["containers"]] == [129]
    assert "/dev/nvidia0" in [n["path"] for n in nodes["containers"][0]["nodes"]]


def test_a_failing_reader_leaves_the_documented_default(tmp_path, monkeypatch):
    def broken(*_args):
        raise OSError("reader bug")

    monkeypatch.setattr(audit_device_nodes.device_nodes, "collect", broken)
    got, errors = declared_facts(audit_device_nodes, tmp_path)
    assert errors == [{"section": "device_nodes", "error": "OSError: reader bug"}]
    assert got["device_nodes"] == {"available": False, "error": "not read", "containers": [],
                                   "units": []}
