"""unpack: a capture tarball unpacked into a new folder only after every member is checked
(folders, plain files and links inside the tree; no absolute names, ``..``, devices, FIFOs,
duplicates, links out, members over their size cap), absolute links made relative, a FIFO
or non-tarball refused at the door. Tarballs are built here with tarfile, as
capture.CaptureBuilder writes them; hostile captures: tests/hostile/test_locks_everywhere.py."""

import io
import os
import tarfile

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import capture_unpack


def _tar(path, members):
    """``members``: (name, kind, data-or-target) with kind file, dir, link, fifo."""
    with tarfile.open(str(path), "w:gz") as tar:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "link": tarfile.SYMTYPE,
                         "fifo": tarfile.FIFOTYPE, "hard": tarfile.LNKTYPE}[kind]
            if kind in ("link", "hard"):
                info.linkname = value
            tar.addfile(info)
    return str(path)


GOOD = [("proc", "dir", None), ("proc/cmdline", "file", b"root=ZFS=rpool/ROOT/pve-1\n"),
        ("etc", "dir", None), ("etc/pve", "dir", None),
        ("etc/pve/qemu-server", "link", "/etc/pve/nodes/pve1/qemu-server"),
        ("etc/pve/nodes/pve1/qemu-server", "dir", None)]


def test_a_good_capture_unpacks_with_absolute_links_made_relative(tmp_path):
    dest = str(tmp_path / "root")
    got, count = capture_unpack.unpack(_tar(tmp_path / "c.tar.gz", GOOD), dest)
    assert got == dest and count == len(GOOD)
    with open(os.path.join(dest, "proc/cmdline"), "rb") as handle:
        assert handle.read() == b"root=ZFS=rpool/ROOT/pve-1\n"
    assert os.readlink(os.path.join(dest, "etc/pve/qemu-server")) == "nodes/pve1/qemu-server"


def test_the_default_destination_is_a_private_scratch_folder(tmp_path):
    dest, _count = capture_unpack.unpack(_tar(tmp_path / "c.tar.gz", GOOD))
    try:
        assert os.path.basename(dest) == "root"
        assert os.path.basename(os.path.dirname(dest)).startswith("gpuhost-capture-")
        assert oct(os.stat(dest).st_mode & 0o777) == oct(0o700)
    finally:
        capture_unpack.remove_scratch(dest)
    assert not os.path.exists(os.path.dirname(dest))


@pytest.mark.parametrize("member,why", [
    (("/etc/passwd", "file", b"x"), "an absolute name"),
    (("proc/../../x", "file", b"x"), "a name with .."),
    (("dev/fifo", "fifo", None), "dev/fifo: "),
    (("etc/evil", "link", "../../../etc"), "leads out of the folder"),
    (("proc/cmdline", "file", b"again"), "a second member of that name"),
    (("proc/cmdline/x", "file", b"x"), "which is a file, not a folder"),
])
def test_a_bad_member_is_refused_and_nothing_is_written(tmp_path, member, why):
    dest = tmp_path / "root"
    with pytest.raises(capture_unpack.UnpackError) as err:
        capture_unpack.unpack(_tar(tmp_path / "c.tar.gz", GOOD + [member]), str(dest))
    assert why in str(err.value) and "nothing was written" in str(err.value)
    assert not dest.exists()


def test_the_size_caps(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_unpack, "MAX_MEMBER_BYTES", 8)
    with pytest.raises(capture_unpack.UnpackError, match="over the 0 MiB a capture member can be"):
        capture_unpack.unpack(_tar(tmp_path / "a.tar.gz", [("big", "file", b"x" * 9)]),
                              str(tmp_path / "a"))
    monkeypatch.setattr(capture_unpack, "MAX_MEMBER_BYTES", 1 << 20)
    monkeypatch.setattr(capture_unpack, "MAX_TOTAL_BYTES", 10)
    with pytest.raises(capture_unpack.UnpackError, match="of content: not a capture"):
        capture_unpack.unpack(_tar(tmp_path / "b.tar.gz", [("a", "file", b"x" * 6),
                                                           ("b", "file", b"x" * 6)]),
                              str(tmp_path / "b"))
    monkeypatch.setattr(capture_unpack, "MAX_TOTAL_BYTES", 1 << 20)
    monkeypatch.setattr(capture_unpack, "MAX_MEMBERS", 2)
    with pytest.raises(capture_unpack.UnpackError, match="more than 2 members"):
        capture_unpack.unpack(_tar(tmp_path / "c.tar.gz", GOOD), str(tmp_path / "c"))


def test_many_refusals_are_named_up_to_the_limit(tmp_path):
    bad = [("/abs%d" % n, "file", b"x") for n in range(capture_unpack.MAX_NAMED + 3)]
    with pytest.raises(capture_unpack.UnpackError, match="refused 23 members, .*; and 3 more"):
        capture_unpack.unpack(_tar(tmp_path / "c.tar.gz", bad), str(tmp_path / "root"))


def test_a_fifo_or_a_non_tarball_is_refused_at_the_door(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with pytest.raises(capture_unpack.UnpackError, match="is not a regular file"):
        capture_unpack.unpack(fifo)
    text = tmp_path / "notes.txt"
    text.write_text("not a tarball\n")
    with pytest.raises(capture_unpack.UnpackError, match="is not a tarball"):
        capture_unpack.unpack(str(text))
    with pytest.raises(capture_unpack.UnpackError, match="capture .*none"):
        capture_unpack.unpack(str(tmp_path / "none"))


@pytest.mark.parametrize("fmt,mode", [(tarfile.GNU_FORMAT, "w:gz"), (tarfile.PAX_FORMAT, "w:gz"),
                                      (tarfile.PAX_FORMAT, "w:bz2"), (tarfile.PAX_FORMAT, "w:xz"),
                                      (tarfile.PAX_FORMAT, "w")])
def test_long_names_and_links_within_the_header_cap_unpack(tmp_path, fmt, mode):
    # GNU tar's long name/link headers ('L', 'K') and pax records (host_capture writes
    # PAX_FORMAT): a 300-character path and link target are well under MAX_HEADER_BYTES
    deep = "/".join(["d" * 60] * 4)
    path = str(tmp_path / "c.tar")
    with tarfile.open(path, mode, format=fmt) as tar:
        for folder in ["/".join(["d" * 60] * n) for n in range(1, 5)]:
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        info = tarfile.TarInfo(deep + "/" + "f" * 100)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
        link = tarfile.TarInfo("l" * 120)
        link.type, link.linkname = tarfile.SYMTYPE, deep + "/" + "f" * 100
        tar.addfile(link)
    dest, count = capture_unpack.unpack(path, str(tmp_path / "root"))
    assert count == 6
    with open(os.path.join(dest, "l" * 120), "rb") as handle:
        assert handle.read() == b"abc"


def test_a_header_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_unpack, "MAX_HEADER_BYTES", 1024)
    path = str(tmp_path / "c.tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("etc")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        info = tarfile.TarInfo("etc/" + "n" * 1100)
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(capture_unpack.UnpackError, match=r"a GNU long name at byte 512 of the tar "
                       r"stream claims 1536 bytes, over the 1 KiB"):
        capture_unpack.unpack(path, str(tmp_path / "root"))
    assert not os.path.exists(str(tmp_path / "root"))


def test_a_pax_number_of_5000_digits_is_a_damaged_capture_not_a_crash(tmp_path):
    # "%d path=..." with a 5,000-digit length: Python's int() refuses it (ValueError)
    record = b"9" * 5000 + b" path=x\n"
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, len(record)
    block = header.tobuf(tarfile.USTAR_FORMAT)
    data = block + record + b"\0" * (-len(record) % 512) + tarfile.TarInfo("x").tobuf() + \
        b"\0" * 1024
    path = tmp_path / "c.tar"
    path.write_bytes(data)
    with pytest.raises(capture_unpack.UnpackError, match="is (damaged|not a tarball)"):
        capture_unpack.unpack(str(path), str(tmp_path / "root"))
