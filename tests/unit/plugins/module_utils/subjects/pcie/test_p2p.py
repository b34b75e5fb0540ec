"""Peer-to-peer readiness: IOMMU domain types, ACS on the bridges between GPUs (from the
config-space bytes), BAR1 size, command line."""

from fixtures import health, hosts, pci

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import p2p

DSPS = ("0000:02:00.0", "0000:02:01.0")


def _findings(facts, memory_bytes=None):
    """Every P2P finding with its id, as the check registry labels them."""
    return ([dict(f, id="p2p_iommu_translated") for f in p2p.iommu_findings(facts)]
            + [dict(f, id="p2p_acs_redirect") for f in p2p.acs_findings(facts)]
            + [dict(f, id="gpu_bar1_small") for f in p2p.bar1_findings(facts, memory_bytes)])


def _ids(found):
    return sorted((f["id"], f["subject"], f["severity"]) for f in found)


def test_switch_ports_with_redirect_are_found_and_remedy_names_both(tmp_path):
    pci.switch_gpus(tmp_path)
    for port in DSPS:
        health.set_acs(tmp_path, port, 0x001D, 0x007F)
    # ACS on the root port and the switch's upstream port does not change the route
    health.set_acs(tmp_path, "0000:00:01.1", 0x001D)
    health.set_acs(tmp_path, "0000:01:00.0", 0x001D)
    facts = p2p.collect(str(tmp_path))
    assert facts["gpu_count"] == 2
    assert [b["address"] for b in facts["bridges"]] == list(DSPS)
    assert facts["bridges"][0]["turns_at"] == ["0000:01:00.0"]
    found = _findings(facts)
    assert _ids(found) == [("p2p_acs_redirect", DSPS[0], "medium"),
                           ("p2p_acs_redirect", DSPS[1], "medium")]
    assert "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0" in found[0]["remedy"]
    assert "IOMMU groups merge" in found[0]["remedy"]
    assert found[0]["current"] == "ACSCtl 0x001d (SrcValid ReqRedir CmpltRedir UpstreamFwd)"


def test_switch_redirect_with_translating_iommu_is_high(tmp_path):
    built = pci.switch_gpus(tmp_path)
    for port in DSPS:
        health.set_acs(tmp_path, port, 0x000C)
    health.iommu_groups(tmp_path, built["gpus"], "DMA")
    found = _findings(p2p.collect(str(tmp_path)))
    assert _ids(found) == [("p2p_acs_redirect", DSPS[0], "high"),
                           ("p2p_acs_redirect", DSPS[1], "high"),
                           ("p2p_iommu_translated", "iommu", "high")]


def test_switch_without_acs_control_is_clean(tmp_path):
    pci.switch_gpus(tmp_path)
    facts = p2p.collect(str(tmp_path))
    assert facts["bridges"][0]["acs"]["control"] == "0x0000"
    assert _findings(facts) == []


def test_health_host_translated_iommu_but_root_port_acs_is_no_finding(tmp_path):
    health.gpu_host(tmp_path)
    facts = p2p.collect(str(tmp_path))
    # every root port sits between GPUs; peer traffic crosses the root complex anyway
    assert len(facts["bridges"]) == 8
    assert all(b["turns_at"] == ["root complex"] and b["acs"]["p2p_redirect"]
               for b in facts["bridges"])
    found = _findings(facts)
    assert _ids(found) == [("p2p_iommu_translated", "iommu", "high")]
    assert "8 of 8 GPUs" in found[0]["current"] and "DMA-FQ" in found[0]["current"]
    assert "iommu=pt" in found[0]["remedy"] and "Trade-off" in found[0]["remedy"]


def test_identity_groups_and_no_groups_are_not_translated(tmp_path):
    built = pci.seed_gpus(tmp_path)
    facts = p2p.collect(str(tmp_path))
    assert facts["iommu_groups"] is False
    assert all(g["translated"] is None for g in facts["gpus"])
    health.iommu_groups(tmp_path, built["gpus"], "identity")
    health.cmdline(tmp_path, "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt amd_iommu=on")
    facts = p2p.collect(str(tmp_path))
    assert facts["cmdline"] == {"iommu": "pt", "amd_iommu": "on"}
    assert all(g["translated"] is False for g in facts["gpus"])
    assert _findings(facts) == []


def test_small_bar1(tmp_path):
    built = pci.seed_gpus(tmp_path)
    for index, gpu in enumerate(built["gpus"]):
        health.gpu_resource(tmp_path, gpu, (256 << 20) if index == 2 else (128 << 30), index)
    facts = p2p.collect(str(tmp_path))
    assert facts["gpus"][0]["bar1_bytes"] == 128 << 30
    found = _findings(facts)
    assert _ids(found) == [("gpu_bar1_small", built["gpus"][2], "medium")]
    assert found[0]["current"] == "BAR1 256 MiB"
    # with the memory size known, a BAR1 smaller than the memory counts
    memory = dict((g, 96 << 30) for g in built["gpus"])
    memory[built["gpus"][0]] = 192 << 30
    found = _findings(facts, memory)
    assert _ids(found) == [("gpu_bar1_small", built["gpus"][0], "medium"),
                           ("gpu_bar1_small", built["gpus"][2], "medium")]
    assert "192 GiB" in found[0]["expected"]


def test_one_gpu_is_not_applicable(tmp_path):
    hosts.vm_host(tmp_path)
    facts = p2p.collect(str(tmp_path))
    assert facts["gpu_count"] == 1 and facts["bridges"] == []
    assert p2p.applies(facts) == "one GPU on the nvidia driver: no peer-to-peer"
    assert _findings(facts) == []


def test_gpus_on_vfio_do_not_count(tmp_path):
    built = pci.switch_gpus(tmp_path)
    link = tmp_path / "sys/bus/pci/devices" / built["gpus"][1]
    drv = link.resolve() / "driver"
    drv.unlink()
    (tmp_path / "sys/bus/pci/drivers/vfio-pci").mkdir(parents=True)
    drv.symlink_to(tmp_path / "sys/bus/pci/drivers/vfio-pci")
    assert p2p.collect(str(tmp_path))["gpu_count"] == 1


def test_cmdline_iommu_keeps_only_acs_pci_options():
    assert p2p.cmdline_iommu("quiet pci=noaer intel_iommu=on iommu.strict=0") == {
        "intel_iommu": "on", "iommu.strict": "0"}
    assert p2p.cmdline_iommu("pci=disable_acs_redir=0000:02:00.0") == {
        "pci": "disable_acs_redir=0000:02:00.0"}
