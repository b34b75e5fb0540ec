"""Host file writes (hostfs_write): kernel files written in place without leaving the root,
every other file atomically with its mode kept and never through a folder that links out
of the root; the diff entry of a change."""

import io
import os
import stat

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs_base
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs_root
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs_write

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


def test_create_temp_never_opens_follows_or_removes_what_is_planted(host_tree):
    root, outside = host_tree
    folder = os.path.join(root, "var/lib/keep")
    os.makedirs(folder)
    # a fresh name each time, created new with the mode asked (umask aside), open to write
    fd, path = hostfs_write.create_temp(folder, "x.run", 0o600, root=root)
    os.write(fd, b"data")
    os.close(fd)
    assert os.path.dirname(path) == folder and os.path.basename(path).startswith(".x.run.")
    assert path.endswith(".tmp") and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = hostfs_write.create_temp(folder, "x.run", 0o600, root=root)
    os.close(again[0])
    assert again[1] != path
    # the name itself (unique=False): a link planted there is never followed: EEXIST
    os.symlink(os.path.join(outside, "secret"), os.path.join(folder, "x.deb"))
    with pytest.raises(FileExistsError) as err:
        hostfs_write.create_temp(folder, "x.deb", 0o644, unique=False)
    assert err.value.filename == os.path.join(folder, "x.deb")
    with open(os.path.join(outside, "secret")) as handle:
        assert handle.read() == "outside text\n"
    assert os.path.islink(os.path.join(folder, "x.deb"))
    # a folder: an exclusive mkdir of a fresh name
    none, made = hostfs_write.create_temp(folder, "6.8.12-9-pve", 0o755, root=root,
                                          directory=True)
    assert none is None and os.path.isdir(made) and not os.path.islink(made)
    # a folder linked out of the root is refused before anything is made
    os.symlink(outside, os.path.join(root, "var/lib/out"))
    with pytest.raises(hostfs_root.PathError, match="out of root"):
        hostfs_write.create_temp(os.path.join(root, "var/lib/out"), "x", root=root)
    assert sorted(os.listdir(outside)) == ["secret"]


def test_open_source_reads_regular_files_only_never_through_a_link_or_a_fifo(host_tree):
    root, outside = host_tree
    folder = os.path.join(root, "var/cache/apt/archives")
    os.makedirs(folder)
    deb = os.path.join(folder, "libcuda1_580.95.05-1_amd64.deb")
    with open(deb, "wb") as handle:
        handle.write(b"!<arch>\n" * 300000)
    assert hostfs_write.source_problem(deb) is None
    fd, st = hostfs_write.open_source(deb)
    out = io.BytesIO()
    try:
        hostfs_write.copy_fd(fd, out)
    finally:
        os.close(fd)
    assert out.getvalue() == b"!<arch>\n" * 300000 and st.st_size == 2400000
    # a link (out of the root, or inside it), a FIFO (at once: never waits for a writer)
    link = os.path.join(folder, "link.deb")
    os.symlink(os.path.join(outside, "secret"), link)
    inner = os.path.join(folder, "inner.deb")
    os.symlink(deb, inner)
    fifo = os.path.join(folder, "fifo.deb")
    os.mkfifo(fifo)
    hostfs_base.host_path(root, "/")   # the root registered, as a reader of the tree does
    for path, why in ((link, "a symbolic link to %s" % os.path.join(outside, "secret")),
                      (inner, "a symbolic link to %s" % deb), (fifo, "a FIFO"),
                      (folder, "a folder")):
        assert hostfs_write.source_problem(path) == why
        with pytest.raises(hostfs_base.NotRegularFile) as err:
            hostfs_write.open_source(path)
        assert str(err.value) == hostfs_write.source_refused(path, why)
        assert str(err.value).startswith("%s: %s, not a regular file: not copied" % (path, why))
    with pytest.raises(FileNotFoundError):
        hostfs_write.open_source(os.path.join(folder, "none.deb"))


def test_unified_diff_dict_is_what_ansible_renders():
    assert hostfs_write.unified_diff_dict("/etc/x", "a\n", "b\n") == {
        "before_header": "/etc/x", "after_header": "/etc/x", "before": "a\n", "after": "b\n"}
