"""audit_nvlink: the nvlink subject's declaration: without nvidia-smi data the links are
not checked, saying why."""

from auditcase import declared_facts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import audit_nvlink


def test_no_nvidia_smi_data_is_not_checked_and_says_why(tmp_path):
    known = {"nvidia_smi": {"available": False, "gpus": []}, "fabric_manager": {}}
    got, errors = declared_facts(audit_nvlink, tmp_path, known=known)
    assert errors == [] and got["nvlink"]["checked"] is False
    assert got["nvlink"]["reason"] == "no nvidia-smi data"
