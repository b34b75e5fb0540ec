"""subjects/health/gpu_memory_check.py: row remapping, retired pages and ECC from nvidia-smi -q -x
(real
logs in tests/fixtures/nvidia, which name their source)."""

from fixtures import nvhealth as health

from auditcase import health_findings, ids, judge

COLUMNS = ("gpu_memory",)


def audit_health(root):
    return health_findings(root, COLUMNS)


def test_memory_error_findings_each(tmp_path):
    gpus = ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"]
    xml_text = health.smi_xml(health.B200_580, gpus=gpus, edits={
        gpus[0]: {"remapped_rows/remapped_row_pending": "Yes"},
        gpus[1]: {"remapped_rows/remapped_row_failure": "Yes"},
        gpus[2]: {"ecc_errors/aggregate/dram_uncorrectable": "3"},
        gpus[3]: {"ecc_mode/pending_ecc": "Disabled"},
    })
    health.write_smi(tmp_path, xml_text)
    _facts, found = audit_health(tmp_path)
    assert ids(found) == [
        ("gpu_ecc_pending", gpus[3], "medium"),
        ("gpu_ecc_uncorrectable", gpus[2], "medium"),
        ("gpu_row_remap_failed", gpus[1], "critical"),
        ("gpu_row_remap_pending", gpus[0], "high"),
    ]


def test_the_old_drivers_ecc_findings(tmp_path):
    health.write_smi(tmp_path, health.read(health.OLD_470))
    _facts, found = audit_health(tmp_path)
    assert ids(found) == [("gpu_ecc_pending", "0000:3b:00.0", "medium"),
                          ("gpu_ecc_uncorrectable", "0000:3b:00.0", "high")]
    pending = [f for f in found if f["id"] == "gpu_ecc_pending"][0]
    assert pending["reboot_required"] and "nvidia-smi -e 1 -i 0000:3b:00.0" in pending["remedy"]


def test_the_seed_captures_pending_remap(audited):
    result = audited("seed_health_host")
    (item,) = judge("gpu_row_remap_pending", result)
    assert item["severity"] == "high" and item["reboot_required"] is True
    assert judge("gpu_row_remap_failed", result) == []
    assert judge("gpu_ecc_uncorrectable", result) == []


def test_a_healthy_layout_gives_none(tmp_path):
    health.write_smi(tmp_path, health.read(health.B200_580))
    _facts, found = audit_health(tmp_path)
    assert found == []


def test_na_without_nvidia_smi_data(audited):
    assert judge("gpu_row_remap_pending", audited("tuned_host")).startswith(
        "no nvidia-smi data")
