"""audit_passthrough: the passthrough subject's declaration: a host without VMs has no
passthrough devices; the containers it compares with are the placement's, read before."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import (
    audit_passthrough,
)


def test_a_host_without_vms_gives_none(tmp_path):
    hosts.seed_host(tmp_path)
    known = {"placement_read": {"containers": [{"vmid": 129, "gpus": []}]}}
    got, errors = declared_facts(audit_passthrough, tmp_path, known=known)
    assert errors == [] and got["passthrough"]["vms"] == []
    assert got["passthrough"]["conflicts"] == []


def test_it_reads_after_the_placement():
    order = [f.order for f in audit_passthrough.FACTS]
    assert order == [180] and order[0] > 175  # placement_read, audit_placement.py
