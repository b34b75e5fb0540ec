"""Device nodes at container start (issue 25 item 5): the devnodes fact, its capture and
live reading (the findings: checks/test_device_nodes.py)."""

import io
import os
import stat
import tarfile

from fixtures import devnodes as dn
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes,
)

WANTED = hosts.common_wanted(host="pve-gpu01")
IDS = ("lxc_device_node_missing", "lxc_device_node_major", "lxc_dev_gid_unknown",
       "device_nodes_unit_missing", "lxc_dev_char_links_missing")


_host = dn.gpu_container_host


def _mine(result):
    return [f for f in result["findings"] if f["id"] in IDS]


def test_capture_round_trip_keeps_the_listing(tmp_path):
    src = _host(tmp_path, dn.clean_nodes(without=["/dev/nvidia-uvm"]), unit=False)
    builder, original, _recorded = host_capture.capture(src, WANTED)
    buf = io.BytesIO()
    builder.write(buf, "{}")
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(str(tmp_path / "unpacked"), filter="tar")
    assert ".gpuhost-capture/dev-nodes" in names
    again = audit.audit(str(tmp_path / "unpacked"), WANTED)
    assert _mine(again) == _mine(original) and len(_mine(again)) == 2


def test_live_listing_reads_kinds_and_links_under_its_root(tmp_path, monkeypatch):
    root = tmp_path / "live"
    (root / "dev/char").mkdir(parents=True)
    (root / "dev/nvidia-caps").mkdir()
    (root / "dev/nvidia-uvm").write_text("")                 # a placeholder file
    os.symlink("../nvidia0", str(root / "dev/char/195:0"))
    (root / "dev/nvidia0").write_text("")
    real_stat = device_nodes.hostfs.stat

    def fake_stat(path):
        # tmp files stand in for the char device (tests never make device nodes)
        if path.endswith("/dev/nvidia0"):
            return os.stat_result((stat.S_IFCHR | 0o666, 0, 0, 1, 0, 0, 0, 0, 0, 0))
        return real_stat(path)

    monkeypatch.setattr(device_nodes.hostfs, "stat", fake_stat)
    monkeypatch.setattr(device_nodes.os, "major", lambda rdev: 195)
    monkeypatch.setattr(device_nodes.os, "minor", lambda rdev: 0)
    text = device_nodes.listing(str(root), ["/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidia-caps",
                                            "/dev/nvidia-modeset"])
    assert text.splitlines() == ["c 195:0 /dev/nvidia0", "l ../nvidia0 /dev/char/195:0",
                                 "f - /dev/nvidia-uvm", "d - /dev/nvidia-caps",
                                 "- - /dev/nvidia-modeset"]
    parsed = device_nodes.parse_listing(text)
    assert parsed["/dev/nvidia0"] == {"kind": "c", "major": 195, "minor": 0, "target": None}
    assert parsed["/dev/nvidia-modeset"]["kind"] == "missing"


def test_what_commands_create():
    assert device_nodes._creates("/usr/bin/nvidia-modprobe -u -c=0") == {"uvm"}
    assert device_nodes._creates("-/usr/bin/nvidia-modprobe -c0 -u && chmod 666 x") == {"uvm"}
    assert device_nodes._creates("/usr/bin/nvidia-modprobe -m") == {"modeset"}
    assert device_nodes._creates("/usr/bin/nvidia-modprobe -u") == set()   # loads, makes none
    assert device_nodes._creates("/bin/sh -c 'nvidia-smi -L'") == {"gpus"}


def _pairs(result):
    return sorted((f["id"], f["subject"]) for f in result["findings"])


def test_the_seed_host_with_its_nodes_gives_none_and_uvm_missing_gives_exactly_one(tmp_path):
    # the seed host (fixtures/hosts.py) as golden pve-gpu01, first with the nodes its
    # driver made, then with /dev/nvidia-uvm missing: exactly one finding more
    plain = tmp_path / "plain"
    hosts.seed_health_host(str(plain))
    base = _pairs(audit.audit(str(plain), WANTED))
    clean = tmp_path / "clean"
    hosts.seed_health_host(str(clean))
    dn.write_listing(clean, dn.clean_nodes())
    result = audit.audit(str(clean), WANTED)
    assert result["checks"]["device_nodes"]["status"] == "ok"
    assert _pairs(result) == base
    broken = tmp_path / "broken"
    hosts.seed_health_host(str(broken))
    dn.write_listing(broken, dn.clean_nodes(without=["/dev/nvidia-uvm"]))
    extra = sorted(set(_pairs(audit.audit(str(broken), WANTED))) - set(base))
    assert extra == [("lxc_device_node_missing", "lxc 129 /dev/nvidia-uvm")]


def test_packaged_units_are_read_only_when_nvidias(tmp_path, monkeypatch):
    root = _host(tmp_path, unit=False)
    dn.write_unit(root, "gpu-init.service", folder="/usr/lib/systemd/system")
    outputs_seen = []
    real = device_nodes.hostfs.read_text

    def spy(path, *args, **kwargs):
        outputs_seen.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(device_nodes.hostfs, "read_text", spy)
    result = audit.audit(root, WANTED)
    monkeypatch.undo()
    assert not [p for p in outputs_seen if p.endswith("/gpu-init.service")]
    assert [f["id"] for f in _mine(result)] == ["device_nodes_unit_missing"]
    dn.write_unit(root, "nvidia-device-nodes.service", folder="/usr/lib/systemd/system")
    assert _mine(audit.audit(root, WANTED)) == []
