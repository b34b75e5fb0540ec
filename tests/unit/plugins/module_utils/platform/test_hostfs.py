"""The reading layer (hostfs): regular files only, every read bounded, every path under a
root resolved inside it. Each case names the behaviour a user would see with the old
plain ``open()``: a hang, the host's memory, or another file's text in the audit."""

import errno
import os
import socket

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs

pytestmark = pytest.mark.usefixtures("never_hang")


# ---------------------------------------------------------------------------------------
# files that are not files

READERS = [
    ("read_text", hostfs.read_text),
    ("read_bytes", hostfs.read_bytes),
    ("open_read", lambda p: hostfs.open_read(p).read()),
    ("read_lines", lambda p: list(hostfs.read_lines(p).__enter__())),
]


@pytest.mark.parametrize("name,read", READERS, ids=[r[0] for r in READERS])
@pytest.mark.parametrize("under_root", [False, True], ids=["live", "root"])
def test_fifo_is_refused_without_blocking(host_tree, name, read, under_root):
    root, _outside = host_tree
    path = os.path.join(root, "proc/cmdline")
    os.unlink(path)
    os.mkfifo(path)
    if under_root:
        path = hostfs.host_path(root, "/proc/cmdline")
    with hostfs.session() as reading:
        with pytest.raises(hostfs.NotRegularFile) as err:
            read(path)
    assert str(err.value) == path + ": a FIFO, not a regular file: not read (a host tree " \
        "unpacked with tar -x recreates FIFOs and devices: put the file there or remove it)"
    assert reading.problems == [("files", str(err.value))]


@pytest.mark.parametrize("name,read", READERS, ids=[r[0] for r in READERS])
def test_endless_device_and_socket_refused(tmp_path, name, read):
    with pytest.raises(hostfs.NotRegularFile, match="^/dev/zero: a character device, not"):
        read("/dev/zero")
    sock_path = str(tmp_path / "sock")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(sock_path)
        with pytest.raises(hostfs.NotRegularFile, match=": a socket, not a regular file"):
            read(sock_path)
    finally:
        sock.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_device_node_in_a_tree_is_never_opened(host_tree):
    """An unpacked capture may hold device nodes: under a root the kind is checked before
    the open (opening a watchdog node arms it), so even /dev/zero's node is refused."""
    root, _outside = host_tree
    os.makedirs(os.path.join(root, "var/log"))
    os.mknod(os.path.join(root, "var/log/kern.log"), 0o600 | 0o020000, os.makedev(1, 5))
    path = hostfs.host_path(root, "/var/log/kern.log")
    opened = []
    real_open = os.open
    try:
        os.open = lambda *a, **k: opened.append(a[0]) or real_open(*a, **k)
        with pytest.raises(hostfs.NotRegularFile, match="a character device"):
            hostfs.read_text(path)
    finally:
        os.open = real_open
    assert opened == []


def test_isfile_names_a_fifo_where_a_file_is_looked_for(host_tree):
    root, _outside = host_tree
    os.mkfifo(os.path.join(root, "etc/fifo"))
    with hostfs.session() as reading:
        assert hostfs.isfile(hostfs.host_path(root, "/etc/fifo")) is False
        assert hostfs.isfile(hostfs.host_path(root, "/etc")) is False
    assert reading.problems == [("files", os.path.join(root, "etc/fifo") +
                                 ": a FIFO, not a regular file: taken as missing")]


# ---------------------------------------------------------------------------------------
# bounded reads


def test_read_over_the_cap_is_refused_naming_it(tmp_path):
    path = str(tmp_path / "big")
    with open(path, "wb") as handle:
        handle.write(b"x" * 11)
    assert hostfs.read_text(path, limit=11) == "x" * 11
    with pytest.raises(hostfs.TooLarge) as err:
        hostfs.read_text(path, limit=10)
    assert str(err.value) == path + ": 11 bytes, over the 10 bytes this read takes: not " \
        "read (a log or a runaway file where a small file belongs?)"
    # the default cap: a multi-GB sparse file is refused from its size, never read
    with open(path, "wb") as handle:
        handle.truncate(3 << 30)
    with pytest.raises(hostfs.TooLarge, match="3221225472 bytes, over the 4 MiB"):
        hostfs.read_bytes(path)


def test_open_read_cap_counts_bytes_read_and_seeks_free(tmp_path):
    """dkms compares the first and last MiB of a 100 MB module: seeking past the middle
    costs nothing against the cap; reading it all raises, the cap named."""
    path = str(tmp_path / "nvidia.ko")
    with open(path, "wb") as handle:
        handle.write(b"a" * (150 << 10) + b"b" * (150 << 10))
    with hostfs.open_read(path, "rb", limit=100 << 10) as handle:
        assert handle.read(10 << 10) == b"a" * (10 << 10)
        handle.seek(-(10 << 10), os.SEEK_END)
        assert handle.read() == b"b" * (10 << 10)
    with pytest.raises(hostfs.TooLarge, match="larger, over the 100 KiB this read takes"):
        with hostfs.open_read(path, "r", limit=100 << 10) as handle:
            for _line in handle:
                pass


def test_read_lines_skips_long_lines_and_reads_a_logs_newest_part(tmp_path):
    path = str(tmp_path / "kern.log")
    with open(path, "wb") as handle:
        handle.write(b"old line\n" + b"z" * 5000 + b"\nkept 1\r\n" + b"y" * 3000 + b"\nkept 2")
    with hostfs.read_lines(path, limit=1 << 20, line_limit=1024) as lines:
        assert list(lines) == ["old line", "kept 1", "kept 2"]
    assert lines.long_lines == 2 and lines.unread == 0
    assert lines.notes() == ["2 lines over 1 KiB skipped"]
    # tail: the newest 3100 bytes; the cut line at their start is not a line
    with hostfs.read_lines(path, limit=3100, line_limit=1024, tail=True) as lines:
        assert list(lines) == ["kept 1", "kept 2"]
    assert lines.unread == os.path.getsize(path) - 3100
    assert lines.notes() == ["1 line over 1 KiB skipped", "read only its last 3100 bytes "
                             "(its cap): %d older bytes not read" % lines.unread]


def test_read_lines_holds_no_line_of_a_huge_sparse_file(tmp_path):
    """A 3 GB single line (an unclean shutdown's log): only the cap is read, in chunks."""
    path = str(tmp_path / "kern.log")
    with open(path, "wb") as handle:
        handle.truncate(3 << 30)
        handle.seek(3 << 30)
        handle.write(b"\nlast line\n")
    with hostfs.read_lines(path, limit=4 << 20, tail=True) as lines:
        assert list(lines) == ["last line"]
    # the line cut at the start of the newest 4 MiB is no line (not counted as one)
    assert lines.long_lines == 0 and lines.unread == (3 << 30) + 11 - (4 << 20)


def test_read_lines_of_gzip_bounded_by_its_output(tmp_path):
    import gzip
    path = str(tmp_path / "kern.log.2.gz")
    with gzip.open(path, "wb") as handle:
        handle.write(b"line\n" * 1000)
    with hostfs.read_lines(path, limit=50, compressed=True) as lines:
        assert list(lines) == ["line"] * 10
    assert lines.unread is None and lines.notes() == ["read only its first 50 bytes (its cap)"]


# ---------------------------------------------------------------------------------------
# links resolved inside the root


def test_link_out_of_the_root_is_resolved_inside_it(host_tree):
    """``proc/cmdline`` -> /<outside>/secret reads <root>/<outside>/secret (absent), as the
    kernel in a chroot would: never the outside text."""
    root, outside = host_tree
    cmdline = os.path.join(root, "proc/cmdline")
    os.unlink(cmdline)
    os.symlink(os.path.join(outside, "secret"), cmdline)
    path = hostfs.host_path(root, "/proc/cmdline")
    assert hostfs.read_text(path) is None
    assert hostfs.read_bytes(path) is None
    assert hostfs.exists(path) is False and hostfs.lexists(path) and hostfs.islink(path)
    with pytest.raises(OSError) as err:
        hostfs.open_read(path)
    assert err.value.errno == errno.ENOENT and err.value.filename == path
    # the same target inside the tree is what it reads
    inner = os.path.join(root, outside.lstrip("/"))
    os.makedirs(inner)
    with open(os.path.join(inner, "secret"), "w") as handle:
        handle.write("inside text\n")
    assert hostfs.read_text(path) == "inside text"
    assert hostfs.realpath(path) == os.path.join(inner, "secret")


def test_relative_link_climbing_out_stops_at_the_root(host_tree):
    root, outside = host_tree
    up = "../" * (root.count("/") + 3)
    os.symlink(up + outside.lstrip("/") + "/secret", os.path.join(root, "etc/hostname"))
    os.symlink(up + outside.lstrip("/"), os.path.join(root, "etc/pve"))
    assert hostfs.read_text(hostfs.host_path(root, "/etc/hostname")) is None
    pve = hostfs.host_path(root, "/etc/pve")
    assert hostfs.isdir(pve) is False
    with pytest.raises(OSError) as err:
        hostfs.listdir(pve)
    assert err.value.errno == errno.ENOENT
    assert list(hostfs.walk(pve)) == []
    assert hostfs.readlink(pve) == up + outside.lstrip("/")


def test_folder_links_inside_the_root_are_followed(host_tree):
    """sysfs' own links (``bus/pci/devices/X`` -> ``../../../devices/...``) and a capture's
    absolute ones resolve as on the host; names and walks keep the path asked for."""
    root, _outside = host_tree
    dev = os.path.join(root, "sys/devices/pci0000:00/0000:00:01.0")
    os.makedirs(dev)
    with open(os.path.join(dev, "vendor"), "w") as handle:
        handle.write("0x10de\n")
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"))
    os.symlink("../../../devices/pci0000:00/0000:00:01.0",
               os.path.join(root, "sys/bus/pci/devices/0000:00:01.0"))
    os.symlink("/sys/devices/pci0000:00", os.path.join(root, "sys/abs"))
    os.symlink("loop", os.path.join(root, "sys/loop"))
    for session in (False, True):
        with hostfs.session() if session else _nothing():
            link = hostfs.host_path(root, "/sys/bus/pci/devices/0000:00:01.0")
            assert hostfs.read_text(link + "/vendor") == "0x10de"
            assert hostfs.read_int(hostfs.host_path(root, "/sys/abs/0000:00:01.0/vendor")) \
                == 0x10de
            assert hostfs.isdir(link) and hostfs.islink(link)
            assert hostfs.listdir(link) == ["vendor"]
            assert [w[0] for w in hostfs.walk(link)] == [link]
            assert hostfs.realpath(link) == dev
            assert hostfs.isdir(hostfs.host_path(root, "/sys/loop")) is False
            with pytest.raises(OSError) as err:
                hostfs.read_text(hostfs.host_path(root, "/sys/loop/x"))
            assert err.value.errno == errno.ELOOP


class _nothing(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_folder_turned_into_a_link_out_is_resolved_again(host_tree):
    """Outside a session a folder's resolution is reused only while it reaches the same
    folder: one replaced by a link out of the tree between two reads is resolved again."""
    root, outside = host_tree
    path = hostfs.host_path(root, "/proc/cmdline")
    assert hostfs.read_text(path).startswith("BOOT_IMAGE=")
    os.rename(os.path.join(root, "proc"), os.path.join(root, "proc.old"))
    os.rename(os.path.join(outside, "secret"), os.path.join(outside, "cmdline"))
    os.symlink(outside, os.path.join(root, "proc"))
    assert hostfs.read_text(path) is None
    with hostfs.session():
        assert hostfs.read_text(path) is None
