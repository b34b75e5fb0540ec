"""Kernel command line parsing and backend detection (editing it and the GRUB and
systemd-boot plans: test_bootcfg_write.py)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_cmdline
from fixtures import boot

PVE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"


def test_tokenize_keeps_quoted_values_whole():
    line = 'root=UUID=abc ro dyndbg="file drivers/gpu/* +p" quiet -- single'
    assert kernel_cmdline.tokenize(line) == [
        "root=UUID=abc", "ro", 'dyndbg="file drivers/gpu/* +p"', "quiet", "--", "single"]
    assert kernel_cmdline.split_token('dyndbg="file a +p"') == ("dyndbg", "file a +p")
    assert kernel_cmdline.split_token("root=ZFS=rpool/ROOT/pve-1") == ("root", "ZFS=rpool/ROOT/pve-1")  # noqa: E501
    with pytest.raises(kernel_cmdline.BootConfigError):
        kernel_cmdline.tokenize('a="b c')


def test_detect_backend_proxmox_systemd_boot_even_with_etc_default_grub(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    got = kernel_cmdline.detect_backend(str(tmp_path))
    assert (got["backend"], got["tool"]) == ("systemd-boot", "proxmox-boot-tool")
    assert kernel_cmdline.boot_tool(str(tmp_path)) == "proxmox-boot-tool"
    assert kernel_cmdline.configured_cmdline(str(tmp_path)) == PVE


def test_detect_backend_grub_and_unknown(tmp_path):
    assert kernel_cmdline.boot_tool(str(tmp_path)) == "unknown"
    boot.debian_grub(tmp_path)
    got = kernel_cmdline.detect_backend(str(tmp_path))
    assert (got["backend"], got["tool"]) == ("grub", "grub")
    assert kernel_cmdline.configured_cmdline(str(tmp_path)) == "quiet"


def test_detect_backend_proxmox_legacy_bios_is_grub(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    (tmp_path / "etc/kernel/cmdline").unlink()
    import shutil
    shutil.rmtree(tmp_path / "sys/firmware/efi")
    got = kernel_cmdline.detect_backend(str(tmp_path))
    assert (got["backend"], got["tool"]) == ("grub", "proxmox-boot-tool")


def test_parse_pbt_status():
    text = ("Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount namespace..\n"
            "System currently booted with uefi\n"
            "9B2E-4F1C is configured with: uefi (versions: 6.8.12-9-pve, 6.14.11-5-bpo12-pve)\n"
            "WARN: /dev/disk/by-uuid/9B2E-A7D3 does not exist - clean "
            "'/etc/kernel/proxmox-boot-uuids'! - skipping\n")
    assert kernel_cmdline.parse_pbt_status(text) == [("9B2E-4F1C", "uefi")]


class _PbtRunner:
    """Stands in for Runner on a live Proxmox host: answers proxmox-boot-tool status."""

    def __init__(self, out, rc=0):
        self.out, self.rc, self.calls = out, rc, []

    def which(self, name):
        return "/usr/sbin/" + name

    def run(self, args, check=True, ok_rcs=(0,), hint=None, timeout=None):
        self.calls.append(list(args))
        return self.rc, self.out, ""


def test_detect_backend_asks_proxmox_boot_tool_when_given_a_runner(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    runner = _PbtRunner("System currently booted with uefi\n"
                        "9B2E-4F1C is configured with: grub (versions: 6.8.12-9-pve)\n")
    got = kernel_cmdline.detect_backend(str(tmp_path), runner)
    assert (got["backend"], got["tool"]) == ("grub", "proxmox-boot-tool")
    assert runner.calls == [["proxmox-boot-tool", "status"]]
    runner = _PbtRunner("9B2E-4F1C is configured with: uefi (versions: 6.8.12-9-pve)\n")
    assert kernel_cmdline.detect_backend(str(tmp_path), runner)["backend"] == "systemd-boot"
    # status failing (exit 2: no ESPs configured) falls back to the files
    assert kernel_cmdline.detect_backend(str(tmp_path), _PbtRunner("", rc=2))["backend"] == (
        "systemd-boot")
