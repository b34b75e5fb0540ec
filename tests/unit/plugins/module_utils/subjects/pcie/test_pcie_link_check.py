"""subjects/pcie/pcie_link_check.py: pcie_link_degraded, a link slower or narrower than it can
be."""

from auditcase import judge


def test_fires_for_a_narrow_slow_link(audited):
    facts = audited("tuned_host")
    gpu = facts["gpus"][1]
    gpu["link"].update(width=8, speed_gts=16.0)
    (item,) = judge("pcie_link_degraded", facts)
    assert (item["subject"], item["current"], item["expected"], item["severity"]) == (
        gpu["address"], "x8 of x16, 16 of 32 GT/s", "x16 at 32 GT/s", "high")
    assert "reseat the card" in item["remedy"] and item["detail"] == "GPU"


def test_a_bridge_above_a_gpu_is_named_with_its_role(audited):
    facts = audited("tuned_host")
    port = facts["gpus"][0]["upstream"][0]
    port["link"]["width"] = 4
    (item,) = judge("pcie_link_degraded", facts)
    assert item["subject"] == port["address"]
    assert item["detail"] == "bridge above %s" % facts["gpus"][0]["address"]


def test_an_idle_nvidia_gpu_at_2_5_gts_is_low(audited):
    facts = audited("tuned_host")
    facts["gpus"][0]["link"]["speed_gts"] = 2.5
    (item,) = judge("pcie_link_degraded", facts)
    assert item["severity"] == "low" and item["current"] == "2.5 of 32 GT/s"
    assert "idle power state" in item["remedy"]


def test_does_not_fire_at_full_width_and_speed(audited):
    assert judge("pcie_link_degraded", audited("seed_host")) == []
    assert judge("pcie_link_degraded", audited("tuned_host")) == []


def test_na_without_a_gpu(audited):
    facts = audited("tuned_host")
    facts["gpus"] = []
    assert judge("pcie_link_degraded", facts) == "no NVIDIA GPU"
