"""engines/fleet/fleet_registry.py: the fleet checks a report runs are the ones the audit's
registry imported from their subjects, in their declared order."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.fleet import fleet_registry


def test_the_fleet_checks_are_the_subjects_declared_ones_in_order():
    checks = fleet_registry.fleet_checks()
    ids = [c.id for c in checks]
    assert "fleet_drift" in ids and len(ids) == len(set(ids))
    assert [c.order for c in checks] == sorted(c.order for c in checks)
    assert fleet_registry.HOST_LEVEL_NOTE
