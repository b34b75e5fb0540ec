"""lxc_cgroup_devices module: main() against the seed host after the kernel upgrade."""

import os

from ansible_collections.gpuhost.tuning.plugins.modules import lxc_cgroup_devices
from fixtures import lxc as lxcfix
from modrun import run_module
from conftest import TESTS


def run(root, check_mode=False, diff=False, **args):
    args.setdefault("root", str(root))
    return run_module(lxc_cgroup_devices, args, check_mode=check_mode, diff=diff)


def read(root, vmid=129):
    with open(os.path.join(str(root), "etc/pve/lxc/%d.conf" % vmid), "rb") as handle:
        return handle.read().decode()


def test_repairs_the_seed_container(tmp_path):
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, vmid=129, diff=True)
    assert result["changed"] is True
    assert result["added"] == ["c 509:* rwm", "c 238:* rwm"]
    assert result["removed"] == ["c 504:* rwm", "c 507:* rwm"]
    assert result["majors"] == {"nvidia": 195, "nvidia-uvm": 509, "nvidia-caps": 238}
    assert result["onboot"] is False
    assert "c 504:* rwm" in result["diff"]["before"].split("[pve:pending]")[0]
    assert "c 504:* rwm" not in result["diff"]["after"].split("[pve:pending]")[0]
    text = read(tmp_path)
    assert text == result["diff"]["after"]
    live, rest = text.split("\n[pve:pending]", 1)
    assert "lxc.cgroup2.devices.allow: c 509:* rwm\n" in live + "\n"
    assert "c 504" not in live and "c 507" not in live
    old_rest = lxcfix.container_129_text().split("\n[pve:pending]", 1)[1]
    assert rest == old_rest  # pending and snapshot sections byte for byte
    again = run(tmp_path, vmid=129)
    assert again["changed"] is False and again["added"] == [] and again["removed"] == []
    assert read(tmp_path) == text


def test_order_of_other_lines_kept(tmp_path):
    lxcfix.seed_host(tmp_path)
    run(tmp_path, vmid=129)
    new = [ln for ln in read(tmp_path).splitlines() if "devices.allow" not in ln]
    old = [ln for ln in lxcfix.container_129_text().splitlines() if "devices.allow" not in ln]
    assert new == old


def test_check_mode_is_byte_identical_and_shows_the_diff(tmp_path, snapshot_tree):
    lxcfix.seed_host(tmp_path)
    before = snapshot_tree(str(tmp_path))
    result = run(tmp_path, vmid=129, check_mode=True, diff=True, backup=True)
    assert result["changed"] is True and "backup_file" not in result
    assert "c 509:* rwm" in result["diff"]["after"]
    assert snapshot_tree(str(tmp_path)) == before


def test_no_diff_key_without_diff_mode(tmp_path):
    lxcfix.seed_host(tmp_path)
    assert "diff" not in run(tmp_path, vmid=129)


def test_missing_driver_fails_and_writes_nothing(tmp_path, snapshot_tree):
    lxcfix.proc_devices(tmp_path, "after", without=("nvidia-uvm",))
    lxcfix.container_129(tmp_path)
    before = snapshot_tree(str(tmp_path))
    result = run(tmp_path, vmid=129)
    assert result["failed"] is True
    assert "nvidia-uvm not registered in /proc/devices" in result["msg"]
    assert "nvidia-modprobe -u -c=0" in result["msg"]
    assert "129.conf" in result["msg"]
    assert snapshot_tree(str(tmp_path)) == before


def test_missing_skip(tmp_path):
    lxcfix.proc_devices(tmp_path, "after", without=("nvidia-uvm",))
    lxcfix.container_129(tmp_path)
    result = run(tmp_path, vmid=129, missing="skip")
    assert result["changed"] and result["missing"] == ["nvidia-uvm"]
    assert result["added"] == ["c 238:* rwm"]
    assert result["removed"] == ["c 504:* rwm", "c 507:* rwm"]


def test_remove_stale_false_keeps_old_rules(tmp_path):
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, vmid=129, remove_stale=False)
    assert result["removed"] == [] and result["added"] == ["c 509:* rwm", "c 238:* rwm"]
    assert "c 504:* rwm" in read(tmp_path).split("[pve:pending]")[0]
    olds = {o["major"]: o["registered_as"] for o in result["other_allowed"]}
    assert olds == {504: [], 507: [], 226: ["drm"]}


def test_unknown_vmid_fails_clearly(tmp_path):
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, vmid=131)
    assert result["failed"]
    assert "no config for container 131" in result["msg"]
    assert "containers here: 129, 130" in result["msg"]


def test_path_option_and_config_without_rules(tmp_path):
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, path="/etc/pve/lxc/130.conf")
    assert result["onboot"] is True
    assert result["added"] == ["c 195:* rwm", "c 509:* rwm", "c 238:* rwm"]
    lines = read(tmp_path, 130).splitlines()
    assert lines[-4:-3] == ["unprivileged: 1"]
    assert lines[-3:] == ["lxc.cgroup2.devices.allow: c %s:* rwm" % m for m in (195, 509, 238)]


def test_backup_keeps_the_old_bytes(tmp_path):
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, vmid=129, backup=True)
    backup = result["backup_file"]
    assert os.path.dirname(backup) == os.path.join(str(tmp_path), "etc/pve/lxc")
    assert os.path.basename(backup).startswith("129.conf.") and backup.endswith("~")
    with open(backup) as handle:
        assert handle.read() == lxcfix.container_129_text()
    # a backup name is not a config PVE (or list_configs) would pick up
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import (
        list_configs,
    )
    assert [v for v, _p in list_configs(str(tmp_path))] == [129, 130]


def test_write_without_chmod(tmp_path, monkeypatch):
    lxcfix.seed_host(tmp_path)
    calls = []
    monkeypatch.setattr(os, "chmod", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(os, "chown", lambda *a, **k: calls.append(a))
    result = run(tmp_path, vmid=129, backup=True)
    assert result["changed"] and calls == []


def test_extra_drivers_and_access(tmp_path):
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, vmid=129, access="rw",
                 drivers=["nvidia", "nvidia-uvm", "nvidia-caps", "nvidia-caps-imex-channels"])
    assert result["majors"]["nvidia-caps-imex-channels"] == 237
    assert result["added"] == ["c 509:* rw", "c 238:* rw", "c 237:* rw"]


def test_missing_proc_devices_fails(tmp_path):
    lxcfix.container_129(tmp_path)
    result = run(tmp_path, vmid=129)
    assert result["failed"] and "/proc/devices is missing" in result["msg"]


def test_ansible_doc_renders_and_documents_every_result_key(tmp_path):
    import json
    import subprocess
    import sys
    tests = TESTS
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(tests, "output", "pathlink"))
    doc_bin = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([doc_bin, "--json", "gpuhost.tuning.lxc_cgroup_devices"], env=env,
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)["gpuhost.tuning.lxc_cgroup_devices"]
    assert set(doc["doc"]["options"]) == {"vmid", "path", "config_dir", "drivers", "access",
                                          "remove_stale", "previous_majors", "missing",
                                          "backup", "root"}
    assert doc["doc"]["options"]["drivers"]["default"] == ["nvidia", "nvidia-uvm", "nvidia-caps"]
    lxcfix.seed_host(tmp_path)
    result = run(tmp_path, vmid=129, backup=True, diff=True)
    assert set(result) - {"changed", "invocation"} <= set(doc["return"])


def _proc_devices_with(root, major, name):
    """The seed's /proc/devices after the upgrade, with ``major`` now registered as ``name``
    (a new kernel handing an old GPU major to another driver)."""
    text = lxcfix.proc_devices_text("after")
    assert "\n%3d " % major not in text
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines[1:], 1)
              if not line.strip() or int(line.split()[0]) > major)
    lines.insert(at, "%3d %s" % (major, name))
    path = os.path.join(str(root), "proc", "devices")
    os.chmod(path, 0o644)
    with open(path, "w") as handle:
        handle.write("\n".join(lines))


def test_previous_major_taken_by_another_driver_is_removed(tmp_path):
    # Seen in the VM lab: gpustub had 244 on 6.1.0-55; on 6.1.0-56 nvme registered 244 and
    # gpustub got 246. Registered under some name, 244 was not stale, and the repaired GPU
    # container kept access to the host's NVMe controller.
    lxcfix.seed_host(tmp_path)
    _proc_devices_with(tmp_path, 504, "nvme")
    without = run(tmp_path, vmid=129, check_mode=True)
    assert "c 504:* rwm" not in without["removed"]
    assert {"rule": "c 504:* rwm", "major": 504, "registered_as": ["nvme"]} in \
        without["other_allowed"]

    result = run(tmp_path, vmid=129, previous_majors=[195, 504, 507])
    assert result["changed"] is True
    assert result["removed"] == ["c 504:* rwm", "c 507:* rwm"]
    assert result["moved"] == [{"major": 504, "registered_as": ["nvme"]},
                               {"major": 507, "registered_as": []}]
    assert result["added"] == ["c 509:* rwm", "c 238:* rwm"]
    live = read(tmp_path).split("\n[pve:pending]", 1)[0]
    assert "c 504" not in live and "c 195:* rwm" in live and "c 226:* rwm" in live
    assert not any(o["major"] == 504 for o in result["other_allowed"])
    # a previous major a listed driver still has is kept; remove_stale off keeps them all
    again = run(tmp_path, vmid=129, previous_majors=[509, 238])
    assert again["changed"] is False and again["moved"] == []


def test_previous_majors_do_nothing_without_remove_stale(tmp_path):
    lxcfix.seed_host(tmp_path)
    _proc_devices_with(tmp_path, 504, "nvme")
    result = run(tmp_path, vmid=129, previous_majors=[504], remove_stale=False)
    assert result["removed"] == [] and result["moved"] == []
    assert "c 504:* rwm" in read(tmp_path).split("\n[pve:pending]", 1)[0]


def test_owner_and_group_kept_on_a_plain_filesystem(tmp_path):
    # Seen in the VM lab: /etc/pve/lxc/129.conf root:www-data 0640 came back root:root
    # (the temporary file is the writer's; pmxcfs shows root:www-data by itself, a plain
    # filesystem does not).
    if os.geteuid() != 0:
        import pytest
        pytest.skip("needs root to give the config another group")
    lxcfix.seed_host(tmp_path)
    path = os.path.join(str(tmp_path), "etc/pve/lxc/129.conf")
    os.chown(path, 0, 33)
    result = run(tmp_path, vmid=129)
    assert result["changed"] is True
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 33, 0o640)


def test_pmxcfs_refusing_chown_is_not_a_failure(tmp_path, monkeypatch):
    # pmxcfs shows root:www-data by itself and refuses chown: the write still succeeds.
    if os.geteuid() != 0:
        import pytest
        pytest.skip("needs root to give the config another group")
    lxcfix.seed_host(tmp_path)
    path = os.path.join(str(tmp_path), "etc/pve/lxc/129.conf")
    os.chown(path, 0, 33)  # the file before the write, as pmxcfs shows it: root:www-data

    calls = []

    def chown(*args):
        calls.append(args)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chown", chown)
    result = run(tmp_path, vmid=129)
    assert result["changed"] is True
    assert [c[1:] for c in calls] == [(0, 33)]  # one attempt, on the file being written
    calls.clear()
    lxcfix.seed_host(tmp_path)  # the old rules again, owned root:root like the writer
    os.lchown(path, 0, 0)
    assert run(tmp_path, vmid=129)["changed"] is True
    assert calls == []  # owner unchanged: no chown at all


def test_a_linked_config_is_written_through_its_link(tmp_path):
    lxcfix.seed_host(tmp_path)
    conf = os.path.join(str(tmp_path), "etc/pve/lxc/129.conf")
    others = sorted(os.listdir(os.path.dirname(conf)))
    real = os.path.join(str(tmp_path), "etc/pve/shared/gpu-ct.conf")
    os.makedirs(os.path.dirname(real))
    os.rename(conf, real)
    os.symlink("../shared/gpu-ct.conf", conf)
    result = run(tmp_path, vmid=129)
    assert result["changed"] is True and result["added"] == ["c 509:* rwm", "c 238:* rwm"]
    assert os.readlink(conf) == "../shared/gpu-ct.conf"  # still the operator's link
    with open(real) as handle:
        assert "c 509:* rwm" in handle.read()
    assert sorted(os.listdir(os.path.dirname(conf))) == others  # no file beside the link
    assert run(tmp_path, vmid=129)["changed"] is False
