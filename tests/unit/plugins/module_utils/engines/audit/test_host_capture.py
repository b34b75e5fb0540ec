"""capture: packing what the audit reads under a root into the capture tarball (big files
as a digest, links followed inside the root, a loop stopped) and the read recorder that
notes every read through hostfs while active (moved from test_audit.py, which keeps the
capture round trip through the audit)."""

import os
import shutil

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture

WANTED = hosts.common_wanted(host="pve-gpu01")


def test_capture_packs_big_files_as_a_digest(tmp_path):
    root = tmp_path / "r"
    (root / "proc").mkdir(parents=True)
    big = root / "proc/cmdline"
    big.write_bytes(b"x" * (host_capture.CAPTURE_MAX_FILE + 10))
    builder, _result, _recorded = host_capture.capture(str(root), WANTED)
    content = builder.entries["proc/cmdline"][3]
    assert content.startswith(b"gpuhost-capture: file of %d bytes, sha256 "
                              % (host_capture.CAPTURE_MAX_FILE + 10))


def test_capture_builder_follows_links_inside_the_root_and_stops_at_a_loop(tmp_path):
    root = tmp_path / "r"
    (root / "sys/devices/pci0000:00/0000:00:01.0").mkdir(parents=True)
    (root / "sys/devices/pci0000:00/0000:00:01.0/vendor").write_text("0x10de\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    # relative link from its own folder; an absolute one points into the tree, not the host
    os.symlink("../../../devices/pci0000:00/0000:00:01.0",
               str(root / "sys/bus/pci/devices/0000:00:01.0"))
    os.symlink("/sys/devices/pci0000:00", str(root / "sys/abs"))
    os.symlink("loop", str(root / "sys/loop"))
    builder = host_capture.CaptureBuilder(str(root))
    builder.add("/sys/bus/pci/devices/0000:00:01.0/vendor", "read")
    builder.add("/sys/abs/0000:00:01.0/vendor", "read")
    builder.add("/sys/loop/x", "read")
    entries = builder.entries
    assert entries["sys/bus/pci/devices/0000:00:01.0"][0] == "link"
    assert entries["sys/devices/pci0000:00/0000:00:01.0/vendor"][::3] == ("file", b"0x10de\n")
    assert entries["sys/abs"][::3] == ("link", "/sys/devices/pci0000:00")
    assert entries["sys/loop"][::3] == ("link", "loop")
    assert not [rel for rel in entries if rel.startswith("sys/loop/")]


def test_recorder_notes_reads_through_hostfs_only_while_active(tmp_path):
    import builtins
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
    original = builtins.open, os.listdir, os.stat, os.lstat, os.readlink, os.scandir
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/a").write_text("x\n")
    recorder = host_capture.ReadRecorder(str(tmp_path))
    with pytest.raises(ValueError):
        with recorder:
            # Python's own functions are left alone: only the readers' hostfs calls count
            assert (builtins.open, os.listdir, os.stat, os.lstat, os.readlink,
                    os.scandir) == original
            hostfs.read_text(str(tmp_path / "etc/a"))
            hostfs.listdir(str(tmp_path / "etc"))
            hostfs.isdir(str(tmp_path / "missing"))
            hostfs.atomic_write(str(tmp_path / "etc/written"), "y")
            raise ValueError("boom")
    hostfs.read_text(str(tmp_path / "etc/later"))
    assert recorder.paths == {"/etc/a": "read", "/etc": "list", "/missing": "stat"}
    shutil.rmtree(str(tmp_path))
