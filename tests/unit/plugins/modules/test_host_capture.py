"""Module host_capture: collect mode packs what the audit reads under ``root`` into a
base64 tar.gz; write mode writes it on the controller once (atomic, changed only when the
bytes differ) and refuses an archive that is not base64."""

import base64
import io
import tarfile

from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import host_capture

WANTED = hosts.common_wanted()


def test_host_capture_module_collect_and_write(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    hosts.vm_host(src)
    collected = run_module(host_capture, {"root": str(src), "sysctl": WANTED["sysctl"]})
    assert "failed" not in collected and collected["files"] > 20
    data = base64.b64decode(collected["archive"])
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
    assert ".gpuhost-capture.json" in names
    assert "sys/bus/pci/devices/0000:00:10.0" in names
    dest = tmp_path / "out" / "vm-capture.tar.gz"
    written = run_module(host_capture, {"archive": collected["archive"], "dest": str(dest)})
    assert written["changed"] is True and dest.read_bytes() == data
    again = run_module(host_capture, {"archive": collected["archive"], "dest": str(dest)})
    assert again["changed"] is False
    bad = run_module(host_capture, {"archive": "not base64!", "dest": str(dest)})
    assert bad["failed"] is True


def test_write_mode_in_check_mode_writes_nothing(tmp_path):
    data = base64.b64encode(b"\x1f\x8b not really a tarball").decode("ascii")
    dest = tmp_path / "out" / "gpu07-capture.tar.gz"
    res = run_module(host_capture, {"archive": data, "dest": str(dest)}, check_mode=True)
    assert res["changed"] is True and not dest.parent.exists()


def test_archive_and_dest_go_together_and_paths_stay_inside_root(tmp_path):
    res = run_module(host_capture, {"archive": "AAAA"})
    assert res["failed"] and "archive" in res["msg"] and "dest" in res["msg"]
    res = run_module(host_capture, {"root": str(tmp_path), "lxc_config_dir": "/../etc"})
    assert res["failed"] and "outside root" in res["msg"]


def test_a_dest_that_cannot_be_written_is_named(tmp_path):
    (tmp_path / "a-file").write_text("")
    dest = tmp_path / "a-file" / "x.tar.gz"
    res = run_module(host_capture, {"archive": "AAAA", "dest": str(dest)})
    assert res["failed"] and res["msg"].startswith("host_capture: cannot write %s: " % dest)
