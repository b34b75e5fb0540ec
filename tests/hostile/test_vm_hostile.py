"""Hostile cases for the VMs' side of a reboot (vfio_initramfs_check, vm_verify): bad
values refused naming them before anything runs; a VM config that is a FIFO or a link out
of the root is not read (the reading layer), so the gate neither hangs nor escapes."""

import os

import pytest
from digest import changed, digest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import vfio_initramfs_check, vm_verify
from fixtures import hosts
from fixtures import passthrough as ptfix

NEW = hosts.SEED_NEW

BAD = [
    (vfio_initramfs_check, {"kernel": "6.14.11-5-pve; reboot"}, "kernel release"),
    (vfio_initramfs_check, {"kernel": ""}, "the kernel release that boots next"),
    (vfio_initramfs_check, {"kernel": NEW, "image": "/../../../x-{kernel}"}, "outside root"),
    (vfio_initramfs_check, {"kernel": NEW, "timeout": 0}, "timeout"),
    (vm_verify, {"running_before": [5]}, "running_before"),
    (vm_verify, {"start_timeout": 0}, "start_timeout"),
]


@pytest.mark.parametrize("module,args,expect", BAD,
                         ids=["%s-%d" % (m.__name__.rsplit(".", 1)[1], i)
                              for i, (m, _a, _e) in enumerate(BAD)])
def test_bad_values_refused_naming_them_and_nothing_changed(shared_seed, module, args, expect):
    before = digest(os.path.dirname(shared_seed))
    result = run_module(module, dict(args, root=shared_seed, executable="/bin/false")
                        if module is vfio_initramfs_check else dict(args, root=shared_seed))
    assert result.get("failed") is True and expect in result["msg"], result
    assert "nothing was read or written" in result["msg"]
    assert changed(before, digest(os.path.dirname(shared_seed))) == []


def test_a_fifo_or_a_link_out_for_a_vm_config_is_not_read(tmp_path):
    root = str(tmp_path / "host")
    ptfix.mixed_host(root)
    qemu = os.path.join(root, "etc/pve/nodes", ptfix.NODE, "qemu-server")
    os.mkfifo(os.path.join(qemu, "300.conf"))
    decoy = tmp_path / "outside.conf"  # a decoy outside the root, never this machine's file
    decoy.write_text("hostpci0: 0000:a1:00.0\nname: outside\n")
    os.symlink(str(decoy), os.path.join(qemu, "301.conf"))
    lister = tmp_path / "lsinitramfs"
    lister.write_text("#!/bin/sh\necho etc/modprobe.d/vfio.conf\n")
    lister.chmod(0o755)
    res = run_module(vfio_initramfs_check, {"root": root, "kernel": NEW,
                                            "executable": str(lister)})
    assert not res.get("failed"), res
    assert sorted(d["vmid"] for d in res["devices"]) == [201, 201]
    assert "outside" not in str(res)
