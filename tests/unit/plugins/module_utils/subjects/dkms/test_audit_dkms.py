"""audit_dkms: the dkms subject's declaration: every module DKMS knows with its state (the
seed host: nvidia 590.48.01 installed for the running kernel, none for the newest)."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import audit_dkms


def test_the_seed_hosts_dkms_tree(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_dkms, tmp_path)
    assert errors == []
    assert got["dkms"] == [{"name": "nvidia", "version": hosts.SEED_NVIDIA,
                            "kernel": hosts.SEED_RUNNING, "arch": "x86_64",
                            "state": "installed", "warning": None}]


def test_no_dkms_is_an_empty_list(tmp_path):
    assert declared_facts(audit_dkms, tmp_path) == ({"dkms": []}, [])
