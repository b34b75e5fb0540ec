"""subjects/pcie/mrrs_part.py: the setpci_maxreadreq module's pass over the seed tree of
tests/fixtures/pci.py (check mode plans and writes nothing; a run writes and reads back),
its failure message, and the pcie tune part's place in the registry protocol."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import mrrs_part

from fixtures import pci as fx


def _tree(root):
    out = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[path] = handle.read()
    return out


def test_check_mode_plans_every_gpu_and_bridge_and_writes_nothing(tmp_path):
    fx.seed_gpus(tmp_path)
    before = _tree(str(tmp_path))
    warned = []
    result = mrrs_part.mrrs_run({"root": str(tmp_path)}, check_mode=True, warn=warned.append)
    assert _tree(str(tmp_path)) == before
    assert result["changed"] is True and result["devices"]
    assert all(d["after"] == 4096 for d in result["devices"] if d.get("before") is not None)
    assert "Max Read Request Size" in result["diff"]["before_header"]
    assert mrrs_part.mrrs_failure(result) is None and warned == []


def test_a_run_writes_reads_back_and_a_second_run_changes_nothing(tmp_path):
    fx.seed_gpus(tmp_path)
    first = mrrs_part.mrrs_run({"root": str(tmp_path), "mrrs_size": 2048})
    assert first["changed"] is True and mrrs_part.mrrs_failure(first) is None
    again = mrrs_part.mrrs_run({"root": str(tmp_path), "mrrs_size": 2048})
    assert again["changed"] is False


def test_no_matching_device_is_a_warning_not_a_failure(tmp_path):
    fx.seed_gpus(tmp_path)
    warned = []
    result = mrrs_part.mrrs_run({"root": str(tmp_path), "vendor": "1002"}, warn=warned.append)
    assert result["devices"] == [] and len(warned) == 1 and "1002" in warned[0]


def test_the_tune_part_is_the_pcie_section():
    part = mrrs_part.TUNE_PART
    assert part.name == "pcie" and part.snapshot_key == "pcie"
