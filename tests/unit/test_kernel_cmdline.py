"""kernel_cmdline main() on both backends: result, diff, check mode, idempotence."""

import os

from ansible_collections.gpuhost.tuning.plugins.modules import kernel_cmdline
from fixtures import boot
from modrun import run_module

PVE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
SEED = {"amd_pstate": "active", "processor.max_cstate": 1, "nmi_watchdog": 0}


def _run(root, check_mode=False, diff=False, **args):
    args.setdefault("root", str(root))
    return run_module(kernel_cmdline, args, check_mode=check_mode, diff=diff)


def test_systemd_boot_seed_change_then_idempotent(tmp_path):
    path = boot.proxmox_systemd_boot(tmp_path)
    grub_before = (tmp_path / "etc/default/grub").read_bytes()
    result = _run(tmp_path, diff=True, params=SEED)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] and result["backend"] == "systemd-boot"
    assert result["tool"] == "proxmox-boot-tool"
    assert result["before"] == PVE
    assert result["after"] == PVE + " amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
    assert open(path).read() == result["after"] + "\n"
    assert result["refresh_required"] and result["refresh_commands"] == [
        ["proxmox-boot-tool", "refresh"]]
    assert result["files"] == ["/etc/kernel/cmdline"]
    assert result["diff"]["before"] == PVE + "\n"
    assert result["diff"]["after"] == result["after"] + "\n"
    assert (tmp_path / "etc/default/grub").read_bytes() == grub_before
    again = _run(tmp_path, params=SEED)
    assert again["changed"] is False and again["refresh_required"] is False
    assert again["refresh_commands"] == [] and again["files"] == []


def test_systemd_boot_check_mode_is_byte_identical(tmp_path, snapshot_tree):
    boot.proxmox_systemd_boot(tmp_path)
    before = snapshot_tree(str(tmp_path))
    result = _run(tmp_path, check_mode=True, diff=True, params=SEED, absent=["boot"])
    assert result["changed"] and result["after"] == (
        "root=ZFS=rpool/ROOT/pve-1 amd_pstate=active processor.max_cstate=1 nmi_watchdog=0")
    assert "diff" in result
    assert snapshot_tree(str(tmp_path)) == before


def test_systemd_boot_keeps_mode(tmp_path):
    path = boot.proxmox_systemd_boot(tmp_path)
    os.chmod(path, 0o640)
    _run(tmp_path, params={"nmi_watchdog": 0})
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_systemd_boot_without_root_fails_and_writes_nothing(tmp_path, snapshot_tree):
    boot.proxmox_systemd_boot(tmp_path, cmdline="boot=zfs quiet")
    before = snapshot_tree(str(tmp_path))
    result = _run(tmp_path, params={"nmi_watchdog": 0})
    assert result["failed"] and "no root=" in result["msg"]
    assert snapshot_tree(str(tmp_path)) == before


def test_refuses_removing_root(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    result = _run(tmp_path, absent=["root"])
    assert result["failed"] and "refusing to remove root=" in result["msg"]


def test_grub_change_diff_and_idempotent(tmp_path):
    path = boot.debian_grub(tmp_path)
    result = _run(tmp_path, diff=True, params=SEED, absent=["quiet"])
    assert not result.get("failed"), result.get("msg")
    assert result["backend"] == "grub" and result["tool"] == "grub"
    assert result["before"] == "quiet"
    assert result["after"] == "amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
    assert result["refresh_commands"] == [["update-grub"]]
    text = open(path).read()
    assert ('GRUB_CMDLINE_LINUX_DEFAULT="amd_pstate=active processor.max_cstate=1 '
            'nmi_watchdog=0"\n') in text
    assert result["diff"]["before_header"] == "/etc/default/grub"
    assert _run(tmp_path, params=SEED, absent=["quiet"])["changed"] is False


def test_grub_check_mode_is_byte_identical(tmp_path, snapshot_tree):
    boot.debian_grub(tmp_path)
    boot.grub_dropin(tmp_path)
    before = snapshot_tree(str(tmp_path))
    result = _run(tmp_path, check_mode=True, diff=True, params=SEED)
    assert result["changed"]
    assert result["files"] == ["/etc/default/grub.d/50-cloudimg-settings.cfg"]
    assert snapshot_tree(str(tmp_path)) == before


def test_grub_new_dropin_diff(tmp_path):
    boot.debian_grub(tmp_path)
    result = _run(tmp_path, diff=True, params={"iommu": "pt"}, grub_file="99-gpuhost.cfg")
    assert result["files"] == ["/etc/default/grub.d/99-gpuhost.cfg"]
    assert result["diff"]["before"] == ""
    created = tmp_path / "etc/default/grub.d/99-gpuhost.cfg"
    assert created.read_text().endswith(
        'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"\n')
    assert os.stat(created).st_mode & 0o777 == 0o644
    assert result["after"] == "quiet iommu=pt"


def test_backend_forced_grub_on_proxmox(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    result = _run(tmp_path, backend="grub", params={"nmi_watchdog": 0})
    assert result["backend"] == "grub" and result["tool"] == "proxmox-boot-tool"
    assert result["refresh_commands"] == [["proxmox-boot-tool", "refresh"]]
    assert (tmp_path / "etc/kernel/cmdline").read_text() == PVE + "\n"


def test_no_boot_config_fails_clearly(tmp_path):
    result = _run(tmp_path, params={"nmi_watchdog": 0})
    assert result["failed"] and "is GRUB installed" in result["msg"]
