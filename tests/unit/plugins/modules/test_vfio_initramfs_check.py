"""Module vfio_initramfs_check, the gate before a reboot of a host whose VMs pass GPUs
through: the next kernel's initramfs must carry the vfio-pci binding of every such GPU. On
the mixed host of tests/fixtures/passthrough.py, with an ``lsinitramfs`` stand-in printing
what the real tool prints (moved from test_vm_verify.py, which keeps module vm_verify)."""

import os
import stat

import pytest
from conftest import TESTS
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import vfio_initramfs_check
from fixtures import hosts
from fixtures import passthrough as ptfix

DOUBLES = os.path.join(TESTS, "doubles")
NEW = hosts.SEED_NEW
IMAGE = "/boot/initrd.img-%s" % NEW
# lsinitramfs prints the image's members one a line, without a leading slash (the real
# tool: cpio -t over every segment, early microcode first).
LISTING = ("kernel\nkernel/x86/microcode/AuthenticAMD.bin\n.\nbin\netc\netc/modprobe.d\n"
           "etc/modprobe.d/gpuhost-nvidia-uvm.conf\n%s"
           "usr/lib/modules/%s/kernel/drivers/vfio/pci/vfio-pci.ko\n" % ("%s", NEW))


def _lister(folder, members="", rc=0, sleep=0):
    path = os.path.join(str(folder), "lsinitramfs")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n%scat <<'EOF'\n%sEOF\nexit %d\n"
                     % ("sleep %d\n" % sleep if sleep else "", LISTING % members, rc))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    root = str(tmp_path / "host")
    ptfix.mixed_host(root)
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("GPUHOST_DOUBLES_ROOT", root)
    monkeypatch.setenv("GPUHOST_DOUBLES_LOG", str(tmp_path / "calls.jsonl"))
    return root


def gate(root, lister, **kw):
    return run_module(vfio_initramfs_check, dict({"root": root, "kernel": NEW,
                                                  "executable": lister}, **kw))


def test_gate_passes_when_the_next_initramfs_carries_the_vfio_file(mixed, tmp_path):
    res = gate(mixed, _lister(tmp_path, "etc/modprobe.d/vfio.conf\n"))
    assert not res.get("failed"), res
    assert res["ok"] and res["image"] == IMAGE
    by = dict((d["address"], d) for d in res["devices"])
    assert sorted(by) == sorted([ptfix.VM_BY_ADDRESS, ptfix.VM_BY_MAPPING])
    for dev in by.values():
        assert dev["vmid"] == 201 and dev["name"] == "train-201"
        assert dev["files"] == dev["in_image"] == ["/etc/modprobe.d/vfio.conf"]


def test_gate_refuses_a_next_initramfs_without_the_vfio_file_naming_device_and_vm(
        mixed, tmp_path):
    res = gate(mixed, _lister(tmp_path))
    assert res["failed"] and not res["ok"]
    assert res["msg"].startswith("not rebooting into %s: " % NEW)
    for address, key in ((ptfix.VM_BY_ADDRESS, "hostpci0"), (ptfix.VM_BY_MAPPING, "hostpci1")):
        assert "vm 201 (train-201) %s %s (10de:2bb5): %s lacks /etc/modprobe.d/vfio.conf" % (
            key, address, IMAGE) in res["msg"]
    assert "update-initramfs -u -k %s" % NEW in res["msg"]
    # the audio function and the vGPU VM's virtual function are not GPUs passed whole
    assert len(res["problems"]) == 2


def test_gate_names_the_missing_binding_itself_and_the_ids_line_to_add(mixed, tmp_path):
    os.unlink(os.path.join(mixed, "etc/modprobe.d/vfio.conf"))
    with open(os.path.join(mixed, "etc/modprobe.d/other.conf"), "w") as handle:
        handle.write("options vfio-pci ids=10de:2335\nblacklist nouveau_not_this\n")
    res = gate(mixed, _lister(tmp_path, "etc/modprobe.d/other.conf\n"), require=False)
    assert not res.get("failed") and not res["ok"]
    assert all("nothing in /etc/modprobe.d binds it to vfio-pci" in p
               and "options vfio-pci ids=10de:2bb5" in p for p in res["problems"])


def test_gate_accepts_the_ids_line_or_a_blacklist_instead_of_the_softdep(mixed, tmp_path):
    os.unlink(os.path.join(mixed, "etc/modprobe.d/vfio.conf"))
    with open(os.path.join(mixed, "etc/modprobe.d/passthrough.conf"), "w") as handle:
        handle.write("# GPUs for VM 201\noptions vfio-pci ids=10de:2bb5,10de:22e8\n")
    res = gate(mixed, _lister(tmp_path, "etc/modprobe.d/passthrough.conf\n"))
    assert res["ok"], res
    with open(os.path.join(mixed, "etc/modprobe.d/passthrough.conf"), "w") as handle:
        handle.write("blacklist nvidia\n")
    assert gate(mixed, _lister(tmp_path, "etc/modprobe.d/passthrough.conf\n"))["ok"]
    # nvidia is loaded on this host: a blacklist of nouveau alone keeps nothing from it
    with open(os.path.join(mixed, "etc/modprobe.d/passthrough.conf"), "w") as handle:
        handle.write("blacklist nouveau\n")
    assert not gate(mixed, _lister(tmp_path, "etc/modprobe.d/passthrough.conf\n"),
                    require=False)["ok"]


def test_gate_refuses_a_missing_or_unreadable_image_naming_the_gpus(mixed, tmp_path):
    res = gate(mixed, _lister(tmp_path, rc=1), require=False)
    assert not res["ok"] and len(res["problems"]) == 1
    assert "exited 1" in res["problems"][0] and "vm 201 (train-201) hostpci0" in \
        res["problems"][0]
    os.unlink(os.path.join(mixed, IMAGE.lstrip("/")))
    res = gate(mixed, _lister(tmp_path, "etc/modprobe.d/vfio.conf\n"), require=False)
    assert not res["ok"] and "%s does not exist" % IMAGE in res["problems"][0]


def test_gate_kills_a_hanging_lister_within_its_limit(mixed, tmp_path):
    res = gate(mixed, _lister(tmp_path, "etc/modprobe.d/vfio.conf\n", sleep=30), timeout=1,
               require=False)
    assert not res["ok"] and "did not return in 1 s" in res["problems"][0]


def test_a_host_without_passed_through_gpus_is_unaffected(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    res = gate(root, _lister(tmp_path, rc=3))  # never run: nothing to prove
    assert not res.get("failed") and res["ok"] and res["devices"] == []
