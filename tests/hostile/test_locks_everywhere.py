"""The locks, as a class: every module with a changing side refuses while another run holds
the run lock (the list of modules is the collection's own, so a new one must be sorted into
changing or read-only here); locks and temporary files never land outside the root; a
lock's holder fields cannot lock its own run out; a capture tarball is unpacked for the
offline audit without recreating special files or anything outside the tree."""

import base64
import io
import json
import os
import stat
import tarfile
import tempfile
import threading

import pytest
from conftest import TESTS
from digest import changed, digest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock as runlock
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import capture_unpack
from ansible_collections.gpuhost.tuning.plugins.modules import (
    audit_timer,
    boot_service,
    container_verify,
    cpuidle_state,
    dkms_build,
    driver_stage,
    gpu_recover,
    host_audit,
    host_capture,
    host_tune,
    kernel_cmdline,
    lxc_cgroup_devices,
    run_lock,
    setpci_maxreadreq,
    sysctl_settings,
    tuning_snapshot,
    vm_verify,
)

MODULES = os.path.join(os.path.dirname(TESTS), "plugins", "modules")
SYSCTL = {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
HOLDER = {"controller": "ctl9", "user": "mallory", "play": "Another run",
          "purpose": "gpuhost.tuning.reboot_verify"}
LOCK = "run/gpuhost-tuning.run.lock"

# Every module with a changing side, with arguments for each state that changes something
# (valid values: what refuses them must be the lock).
CHANGING = {
    "host_tune": (host_tune, [{"sysctl": SYSCTL}]),
    "sysctl_settings": (sysctl_settings, [{"values": SYSCTL}, {"state": "absent"}]),
    "cpuidle_state": (cpuidle_state, [{"deeper_than": "C1"},
                                      {"deeper_than": "C1", "state": "enabled"}]),
    "boot_service": (boot_service, [{}, {"state": "absent"}]),
    "kernel_cmdline": (kernel_cmdline, [{"params": {"amd_pstate": "active"}}]),
    "lxc_cgroup_devices": (lxc_cgroup_devices, [{"vmid": 129}]),
    "container_verify": (container_verify, [{"vmid": 129}]),
    "dkms_build": (dkms_build, [{"name": "nvidia", "executable": "/bin/true"},
                                {"name": "nvidia", "executable": "/bin/true",
                                 "state": "built"}]),
    "driver_stage": (driver_stage, [{"version": "590.48.01", "source": "apt",
                                     "state": {"host": {}, "containers": []},
                                     "dkms": "/bin/true", "apt_get": "/bin/true",
                                     "apt_cache": "/bin/true"},
                                    {"version": "590.48.01", "source": "run",
                                     "state": {"host": {}, "containers": []},
                                     "dkms": "/bin/true", "installer": "/bin/true"}]),
    "setpci_maxreadreq": (setpci_maxreadreq, [{"state": "present"}]),
    "tuning_snapshot": (tuning_snapshot, [{"state": "present"}, {"state": "restore"}]),
    "vm_verify": (vm_verify, [{}]),
    "gpu_recover": (gpu_recover, [{"gpus": ["0000:01:00.0"]}]),
    "audit_timer": (audit_timer, [{"host": "seed",
                                   "textfile": "/var/lib/prometheus/node-exporter/x.prom"},
                                  {"state": "absent"}]),
}
# Modules that never change the host they run on, and why (a query state of a changing
# module is read-only too: setpci_maxreadreq query, tuning_snapshot query).
READ_ONLY = {
    "host_audit": "reads only (a capture is unpacked into its own temporary folder)",
    "host_capture": "collects in memory; write mode writes the tarball on the controller",
    "boot_entries": "reads the boot loader's files (mounts ESPs read-only and unmounts)",
    "kernel_state": "reads only",
    "host_kind": "reads a few small files (what the host is)",
    "driver_state": "reads only (host files and container roots, never starts one)",
    "initramfs_check": "lists initramfs images, never regenerates",
    "vfio_initramfs_check": "reads VM configs and sysfs, lists one initramfs image",
    "cuda_probe": "reads and GPU memory copies only",
    "post_boot_verify": "reads only",
    "audit_report": "reports on the controller",
    "report_merge": "reports on the controller (reads and writes controller folders)",
    "tune_report": "reports on the controller",
    "reboot_report": "reports on the controller",
    "rollout_report": "reports on the controller",
    "recover_report": "reports on the controller",
    "plan_report": "writes the plan on the controller (host_tune ran in check mode)",
    "apply_report": "reads the plan and writes the apply report on the controller",
    "run_lock": "is the lock (a held lock refuses it too: see test_run_lock.py)",
}


def _foreign_lock(monkeypatch, root):
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    return runlock.acquire(root, HOLDER)


def test_every_module_is_sorted_into_changing_or_read_only():
    names = set(n[:-3] for n in os.listdir(MODULES) if n.endswith(".py") and n != "__init__.py")
    assert names - set(CHANGING) - set(READ_ONLY) == set(), \
        "new module(s): list them in CHANGING (with args) or READ_ONLY"
    assert set(CHANGING) & set(READ_ONLY) == set()
    assert set(CHANGING) | set(READ_ONLY) <= names


@pytest.mark.parametrize("name,index", [(n, i) for n in sorted(CHANGING)
                                        for i in range(len(CHANGING[n][1]))])
def test_every_changing_module_refuses_under_a_foreign_run_lock(seed, monkeypatch, name, index):
    module, states = CHANGING[name]
    _foreign_lock(monkeypatch, seed)
    before = digest(os.path.dirname(seed))
    result = run_module(module, dict(states[index], root=seed))
    assert result.get("failed") is True, result
    for word in ("another gpuhost.tuning run is changing this host", "mallory", "ctl9",
                 "'Another run'", "remove %s by hand" % os.path.join(seed, LOCK)):
        assert word in result["msg"], result["msg"]
    assert result.get("changed") is False
    assert changed(before, digest(os.path.dirname(seed))) == []


# ---------------------------------------------------------------------------------------
# locks and temporary files inside the root only


@pytest.fixture
def run_links_out(tmp_path):
    """A seed host whose ``run`` is a symlink to a folder outside the root (standing in for
    this machine's real /run, which a test must never write)."""
    from fixtures import hosts

    root = tmp_path / "host"
    root.mkdir()
    hosts.seed_host(str(root))
    outside = tmp_path / "outside-run"
    outside.mkdir()
    run = root / "run"
    if run.is_dir() and not run.is_symlink():
        for name in os.listdir(str(run)):
            os.rename(str(run / name), str(outside / name))
        run.rmdir()
    run.symlink_to(str(outside))
    return str(root), str(outside)


def test_a_run_link_out_of_the_root_gets_no_lock(run_links_out, monkeypatch):
    root, outside = run_links_out
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    before = digest(os.path.dirname(root))
    link = os.path.join(root, "run")
    for module, args in ((run_lock, dict(HOLDER)), (sysctl_settings, {"values": SYSCTL}),
                         (host_tune, {"sysctl": SYSCTL})):
        result = run_module(module, dict(args, root=root))
        assert result.get("failed") is True, result
        assert "%s is a symbolic link to %s, out of root %s" % (link, outside, root) \
            in result["msg"], result["msg"]
    assert os.listdir(outside) == sorted(os.listdir(outside)) and \
        not [n for n in os.listdir(outside) if n.startswith("gpuhost-tuning")]
    assert changed(before, digest(os.path.dirname(root))) == []
    # the per-call lock and atomic_write's temporary file, directly
    with pytest.raises(hostfs.PathError, match="out of root"):
        hostfs.RootLock(root, "test").acquire()
    with pytest.raises(hostfs.PathError, match="out of root"):
        hostfs.atomic_write(os.path.join(link, "x.conf"), "x\n", root=root)
    assert not [n for n in os.listdir(outside) if n.startswith(("gpuhost-tuning", ".x.conf"))]


def test_a_run_link_inside_the_root_is_followed(tmp_path, monkeypatch):
    root = tmp_path / "host"
    (root / "var" / "run").mkdir(parents=True)
    (root / "run").symlink_to("var/run")
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    taken = runlock.acquire(str(root), HOLDER)
    assert os.path.isfile(str(root / "var" / "run" / "gpuhost-tuning.run.lock"))
    runlock.release(str(root), taken["token"])


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_lock_that_is_no_plain_file_refuses_without_blocking(seed, monkeypatch, kind):
    """A FIFO is never waited on; a link is never followed: the old RootLock opened it
    read-write and truncated its target. The link points at a decoy in the test's own
    folder (never at a real file of this machine: run against the old code, this test
    would truncate it)."""
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    os.makedirs(os.path.join(seed, "run"), exist_ok=True)
    decoy = os.path.join(os.path.dirname(seed), "decoy-passwd")
    with open(decoy, "w") as handle:
        handle.write("root:x:0:0:root:/root:/bin/sh\n")
    for path in (os.path.join(seed, LOCK), os.path.join(seed, "run/gpuhost-tuning.lock")):
        if kind == "fifo":
            os.mkfifo(path)
        else:
            os.symlink(decoy, path)
    outcome = {}

    def call():
        outcome["result"] = run_module(sysctl_settings, {"values": SYSCTL, "root": seed})
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the module blocked on a %s lock" % kind
    result = outcome["result"]
    assert result.get("failed") is True
    assert "not a regular file" in result["msg"], result["msg"]
    with open(decoy) as handle:
        assert handle.read() == "root:x:0:0:root:/root:/bin/sh\n"
    os.unlink(os.path.join(seed, "run/gpuhost-tuning.lock"))
    held = runlock.read(seed)
    assert "not a regular file" in held["unreadable"]


# ---------------------------------------------------------------------------------------
# holder fields


def test_a_100_kib_holder_does_not_lock_its_own_run_out(seed, monkeypatch):
    monkeypatch.delenv(runlock.ENV_TOKEN, raising=False)
    huge = dict(HOLDER, play="P" * 100 * 1024, user="u" * 100 * 1024)
    taken = run_module(run_lock, dict(huge, root=seed))
    assert taken.get("failed") is not True, taken.get("msg")
    path = os.path.join(seed, LOCK)
    assert os.path.getsize(path) < 4096
    assert len(taken["holder"]["play"]) == runlock.FIELD_MAX
    # the run's own steps go on, another run is refused with a message of sane length
    monkeypatch.setenv(runlock.ENV_TOKEN, taken["token"])
    tuned = run_module(sysctl_settings, {"values": SYSCTL, "root": seed})
    assert not tuned.get("failed"), tuned.get("msg")
    monkeypatch.delenv(runlock.ENV_TOKEN)
    other = run_module(sysctl_settings, {"state": "absent", "root": seed})
    assert other["failed"] and "PPPP" in other["msg"] and len(other["msg"]) < 2000
    gone = run_module(run_lock, {"state": "released", "token": taken["token"], "root": seed})
    assert gone["changed"] is True and not os.path.exists(path)


@pytest.mark.parametrize("size", [100 * 1024, 3 * 1024 * 1024])
def test_a_lock_written_with_a_long_field_keeps_its_token(seed, monkeypatch, size):
    """A lock as an earlier version (or a hand) wrote it, 100 KiB (over the 64 KiB the old
    read took) or over the 1 MiB parsed whole: its own run still matches the token (it comes
    after the long play name); another run is refused naming the holder."""
    token = runlock.new_token()
    record = dict(HOLDER, play="P" * size, host="pve1", pid=41, since_epoch=1,
                  since="2026-12-01T08:30:00Z", token=token)
    os.makedirs(os.path.join(seed, "run"), exist_ok=True)
    with open(os.path.join(seed, LOCK), "w") as handle:
        json.dump(record, handle, sort_keys=True)
    held = runlock.read(seed)
    assert held["token"] == token and held["controller"] == "ctl9"
    assert len(held["play"]) == runlock.FIELD_MAX
    monkeypatch.setenv(runlock.ENV_TOKEN, token)
    assert runlock.refuse_foreign(seed) is None
    monkeypatch.delenv(runlock.ENV_TOKEN)
    text = runlock.refuse_foreign(seed)
    assert "run by mallory from controller ctl9" in text and len(text) < 2000
    assert runlock.release(seed, token)["changed"] is True


# ---------------------------------------------------------------------------------------
# the offline path: a capture tarball audited as it is


def _member(tar, name, kind="file", data=b"x\n", target=None):
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    if kind == "file":
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        return
    info.type = {"dir": tarfile.DIRTYPE, "link": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                 "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
    if kind == "chr":
        info.devmajor, info.devminor = 195, 0
    if target is not None:
        info.linkname = target
    tar.addfile(info)


def _tarball(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for args in members:
            _member(tar, *args)
    return path


def _scratch():
    return set(n for n in os.listdir(tempfile.gettempdir()) if n.startswith("gpuhost-capture-"))


def test_a_hostile_capture_is_refused_naming_each_member_and_nothing_is_written(tmp_path):
    # the absolute name points into the test's folder: were it ever extracted, the digest
    # below shows it, and no file of this machine is at stake
    absolute = str(tmp_path / "written-by-absolute-name")
    tarball = _tarball(str(tmp_path / "evil.tar.gz"), [
        ("proc", "dir"),
        ("proc/cmdline", "file", b"BOOT_IMAGE=/vmlinuz root=ZFS=rpool\n"),
        ("proc/kmsg", "fifo"),
        ("dev/nvidia0", "chr"),
        ("../x", "file"),
        (absolute, "file"),
        ("etc/passwd-link", "link", None, "../../../../../../../../../../etc/passwd"),
        ("etc/hard", "hard", None, "etc/shadow"),
        ("sys", "link", None, "."),
        ("lib", "link", None, "sys/.."),          # through another link: above the tree
        ("proc/self", "link", None, "1"),          # inside: fine
    ])
    before = digest(str(tmp_path))
    scratch = _scratch()
    result = run_module(host_audit, {"capture": tarball})
    assert result.get("failed") is True, result
    msg = result["msg"]
    for part in ("refused 7 members, nothing was written",
                 "proc/kmsg: a FIFO", "dev/nvidia0: a character device node",
                 "../x: a name with ..", "%s: an absolute name" % absolute,
                 "etc/passwd-link: a symbolic link to ../../../../../../../../../../etc/passwd, "
                 "which leads out of the folder",
                 "etc/hard: a hard link to etc/shadow",
                 "lib: a symbolic link to sys/.., which leads out of the folder"):
        assert part in msg, msg
    assert "proc/self" not in msg and "proc/cmdline" not in msg
    assert changed(before, digest(str(tmp_path))) == []
    assert _scratch() == scratch
    assert not os.path.exists(str(tmp_path / "x"))


def test_a_capture_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = str(tmp_path / "capture.tar.gz")
    os.mkfifo(fifo)
    result = run_module(host_audit, {"capture": fifo})
    assert result["failed"] and "is not a regular file" in result["msg"]


def test_capture_and_root_together_are_refused(shared_seed, tmp_path):
    result = run_module(host_audit, {"capture": str(tmp_path / "c.tar.gz"),
                                     "root": shared_seed})
    assert result["failed"] and "capture:" in result["msg"] and "root stays /" in result["msg"]


def test_a_capture_audits_as_it_is_like_its_tree(shared_seed, tmp_path):
    """The same findings and facts as the tree it was taken from; absolute link targets are
    unpacked as links inside the folder; the temporary folder is gone afterwards."""
    collected = run_module(host_capture, {"root": shared_seed})
    tarball = str(tmp_path / "seed-capture.tar.gz")
    with open(tarball, "wb") as handle:
        handle.write(base64.b64decode(collected["archive"]))
    scratch = _scratch()
    direct = run_module(host_audit, {"root": shared_seed})
    offline = run_module(host_audit, {"capture": tarball})
    assert not offline.get("failed"), offline.get("msg")
    assert offline["audit"]["root"] == tarball
    for key in direct["audit"]:
        if key not in ("collected_at", "duration_s", "root"):
            assert offline["audit"][key] == direct["audit"][key], key
    assert _scratch() == scratch
    # an absolute link target is re-rooted inside the folder
    with_abs = _tarball(str(tmp_path / "abs.tar.gz"), [
        ("etc", "dir"), ("etc/passwd", "file", b"root:x:0:0::/root:/bin/sh\n"),
        ("var/lib/x", "link", None, "/etc/passwd")])
    dest, count = capture_unpack.unpack(with_abs)
    try:
        assert count == 3
        link = os.path.join(dest, "var/lib/x")
        assert os.readlink(link) == "../../etc/passwd"
        assert os.path.realpath(link) == os.path.join(os.path.realpath(dest), "etc/passwd")
        assert not stat.S_ISLNK(os.lstat(os.path.join(dest, "etc/passwd")).st_mode)
    finally:
        capture_unpack.remove_scratch(dest)
