"""subjects/pcie/p2p_check.py: p2p_iommu_translated, p2p_acs_redirect and gpu_bar1_small on the
facts of
module_utils/subjects/pcie/p2p.py (fixtures/health.py: ACS in the config-space bytes, IOMMU
groups, BAR1)."""

from auditcase import judge


def test_two_gpus_behind_a_switch_with_acs_redirect(audited):
    facts = audited("health.switch_host")
    found = judge("p2p_acs_redirect", facts)
    assert sorted((f["subject"], f["severity"]) for f in found) == [
        ("0000:02:00.0", "high"), ("0000:02:01.0", "high")]
    (iommu,) = judge("p2p_iommu_translated", facts)
    assert (iommu["subject"], iommu["severity"]) == ("iommu", "high")


def test_acs_redirect_is_medium_without_a_translating_iommu(audited):
    facts = audited("health.switch_host")
    for gpu in facts["p2p"]["gpus"]:
        gpu.update(translated=False, iommu_type="identity")
    assert sorted(f["severity"] for f in judge("p2p_acs_redirect", facts)) == [
        "medium", "medium"]
    assert judge("p2p_iommu_translated", facts) == []


def test_a_256_mib_bar1_is_small(audited):
    found = judge("gpu_bar1_small", audited("health.switch_host"))
    assert [(f["subject"], f["severity"]) for f in found] == [("0000:04:00.0", "medium")]


def test_none_on_the_tuned_host_and_na_with_one_gpu(audited):
    facts = audited("tuned_host")
    for fid in ("p2p_iommu_translated", "p2p_acs_redirect", "gpu_bar1_small"):
        assert judge(fid, facts) == [], fid
    assert judge("gpu_bar1_small", audited("vm_host")) == (
        "one GPU on the nvidia driver: no peer-to-peer")
