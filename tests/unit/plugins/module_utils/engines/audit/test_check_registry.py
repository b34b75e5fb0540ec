"""engines/audit/check_registry.py: importing it registers every check file of every subject
folder and the fleet checks' columns; a check file a subject holds but the registry does not
import would never run."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import fleet_findings

SUBJECTS = os.path.join(os.path.dirname(os.path.dirname(check_registry.__file__)), "..",
                        "subjects")


def test_every_check_file_of_every_subject_is_registered():
    on_disk = set()
    for _folder, _dirs, names in os.walk(SUBJECTS):
        on_disk.update(n[:-3] for n in names if n.endswith("_check.py"))
    named = set(m.__name__.rsplit(".", 1)[-1] for m in check_registry.CHECK_FILES)
    missing = sorted(on_disk - named)
    assert on_disk and not missing, "check files the registry does not import: %s" % missing


def test_columns_sort_by_position_and_hold_the_fleet_columns():
    cols = check_registry.columns()
    positions = [c.position for c in cols]
    assert positions == sorted(positions)
    keys = set(c.key for c in cols)
    assert set(c.id for c in fleet_findings.fleet_checks() if c.column) <= keys
    assert {"pcie_mrrs", "dkms", "audit"} <= keys


def test_finding_order_names_every_registered_check_once():
    order = check_registry.finding_order()
    assert len(order) == len(set(order)) and "pcie_mrrs" in order and "host_is_guest" in order
