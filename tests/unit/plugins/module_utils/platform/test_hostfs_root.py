"""Roots and the run lock (hostfs_root): a root that cannot be meant is refused, a path
that resolves out of its root is refused naming it, and one changing run per root holds
``<root>/run/gpuhost-tuning.lock`` (a second run is refused naming the first)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs_root


def test_check_root_refuses_a_root_that_cannot_be_meant(tmp_path):
    hostfs_root.check_root("/")
    hostfs_root.check_root(str(tmp_path))
    with pytest.raises(hostfs_root.PathError, match="is empty: give / for the live host"):
        hostfs_root.check_root("")
    with pytest.raises(hostfs_root.PathError, match="does not exist"):
        hostfs_root.check_root(str(tmp_path / "none"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(hostfs_root.PathError, match="is not a folder"):
        hostfs_root.check_root(str(tmp_path / "file"))
    os.symlink("/", str(tmp_path / "slash"))
    with pytest.raises(hostfs_root.PathError, match="resolves to / "):
        hostfs_root.check_root(str(tmp_path / "slash"))


def test_under_root_refuses_dotdot_and_links_out(tmp_path):
    root = tmp_path / "host"
    (root / "etc").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), str(root / "etc/pve"))
    assert hostfs_root.under_root(str(root), "/etc/hostname") == str(root / "etc/hostname")
    for path in ("/../outside/x", "/etc/pve/x"):
        with pytest.raises(hostfs_root.PathError, match="outside root"):
            hostfs_root.under_root(str(root), path)
    # follow=False: the link itself is the entry (it may be replaced or removed)
    assert hostfs_root.under_root(str(root), "/etc/pve", follow=False) == str(root / "etc/pve")


def test_root_lock_refuses_a_second_run_naming_the_first_and_cleans_up(tmp_path):
    root = str(tmp_path)
    lock_path = os.path.join(root, "run/gpuhost-tuning.lock")
    with hostfs_root.RootLock(root, "tune first"):
        with open(lock_path) as handle:
            assert handle.read().startswith("pid %d on " % os.getpid())
        with pytest.raises(hostfs_root.LockError) as err:
            hostfs_root.RootLock(root, "tune second").acquire()
        assert "is held by pid %d" % os.getpid() in str(err.value)
        assert "(tune first)" in str(err.value)
    # released: the lock file and the run folder it made are gone
    assert not os.path.exists(os.path.join(root, "run"))
    # a lock that is a link (out of the tree) is never followed
    os.makedirs(os.path.join(root, "run"))
    os.symlink(str(tmp_path / "elsewhere"), lock_path)
    with pytest.raises(hostfs_root.LockError, match="is a symbolic link to"):
        hostfs_root.RootLock(root, "tune").acquire()
    assert not os.path.exists(str(tmp_path / "elsewhere"))
