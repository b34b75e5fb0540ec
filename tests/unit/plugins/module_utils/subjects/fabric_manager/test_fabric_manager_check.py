"""subjects/fabric_manager/fabric_manager_check.py: fabric_manager on NVSwitch hosts (moved from
test_gpuhealth.py):
the package, its version against the driver's, the service and the GPUs' fabric state."""

import os

from fixtures import nvhealth as health
from fixtures import pci

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    fabric_manager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import findings

from auditcase import health_findings

COLUMNS = ("fabric_manager",)


def audit_health(root):
    return health_findings(root, COLUMNS)


def _nvswitch_host(root):
    pci.add_host_bridge(str(root), "pci0000:00")
    for slot in ("01", "02"):
        pci.add_function(str(root), "0000:%s:00.0" % slot, "pci0000:00",
                         pci.plain_config(0x10DE, 0x22A3, 0x068000, 0xA1), driver="nvidia-nvswitch")


def _dpkg(root, version, name="nvidia-fabricmanager-580"):
    os.makedirs(root / "var/lib/dpkg", exist_ok=True)
    (root / "var/lib/dpkg/status").write_text(
        "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\n"
        "Package: %s\nStatus: install ok installed\nPriority: optional\n"
        "Version: %s-1\nDescription: Fabric Manager for NVSwitch based systems.\n multi\n"
        % (name, version))


def _unit(root, active=True, enabled=True):
    if active:
        os.makedirs(root / "run/systemd/units", exist_ok=True)
        os.symlink("5f1c2d", str(root / "run/systemd/units" / (
            "invocation:" + fabric_manager.UNIT)))
    if enabled:
        folder = root / "etc/systemd/system/multi-user.target.wants"
        os.makedirs(folder, exist_ok=True)
        os.symlink("/lib/systemd/system/" + fabric_manager.UNIT, str(folder / fabric_manager.UNIT))


def test_fabric_manager_fine_on_an_nvswitch_host(tmp_path):
    _nvswitch_host(tmp_path)
    _dpkg(tmp_path, "580.159.04")
    _unit(tmp_path)
    health.write_smi(tmp_path, health.read(health.B200_580))
    facts, found = audit_health(tmp_path)
    assert facts["fabric_manager"]["nvswitches"] == ["0000:01:00.0", "0000:02:00.0"]
    assert facts["fabric_manager"]["version"] == "580.159.04"
    assert found == []


def test_fabric_manager_version_and_fabric_state(tmp_path):
    _nvswitch_host(tmp_path)
    _dpkg(tmp_path, "570.86.15")
    _unit(tmp_path, active=False)
    health.write_smi(tmp_path, health.smi_xml(health.B200_580, edits={
        "0000:1b:00.0": {"fabric/state": "In Progress", "fabric/status": "N/A"}}))
    _facts, found = audit_health(tmp_path)
    currents = sorted(f["current"] for f in found)
    assert [f["id"] for f in found] == ["fabric_manager", "fabric_manager"]
    assert currents == ["0000:1b:00.0 In Progress/-", "fabric manager 570.86.15, driver 580.159.04"]


def test_no_nvswitch_no_fabric_manager(tmp_path):
    health.write_smi(tmp_path, health.read(health.B200_580))
    facts, _found = audit_health(tmp_path)
    col = [c for c in findings.columns() if c.key == "fabric_manager"][0]
    assert col.not_applicable(facts, {}) == "no NVSwitch (PCIe-only host)"


def test_enabled_at_boot_missing_is_medium(tmp_path):
    _nvswitch_host(tmp_path)
    _dpkg(tmp_path, "580.159.04")
    _unit(tmp_path, enabled=False)
    health.write_smi(tmp_path, health.read(health.B200_580))
    _facts, found = audit_health(tmp_path)
    assert [(f["id"], f["severity"], f["remedy"]) for f in found] == [
        ("fabric_manager", "medium", "systemctl enable %s" % fabric_manager.UNIT)]


def test_not_installed_is_high_and_names_the_drivers_version(tmp_path):
    _nvswitch_host(tmp_path)
    health.write_smi(tmp_path, health.read(health.B200_580))
    _facts, found = audit_health(tmp_path)
    (item,) = [f for f in found if "install nvidia-fabricmanager of" in f["remedy"]]
    assert item["severity"] == "high" and "(580.159.04)" in item["remedy"]
    assert item["detail"] == "2 NVSwitch function(s): 0000:01:00.0, 0000:02:00.0"
