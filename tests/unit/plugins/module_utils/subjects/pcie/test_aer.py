"""PCIe AER counters: the kernel's sysfs format, findings per GPU and bridge, and the change
between two audits."""

import pytest
from fixtures import health, pci

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer

# aer_dev_correctable of a 6.x kernel with an unnamed bit counted (printed by bit number).
REAL_COR = """RxErr 0
BadTLP 12
BadDLLP 3
Rollover 0
Timeout 1
NonFatalErr 0
CorrIntErr 0
HeaderOF 0
dev_cor_errs_bit[9] 2
TOTAL_ERR_COR 18
"""


def test_parse_counters_reads_names_bits_and_total():
    counters, total = aer.parse_counters(REAL_COR)
    assert total == 18
    assert counters["BadTLP"] == 12 and counters["dev_cor_errs_bit[9]"] == 2
    assert "TOTAL_ERR_COR" not in counters


def test_parse_counters_without_total_line_sums(tmp_path):
    counters, total = aer.parse_counters("RxErr 1\nBadTLP 2\n")
    assert total is None and sum(counters.values()) == 3


def test_parse_counters_rejects_other_text():
    with pytest.raises(aer.AerFormatError, match="unexpected line"):
        aer.parse_counters("RxErr: 1\n", "x/aer_dev_correctable")


def _findings(root):
    return aer.findings(aer.collect(str(root)))


def test_health_host_counts_each_error_once(tmp_path):
    health.gpu_host(tmp_path)
    found = dict((f["subject"], f) for f in _findings(tmp_path))
    # the fatal on 83:00.0 is counted by its root port too: one finding, on the GPU
    assert sorted(found) == ["0000:02:00.0", "0000:83:00.0"]
    assert found["0000:83:00.0"]["severity"] == "high"
    assert "1 fatal (CmpltTO 1)" in found["0000:83:00.0"]["current"]
    assert "3 correctable (BadTLP 3)" in found["0000:83:00.0"]["current"]
    assert found["0000:02:00.0"]["severity"] == "low"
    assert found["0000:02:00.0"]["current"].startswith("40 correctable (RxErr 40)")


def test_facts_keep_raw_counters_of_gpus_and_bridges(tmp_path):
    health.gpu_host(tmp_path)
    entries = dict((e["address"], e) for e in aer.collect(str(tmp_path)))
    assert len(entries) == 16  # 8 GPUs and their 8 root ports
    gpu = entries["0000:83:00.0"]
    assert gpu["role"] == "gpu" and gpu["fatal"]["counters"]["CmpltTO"] == 1
    assert len(gpu["nonfatal"]["counters"]) == len(health.AER_UNCOR_NAMES)
    port = entries["0000:80:03.1"]
    assert port["role"] == "bridge" and port["port_type"] == "root_port"
    assert port["rootport_total"] == {"correctable": 3, "fatal": 1, "nonfatal": 0}
    assert port["gpus"] == ["0000:83:00.0"] and port["below"] == ["0000:83:00.0"]


def test_root_port_totals_beyond_its_devices_are_reported(tmp_path):
    built = pci.seed_gpus(tmp_path)
    health.aer_everywhere(tmp_path)
    # the GPU's audio function (not read) had 2 non-fatal errors
    health.aer_files(tmp_path, built["root_ports"][0], rootport={"nonfatal": 2})
    found = _findings(tmp_path)
    assert [(f["subject"], f["severity"]) for f in found] == [(built["root_ports"][0], "high")]
    assert "2 non-fatal reported to this root port by devices below it" in found[0]["current"]
    assert "root port above 0000:01:00.0" in found[0]["detail"]


def test_many_correctable_is_medium(tmp_path):
    pci.seed_gpus(tmp_path)
    health.aer_everywhere(tmp_path)
    health.aer_files(tmp_path, "0000:01:00.0", correctable={"BadDLLP": aer.CORRECTABLE_MEDIUM})
    assert [f["severity"] for f in _findings(tmp_path)] == ["medium"]


def test_no_aer_files_is_no_finding_and_not_available(tmp_path):
    pci.seed_gpus(tmp_path)
    entries = aer.collect(str(tmp_path))
    assert entries and not any(e["available"] for e in entries)
    assert _findings(tmp_path) == []
