"""subjects/nvlink/nvlink_check.py: nvlink_inactive and nvlink_errors (moved from test_nvlink.py),
on the
B200 nvidia-smi log and nvidia-smi nvlink -s / -e in NVIDIA's format (fixtures/nvlink.py)."""

from fixtures import hosts, nvhealth, pci
from fixtures import nvlink as nvl

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

from auditcase import judge

WANTED = hosts.common_wanted(host="pve-gpu04")
IDS = ("nvlink_inactive", "nvlink_errors")


def _b200_host(tmp_path, status=None, errors=None):
    root = str(tmp_path / "hgx")
    built = pci.seed_gpus(root, mrrs=4096)
    nvhealth.write_smi(root, nvhealth.smi_xml(nvhealth.B200_580, gpus=built["gpus"]))
    result = audit.audit(root, WANTED)
    gpus = nvl.gpus_of(result["nvidia_smi"])
    nvl.write(root, status(gpus) if status else None, errors(gpus) if errors else None)
    return root, built


def _mine(result):
    return [f for f in result["findings"] if f["id"] in IDS]


def test_a_clean_hgx_host_gives_none_and_runs_the_column(tmp_path):
    root, _built = _b200_host(
        tmp_path, lambda g: nvl.status_text(g, gbs="53.125"), nvl.errors_text)
    result = audit.audit(root, WANTED)
    assert result["nvlink"]["checked"] and result["nvlink"]["available"]
    assert len(result["nvlink"]["gpus"]) == 8 and result["nvlink"]["gpus"][0]["links"] == 18
    assert _mine(result) == []
    assert result["checks"]["nvlink"]["status"] == "ok"


def test_inactive_links_and_error_counters_are_named_by_gpu_address(tmp_path):
    root, built = _b200_host(
        tmp_path, lambda g: nvl.status_text(g, inactive={2: list(range(18)), 5: [3, 7]}),
        lambda g: nvl.errors_text(g, counts={(1, 4): {"CRC Errors": 891, "Replay Errors": 142},
                                             (6, 0): {"Recovery Errors": 3}}))
    found = dict(((f["id"], f["subject"]), f) for f in _mine(audit.audit(root, WANTED)))
    gpus = built["gpus"]
    every = found[("nvlink_inactive", gpus[2])]
    assert every["current"].startswith("all of 18 NVLinks inactive")
    assert every["severity"] == "high" and "XID 149" in every["remedy"]
    assert found[("nvlink_inactive", gpus[5])]["current"] == \
        "2 of 18 NVLinks inactive (link 3, 7)"
    crc = found[("nvlink_errors", gpus[1])]
    assert crc["severity"] == "medium"
    assert crc["current"] == "link 4: CRC Errors 891, Replay Errors 142"
    assert found[("nvlink_errors", gpus[6])]["severity"] == "high"
    assert len(found) == 4


def test_no_output_on_a_gpu_without_peers_is_no_nvlink_not_inactive(tmp_path):
    # the lent H200 (driver 580.159.04, no NVLink peer): both commands print nothing
    root, _built = _b200_host(tmp_path, lambda g: "", lambda g: "")
    result = audit.audit(root, WANTED)
    assert _mine(result) == []
    assert result["checks"]["nvlink"]["status"] == "n/a"
    assert "lists no link" in result["checks"]["nvlink"]["note"]


def test_na_on_a_pcie_only_host(audited):
    assert judge("nvlink_inactive", audited("seed_health_host")) == (
        "no NVSwitch, fabric state or NVLink GPU model (PCIe-only)")
