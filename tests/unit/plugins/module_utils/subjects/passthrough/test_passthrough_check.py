"""subjects/passthrough/passthrough_check.py: what a VM's or vGPU's GPU needs from the host (moved
from
test_passthrough.py): each broken variant of fixtures/passthrough.py's mixed host (real
qm configs, mapping and sysfs layouts, named there) gives exactly its finding."""

import pytest
from fixtures import hosts
from fixtures import passthrough as ptfix

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

from auditcase import judge


PT_IDS = set(i for ids, _b in ptfix.BROKEN.values() for i in ids)


def _mixed(tmp_path):
    root = str(tmp_path / "host")
    return root, ptfix.mixed_host(root)


def _pt_findings(root):
    result = audit.audit(root, hosts.common_wanted())
    return [f for f in result["findings"] if f["id"] in PT_IDS], result


def test_the_mixed_host_has_no_passthrough_finding(tmp_path):
    root, _built = _mixed(tmp_path)
    found, result = _pt_findings(root)
    assert found == []
    assert result["checks"]["passthrough"]["status"] == "ok"


@pytest.mark.parametrize("name", sorted(ptfix.BROKEN))
def test_each_broken_variant_gives_exactly_its_finding(name, tmp_path):
    root = str(tmp_path / "host")
    ptfix.broken_host(root, [name])
    found, _result = _pt_findings(root)
    assert found, name
    assert set(f["id"] for f in found) == set(ptfix.BROKEN[name][0]), found


def test_real_and_seed_hosts_have_no_passthrough_finding(tmp_path):
    for index, build in enumerate((hosts.seed_host, hosts.tuned_host, hosts.vm_host)):
        root = str(tmp_path / str(index))
        build(root)
        found, result = _pt_findings(root)
        assert found == [] and result["checks"]["passthrough"]["status"] == "n/a"


def test_the_vm_conflict_is_critical_and_names_both(audited):
    result = audited("passthrough.broken_host")
    (item,) = judge("gpu_vm_container_conflict", result)
    assert item["severity"] == "critical"
    assert judge("passthrough_iommu_off", result) == []


def test_iommu_off_is_critical(audited):
    (item,) = judge("passthrough_iommu_off", audited("passthrough.iommu_off_host"))
    assert item["severity"] == "critical"


def test_na_without_a_vm_passing_a_device(audited):
    assert judge("passthrough_not_vfio", audited("seed_host")) == (
        "no VM passes a PCI device through")
