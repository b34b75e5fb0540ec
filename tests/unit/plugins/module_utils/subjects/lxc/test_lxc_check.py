"""subjects/lxc/lxc_check.py: lxc_stale_majors, lxc_gpu_majors_missing and lxc_onboot on the
containers'
configs (fixtures/lxc.py: Proxmox pct configs and /proc/devices of both driver eras)."""

from auditcase import judge


def test_stale_majors_of_container_129(audited):
    (item,) = judge("lxc_stale_majors", audited("seed_host"))
    assert (item["subject"], item["severity"]) == ("lxc 129", "high")
    assert item["current"] == "allows c 504:*, c 507:*, not registered in /proc/devices"
    assert "pct stop 129" in item["remedy"] and "pct start 129" in item["remedy"]
    assert item["detail"] == "stale majors: 504, 507"


def test_majors_missing_and_onboot_of_container_129(audited):
    (missing,) = judge("lxc_gpu_majors_missing", audited("seed_host"))
    assert missing["subject"] == "lxc 129" and missing["severity"] == "high"
    assert "nvidia-uvm" in missing["current"] and "nvidia-caps" in missing["current"]
    (onboot,) = judge("lxc_onboot", audited("seed_host"))
    assert (onboot["subject"], onboot["current"], onboot["severity"]) == (
        "lxc 129", "onboot: 0", "low")
    assert "pct set 129 --onboot 1" in onboot["remedy"]


def test_none_on_the_tuned_host(audited):
    facts = audited("tuned_host")
    for fid in ("lxc_stale_majors", "lxc_gpu_majors_missing", "lxc_onboot"):
        assert judge(fid, facts) == [], fid


def test_a_container_without_gpus_needs_no_onboot(audited):
    facts = audited("seed_host")
    for ct in facts["lxc"]:
        ct["gpu"] = False
    assert judge("lxc_onboot", facts) == []


def test_na_without_containers(audited):
    assert judge("lxc_onboot", audited("vm_host")) == "no containers in /etc/pve/lxc"
