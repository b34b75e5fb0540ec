"""container: finding a container's config (by path or vmid, naming the containers this
node has when it is not there), the timestamped backup next to it, and the device-rule
pass of module lxc_cgroup_devices (``rules_run``) on the seed host's container 129
(tests/fixtures/lxc.py: its config of the old driver era against ``/proc/devices`` after
the upgrade). The in-container checks through ``pct``: test_container_verify.py."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import container
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import LxcError
from fixtures import lxc as lxcfix

DIR = "/etc/pve/lxc"


def _params(root, **kw):
    params = {"root": root, "vmid": 129, "path": None, "config_dir": DIR,
              "drivers": ["nvidia", "nvidia-uvm", "nvidia-caps"], "access": "rwm",
              "remove_stale": True, "missing": "fail", "previous_majors": {}, "backup": False}
    params.update(kw)
    return params


@pytest.fixture
def seed(tmp_path):
    return lxcfix.seed_host(str(tmp_path))


def test_locate_by_vmid_or_path_and_what_this_node_has(seed):
    assert container.locate(_params(seed)) == os.path.join(seed, "etc/pve/lxc/129.conf")
    assert container.locate(_params(seed, path=DIR + "/130.conf")).endswith("/130.conf")
    with pytest.raises(LxcError) as err:
        container.locate(_params(seed, vmid=555))
    assert "(containers here: 129, 130)" in str(err.value)
    assert "run on the node that hosts it" in str(err.value)
    with pytest.raises(LxcError, match="does not exist"):
        container.locate(_params(seed, path=DIR + "/9.conf"))


def test_rules_run_fixes_the_seed_and_then_has_nothing_to_do(seed):
    path = os.path.join(seed, "etc/pve/lxc/129.conf")
    with open(path, "rb") as handle:
        before = handle.read()
    planned = container.rules_run(_params(seed), check_mode=True)
    assert planned["changed"] and planned["added"] and planned["removed"]
    assert planned["diff"]["before"] == before.decode()
    with open(path, "rb") as handle:
        assert handle.read() == before
    done = container.rules_run(_params(seed, backup=True), check_mode=False)
    assert done["changed"] and done["added"] == planned["added"]
    with open(done["backup_file"], "rb") as handle:
        assert handle.read() == before
    again = container.rules_run(_params(seed), check_mode=False)
    assert again["changed"] is False and "diff" not in again


def test_without_proc_devices_it_says_so(seed):
    os.chmod(os.path.join(seed, "proc/devices"), 0o644)
    os.unlink(os.path.join(seed, "proc/devices"))
    with pytest.raises(LxcError, match="proc/devices is missing: cannot read device majors"):
        container.rules_run(_params(seed), check_mode=True)


def test_a_backup_that_cannot_be_written_leaves_nothing(tmp_path):
    folder = tmp_path / "lxc"
    folder.mkdir()
    path = str(folder / "129.conf")
    with pytest.raises(LxcError, match="backup of .* failed, nothing changed"):
        container.backup_copy(str(tmp_path / "missing" / "129.conf"), b"x")
    backup = container.backup_copy(path, b"data")
    assert os.path.basename(backup).startswith("129.conf.%d." % os.getpid())
    assert backup.endswith("~")
    with open(backup, "rb") as handle:
        assert handle.read() == b"data"
