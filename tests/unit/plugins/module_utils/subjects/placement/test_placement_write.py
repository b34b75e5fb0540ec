"""placement_write: the pinning part (``pin_run``): each GPU container cpuset to its GPUs'
NUMA node in its live section, check mode, idempotence, restore and a failure reported,
on the health host of tests/fixtures (moved from test_placement.py, which keeps the
readers and findings)."""

import os


from fixtures import health

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import placement
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (
    placement_write,
)


def _findings(facts, host=None):
    """Every placement finding with its id, as the check registry labels them."""
    return ([dict(f, id="gpu_numa_mismatch") for f in placement.mismatch_findings(facts, host)]
            + [dict(f, id="gpu_container_unpinned")
               for f in placement.unpinned_findings(facts, host)])


def _found(root, host=None):
    return _findings(placement.collect(str(root)), host)


# --- the pinning part -----------------------------------------------------------------


def _read(root, vmid):
    with open(str(root / "etc/pve/lxc" / ("%d.conf" % vmid)), "rb") as handle:
        return handle.read()


def test_pin_run_pins_check_mode_idempotence_and_restore(tmp_path):
    from conftest import tree_snapshot
    health.gpu_host(tmp_path)
    original = dict((v, _read(tmp_path, v)) for v in (129, 131, 132))
    recorded = placement_write.pin_record(str(tmp_path))
    assert recorded["131"] == {"lxc.cgroup2.cpuset.cpus": ["lxc.cgroup2.cpuset.cpus: 0-15"],
                               "lxc.cgroup2.cpuset.mems": ["lxc.cgroup2.cpuset.mems: 0"]}
    assert recorded["132"] == {"lxc.cgroup2.cpuset.cpus": [], "lxc.cgroup2.cpuset.mems": []}
    before = tree_snapshot(str(tmp_path))
    planned = placement_write.pin_run(str(tmp_path), check_mode=True)
    assert planned["changed"] and tree_snapshot(str(tmp_path)) == before
    result = placement_write.pin_run(str(tmp_path))
    rows = dict((r["vmid"], r) for r in result["containers"])
    assert rows[129]["skipped_reason"] == "its GPUs sit on every node"
    assert rows[131]["after"] == {"cpus": "32-63,96-127", "mems": "1"}
    assert "next start" in result["message"] and not result["failed"]
    assert _read(tmp_path, 129) == original[129]
    text = _read(tmp_path, 131).decode()
    assert "lxc.cgroup2.cpuset.cpus: 32-63,96-127\nlxc.cgroup2.cpuset.mems: 1\n" in text
    assert text.replace("32-63,96-127", "0-15").replace("mems: 1", "mems: 0") \
        == original[131].decode()
    assert _read(tmp_path, 132) == original[132] + (
        b"lxc.cgroup2.cpuset.cpus: 32-63,96-127\nlxc.cgroup2.cpuset.mems: 1\n")
    assert oct(os.stat(str(tmp_path / "etc/pve/lxc/132.conf")).st_mode & 0o777) == "0o640"
    # the audit no longer finds anything; a second run changes nothing
    assert _found(tmp_path) == []
    assert placement_write.pin_run(str(tmp_path))["changed"] is False
    # revert puts the recorded keys back, byte for byte
    restored = placement_write.pin_restore(str(tmp_path), recorded)
    assert restored["changed"] and not restored["failures"]
    assert dict((v, _read(tmp_path, v)) for v in (129, 131, 132)) == original


def test_pin_run_only_listed_and_failure_reported(tmp_path, monkeypatch):
    import errno
    health.gpu_host(tmp_path)
    result = placement_write.pin_run(str(tmp_path), vmids=[132])
    assert [r["vmid"] for r in result["containers"] if r["changed"]] == [132]
    assert [r["skipped_reason"] for r in result["containers"] if r["vmid"] == 131] \
        == ["not in numa_pin_vmids"]
    assert _read(tmp_path, 131).count(b"cpuset.cpus: 0-15") == 1

    def read_only(path, data, **kwargs):  # pmxcfs without quorum
        raise OSError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(placement_write, "atomic_write", read_only)
    failed = placement_write.pin_run(str(tmp_path))
    assert failed["failed"] == [131] and not failed["changed"]
    row = [r for r in failed["containers"] if r["vmid"] == 131][0]
    assert "Read-only file system" in row["error"]
    assert _read(tmp_path, 131).count(b"cpuset.cpus: 0-15") == 1
