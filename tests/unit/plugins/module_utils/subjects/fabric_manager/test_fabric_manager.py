"""fabric: NVSwitch functions from sysfs (vendor 10de, class 0x0680xx), the Fabric Manager
package from dpkg's status file (stanzas as dpkg writes them: tests/fixtures/driver.py),
its unit's state, and what is wrong with them against the driver version."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    fabric_manager,
)
from fixtures import driver as drv
from fixtures import pci as pcifix

SWITCH = "0000:c3:00.0"


def _touch(root, path):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    open(full, "w").close()


@pytest.fixture
def hgx(tmp_path):
    root = str(tmp_path)
    pcifix.seed_gpus(root, mrrs=4096)
    drv.nvswitch(root, fabricmanager="570.86.15")
    return root


def test_nvswitches_only_nvidia_bridges_of_the_switch_class(hgx, tmp_path):
    assert fabric_manager.nvswitches(hgx) == [SWITCH]
    assert fabric_manager.nvswitches(str(tmp_path / "none")) == []


def test_package_version_is_the_upstream_version_of_an_installed_package(hgx):
    assert fabric_manager.package_version(hgx) == ("nvidia-fabricmanager-570", "570.86.15")


def test_package_version_skips_removed_and_dev_packages(tmp_path):
    root = str(tmp_path)
    drv.dpkg_status(root, [
        drv.stanza("nvidia-fabricmanager-550", "550.1.2-1", drv.NVIDIA_MAINTAINER,
                   status="deinstall ok config-files"),
        drv.stanza("nvidia-fabricmanager", "1:580.159.04-1", drv.NVIDIA_MAINTAINER),
        drv.stanza("nvidia-fabricmanager-dev", "9.9.9-1", drv.NVIDIA_MAINTAINER)])
    assert fabric_manager.package_version(root) == ("nvidia-fabricmanager", "580.159.04")
    assert fabric_manager.package_version(str(tmp_path / "none")) == (None, None)


def test_a_status_file_over_its_cap_is_not_read(hgx, monkeypatch):
    monkeypatch.setattr(hostfs, "OUTPUT_LIMIT", 64)
    assert fabric_manager.package_version(hgx) == (None, None)


def test_facts_without_switches_need_nothing(tmp_path):
    root = str(tmp_path)
    pcifix.seed_gpus(root, mrrs=4096)
    fact = fabric_manager.facts(root, None, "590.48.01")
    assert fact["needed"] is False and fact["unit_active"] is None
    assert fabric_manager.problems(fact) == []


def test_facts_and_problems_of_a_switch_host(hgx):
    nvsmi = {"gpus": [{"address": "0000:01:00.0", "fabric_state": "In Progress",
                       "fabric_status": "N/A"}]}
    fact = fabric_manager.facts(hgx, nvsmi, "570.86.15")
    assert fact["nvswitches"] == [SWITCH] and fact["version"] == "570.86.15"
    assert fact["unit_active"] is False and fact["unit_enabled"] is False
    assert [p[0] for p in fabric_manager.problems(fact)] == ["fabric", "enabled"]
    _touch(hgx, fabric_manager.INVOCATION)
    _touch(hgx, fabric_manager.WANTS)
    done = {"gpus": [{"address": "0000:01:00.0", "fabric_state": "Completed",
                      "fabric_status": "Success"}]}
    assert fabric_manager.problems(fabric_manager.facts(hgx, done, "570.86.15")) == []


def test_a_version_other_than_the_drivers_or_none_installed(hgx):
    fact = fabric_manager.facts(hgx, None, "580.159.04")
    (problem,) = [p for p in fabric_manager.problems(fact) if p[0] == "version"]
    assert problem[1] == "fabric manager 570.86.15, driver 580.159.04"
    fact.update(version=None, package=None)
    assert fabric_manager.problems(fact)[0] == ("not installed", "no nvidia-fabricmanager package",
                                                "nvidia-fabricmanager 580.159.04 installed")


def test_without_gpu_states_a_stopped_unit_is_the_problem(hgx):
    fact = fabric_manager.facts(hgx, None, "570.86.15")
    unit = fabric_manager.UNIT
    assert ("service", "%s not running" % unit, "%s active" % unit) in \
        fabric_manager.problems(fact)
