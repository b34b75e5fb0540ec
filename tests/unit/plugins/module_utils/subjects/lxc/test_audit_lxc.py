"""audit_lxc: the lxc subject's declaration: container 129 of the seed host allows the
majors of the old era (504/507, now stale) and misses the new ones (nvidia-uvm 509,
nvidia-caps 238); the config folder must stay inside the root."""

import pytest
from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import audit_lxc


def test_the_seed_hosts_gpu_container(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_lxc, tmp_path)
    ct = dict((c["vmid"], c) for c in got["lxc"])[129]
    assert errors == [] and ct["gpu"] is True and ct["path"] == "/etc/pve/lxc/129.conf"
    assert ct["stale_majors"] == [504, 507]
    assert ct["missing_majors"] == [{"driver": "nvidia-uvm", "major": 509},
                                    {"driver": "nvidia-caps", "major": 238}]


def test_the_config_folder_and_driver_names_are_checked(tmp_path):
    audit_lxc.wanted_rules({"root": str(tmp_path), "lxc_config_dir": "/etc/pve/lxc",
                            "lxc_gpu_drivers": ["nvidia", "nvidia-uvm"]})
    with pytest.raises(ValidationError, match="lxc_gpu_drivers"):
        audit_lxc.wanted_rules({"root": str(tmp_path), "lxc_config_dir": "/etc/pve/lxc",
                                "lxc_gpu_drivers": ["nvidia; rm -rf /"]})
    with pytest.raises(ValidationError, match="lxc_config_dir"):
        audit_lxc.wanted_rules({"root": str(tmp_path), "lxc_config_dir": "../../etc",
                                "lxc_gpu_drivers": []})
