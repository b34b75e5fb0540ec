"""Host file writes (hostfs_write): kernel files written in place without leaving the root,
every other file atomically with its mode kept and never through a folder that links out
of the root; the diff entry of a change."""

import os
import stat

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.onhost import hostfs_base
from ansible_collections.gpuhost.tuning.plugins.module_utils.onhost import hostfs_root
from ansible_collections.gpuhost.tuning.plugins.module_utils.onhost import hostfs_write

pytestmark = pytest.mark.usefixtures("never_hang")


def test_write_in_place_never_writes_outside_the_root(host_tree):
    root, outside = host_tree
    os.makedirs(os.path.join(root, "sys/kernel/mm"))
    knob = os.path.join(root, "sys/kernel/mm/enabled")
    os.symlink(os.path.join(outside, "secret"), knob)
    # <root>/<outside> does not exist: the write fails as in a chroot, nothing written
    with pytest.raises(FileNotFoundError) as err:
        hostfs_write.write_in_place(hostfs_base.host_path(root, "/sys/kernel/mm/enabled"), "never")
    assert err.value.filename == hostfs_base.host_path(root, "/sys/kernel/mm/enabled")
    with open(os.path.join(outside, "secret")) as handle:
        assert handle.read() == "outside text\n"
    os.makedirs(os.path.join(root, outside.lstrip("/")))
    hostfs_write.write_in_place(hostfs_base.host_path(root, "/sys/kernel/mm/enabled"), "never")
    with open(os.path.join(root, outside.lstrip("/"), "secret")) as handle:
        assert handle.read() == "never"
    with open(os.path.join(outside, "secret")) as handle:
        assert handle.read() == "outside text\n"
    fifo = os.path.join(root, "sys/kernel/mm/defrag")
    os.mkfifo(fifo)
    with pytest.raises(hostfs_base.NotRegularFile, match="a FIFO"):
        hostfs_write.write_in_place(hostfs_base.host_path(root, "/sys/kernel/mm/defrag"), "madvise")


def test_atomic_write_keeps_the_mode_and_leaves_no_temporary_file(tmp_path):
    path = str(tmp_path / "modprobe.conf")
    with open(path, "w") as handle:
        handle.write("old\n")
    os.chmod(path, 0o640)
    hostfs_write.atomic_write(path, "options nvidia NVreg_X=1\n", mode=0o600)
    with open(path) as handle:
        assert handle.read() == "options nvidia NVreg_X=1\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert os.listdir(str(tmp_path)) == ["modprobe.conf"]
    # a new file gets ``mode``; bytes are written as they are
    new = str(tmp_path / "new.bin")
    hostfs_write.atomic_write(new, b"\x00\xff", mode=0o600)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o600
    with open(new, "rb") as handle:
        assert handle.read() == b"\x00\xff"


def test_atomic_write_refuses_a_folder_that_links_out_of_the_root(host_tree):
    root, outside = host_tree
    os.symlink(outside, os.path.join(root, "etc/modprobe.d"))
    with pytest.raises(hostfs_root.PathError):
        hostfs_write.atomic_write(os.path.join(root, "etc/modprobe.d/secret"), "x", root=root)
    with open(os.path.join(outside, "secret")) as handle:
        assert handle.read() == "outside text\n"
    assert sorted(os.listdir(outside)) == ["secret"]


def test_unified_diff_dict_is_what_ansible_renders():
    assert hostfs_write.unified_diff_dict("/etc/x", "a\n", "b\n") == {
        "before_header": "/etc/x", "after_header": "/etc/x", "before": "a\n", "after": "b\n"}
