"""ansible-playbook gpuhost.tuning.reboot_verify on the mixed host (VM 201 passes two GPUs
through, tests/fixtures/passthrough.py) with the qm, pct and proxmox-boot-tool doubles and an
lsinitramfs stand-in on PATH: the reboot is refused when the next kernel's initramfs lacks
the vfio-pci binding, naming the device and the VM; with it, VM 201 (onboot) is started and
reported with its GPUs on vfio-pci."""

import os
import stat

from fixtures import dkms, hosts
from fixtures import passthrough as ptfix
from test_reboot_verify import NEW, OLD, _esps, play

TREE = ["proxmox-boot-tool", "pct", "qm", "lsinitramfs"]


def _mixed_ready(tmp_path):
    root = str(tmp_path / "host")
    ptfix.mixed_host(root)
    _esps(root)
    dkms.kernel_tree(root, NEW, headers=True)
    dkms.dkms_tree(root, "nvidia", hosts.SEED_NVIDIA, installed=[OLD, NEW])
    return root


def _lister(tmp_path, monkeypatch, members):
    """lsinitramfs as the real one prints an image: members one a line, no leading slash."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    path = folder / "lsinitramfs"
    path.write_text("#!/bin/sh\ncat <<'EOF'\n.\netc\netc/modprobe.d\n%sEOF\n" % members)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(folder) + os.pathsep + os.environ["PATH"])


def test_reboot_refused_without_the_vfio_binding_then_the_vm_started_with_it(
        tmp_path, monkeypatch):
    root = _mixed_ready(tmp_path)
    _lister(tmp_path, monkeypatch, "etc/modprobe.d/gpuhost-nvidia-uvm.conf\n")
    extra = {"gpuhost_tree_commands": TREE, "gpuhost_reboot_verify_reboot": True}
    proc, calls, report = play(tmp_path, root, extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert report["result"] == "failed"
    assert report["failure"].startswith(
        "Gate: the next kernel's initramfs keeps each VM's GPU on vfio-pci: vm 201 "
        "(train-201) hostpci0 %s (10de:2bb5): /boot/initrd.img-" % ptfix.VM_BY_ADDRESS)
    assert "lacks /etc/modprobe.d/vfio.conf" in report["failure"]
    assert "hostpci1 %s" % ptfix.VM_BY_MAPPING in report["failure"]
    assert report["vfio_initramfs"]["ok"] is False
    assert ["qm", "list"] in calls and not any(c[:2] == ["qm", "start"] for c in calls)
    assert "TASK [gpuhost.tuning.reboot_verify : Reboot into" not in out

    _lister(tmp_path, monkeypatch, "etc/modprobe.d/vfio.conf\n")
    proc, calls2, report = play(tmp_path, root, extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert report["result"] == "passed" and report["vfio_initramfs"]["ok"] is True
    assert ["qm", "start", "201"] in calls2[len(calls):]
    vm = report["vms"][0]
    assert (vm["vmid"], vm["name"], vm["onboot"], vm["started"], vm["status"]) == (
        201, "train-201", True, True, "running")
    assert [g["driver"] for g in vm["gpus"]] == ["vfio-pci", "vfio-pci"]
    md = (tmp_path / "reports" / "localhost-reboot.md").read_text()
    assert "| 201 | train-201 | False | True | True | running | %s vfio-pci, %s vfio-pci |  |" % (
        ptfix.VM_BY_ADDRESS, ptfix.VM_BY_MAPPING) in md
