"""Module initramfs_check on the seed host's kernels (tests/fixtures/hosts.py) with an
``lsinitramfs`` stand-in that prints what the real one prints: the members one a line,
without a leading slash, early microcode first (initramfs-tools ``lsinitramfs``, cpio -t
over every segment)."""

import os
import stat

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import runner
from ansible_collections.gpuhost.tuning.plugins.modules import initramfs_check
from fixtures import hosts

RUNNING, NEW = hosts.SEED_RUNNING, hosts.SEED_NEW
UVM = "/etc/modprobe.d/gpuhost-nvidia-uvm.conf"
OLD = "/etc/modprobe.d/nvidia-uvm-old.conf"
LISTING = ("kernel\nkernel/x86/microcode/AuthenticAMD.bin\n.\nbin\netc\netc/modprobe.d\n"
           "%susr/lib/modules/%s/kernel/drivers/vfio/pci/vfio-pci.ko\n")


def _lister(folder, members="", rc=0, sleep=0):
    path = os.path.join(str(folder), "lsinitramfs")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n%scat <<'EOF'\n%sEOF\nexit %d\n"
                     % ("sleep %d\n" % sleep if sleep else "", LISTING % (members, NEW), rc))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    return root


def check(root, lister, **kw):
    return run_module(initramfs_check, dict({"root": root, "kernels": [RUNNING, NEW],
                                             "executable": lister}, **kw))


def test_every_image_carries_the_file_and_none_the_old_one(seed, tmp_path):
    res = check(seed, _lister(tmp_path, UVM[1:] + "\n"), files=[UVM], absent_files=[OLD])
    assert not res.get("failed") and res["ok"] and res["changed"] is False, res
    assert res["problems"] == [] and res["stale"] == []
    assert [(i["kernel"], i["image"], i["exists"], i["present"], i["missing"],
             i["unexpected"]) for i in res["images"]] == [
        (k, "/boot/initrd.img-%s" % k, True, [UVM], [], []) for k in (RUNNING, NEW)]


def test_a_missing_or_unexpected_file_fails_naming_the_command_to_run(seed, tmp_path):
    res = check(seed, _lister(tmp_path, OLD[1:] + "\n"), files=[UVM], absent_files=[OLD])
    assert res["failed"] and res["msg"].startswith("initramfs check failed: ")
    assert "/boot/initrd.img-%s lacks %s: run update-initramfs -u -k %s" % (NEW, UVM, NEW) \
        in res["problems"]
    assert "/boot/initrd.img-%s still carries %s: run update-initramfs -u -k %s" % (
        NEW, OLD, NEW) in res["problems"]
    assert res["stale"] == [RUNNING, NEW]
    # require false: the same result, not a failure
    soft = check(seed, _lister(tmp_path, OLD[1:] + "\n"), files=[UVM], require=False)
    assert not soft.get("failed") and not soft["ok"] and soft["stale"] == [RUNNING, NEW]


def test_a_missing_image_or_a_failing_lister_is_a_problem(seed, tmp_path):
    os.unlink(os.path.join(seed, "boot/initrd.img-%s" % NEW))
    lister = _lister(tmp_path, rc=2)
    res = check(seed, lister, require=False)
    assert res["problems"][0].startswith("%s /boot/initrd.img-%s exited 2: " % (lister, RUNNING))
    assert res["problems"][1] == ("/boot/initrd.img-%s does not exist: run update-initramfs "
                                  "-c -k %s" % (NEW, NEW))
    assert res["stale"] == [RUNNING, NEW]


def test_a_hanging_lister_is_killed_at_the_runners_limit(seed, tmp_path, monkeypatch):
    # the module passes no timeout of its own: the runner's default bounds the lister
    monkeypatch.setattr(runner, "DEFAULT_TIMEOUT_S", 1)
    res = check(seed, _lister(tmp_path, sleep=30), kernels=[NEW], require=False)
    assert not res["ok"] and "did not return in 1 s" in res["problems"][0]
    assert res["stale"] == [NEW]


def test_without_lsinitramfs_on_the_path_it_says_what_to_install(seed, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    res = run_module(initramfs_check, {"root": seed, "kernels": [NEW]})
    assert res["failed"] and res["msg"] == ("lsinitramfs not found on the PATH: install "
                                            "initramfs-tools")


@pytest.mark.parametrize("args,text", [
    ({"kernels": []}, "kernels: [] is not allowed"),
    ({"kernels": ["../../etc"]}, "kernel releases like 6.14.11-5-bpo12-pve"),
    ({"files": ["etc/x.conf"]}, "absolute paths as inside the initramfs"),
    ({"image": "/../../x-{kernel}"}, "outside root"),
])
def test_bad_options_are_refused_before_anything_runs(seed, tmp_path, args, text):
    res = check(seed, _lister(tmp_path, rc=9), **args)
    assert res["failed"] and text in res["msg"] and "(nothing was read or written)" in res["msg"]
