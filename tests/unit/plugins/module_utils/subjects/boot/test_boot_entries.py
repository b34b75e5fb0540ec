"""module_utils/bootloader: kernel list, pin files, missing parameters and the entry check (the
loader entries: test_bootloader_sdboot.py; grub.cfg and grubenv: test_bootloader_grub.py)."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_entries
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_grub
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_sdboot
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from fixtures import bootloader as fx

OLD, NEW = "6.8.12-9-pve", "6.14.11-5-bpo12-pve"
PVE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
TUNED = PVE + " amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
PARAMS = {"amd_pstate": "active", "processor.max_cstate": "1", "nmi_watchdog": 0}
ESP_DIR = "/var/lib/gpuhost-doubles/esp"


def test_kernel_from_path_knows_every_layout():
    assert kernels.kernel_from_path("/boot/vmlinuz-6.1.0-56-amd64") == "6.1.0-56-amd64"
    assert kernels.kernel_from_path("/vmlinuz-6.1.0-56-amd64") == "6.1.0-56-amd64"
    assert kernels.kernel_from_path("/EFI/proxmox/%s/vmlinuz-%s" % (NEW, NEW)) == NEW
    assert kernels.kernel_from_path("/%s/6.1.0-56-amd64/linux" % fx.MACHINE_ID) == "6.1.0-56-amd64"
    assert kernels.kernel_from_path("(hd0,gpt2)/@/boot/vmlinuz-6.1.0-9-amd64") == "6.1.0-9-amd64"
    assert kernels.kernel_from_path("/EFI/Linux/ukify.efi") is None


def test_kernel_list_plain_and_pinned_blocks():
    plain = boot_entries.parse_kernel_list(fx.KERNEL_LIST_PLAIN)
    assert plain == {"manual": [], "automatic": [OLD, NEW], "pinned": None, "next_boot": None}
    pinned = boot_entries.parse_kernel_list(fx.KERNEL_LIST_PINNED)
    assert pinned["manual"] == ["6.5.13-6-pve"]
    assert pinned["pinned"] == OLD and pinned["next_boot"] == NEW


def test_pin_files_read_offline(tmp_path):
    assert boot_entries.pbt_files(str(tmp_path))["pinned"] is None
    os.makedirs(os.path.join(str(tmp_path), "etc/kernel"))
    with open(os.path.join(str(tmp_path), "etc/kernel/next-boot-pin"), "w") as handle:
        handle.write(NEW + "\n")
    assert boot_entries.pbt_files(str(tmp_path))["next_boot"] == NEW


def test_missing_params_values_flags_and_absent():
    line = "root=x amd-pstate=active processor.max_cstate=2 quiet"
    assert boot_entries.missing_params(line, PARAMS) == ["processor.max_cstate=1", "nmi_watchdog=0"]
    assert boot_entries.missing_params(TUNED, PARAMS) == []
    assert boot_entries.missing_params(line, {"quiet": True, "splash": None}) == []
    assert boot_entries.missing_params(line, {"mitigations": False}) == ["mitigations=off"]
    assert boot_entries.missing_params("root=x mitigations=off", {"mitigations": False}) == []
    assert boot_entries.missing_params(line, {"iommu": True}) == ["iommu"]
    assert boot_entries.missing_params(line, {}, ["quiet", "processor.max_cstate=1"]) == ["!quiet"]


def test_check_entries_names_the_kernel_and_the_missing_parameter(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], PVE)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    result = boot_entries.check_entries(sd["entries"], PARAMS, kernels=[NEW, "6.15.0-1-pve"])
    assert not result["ok"]
    assert "no boot entry for kernel 6.15.0-1-pve" in result["problems"]
    assert any(NEW in p and "amd_pstate=active" in p and "9B2E-4F1C" in p
               for p in result["problems"])
    fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    assert boot_entries.check_entries(sd["entries"], PARAMS, kernels=[NEW])["ok"]


def test_check_entries_skips_grub_recovery_entries():
    cfg = boot_grub.parse_grub_cfg(fx.grub_cfg_text(["6.1.0-56-amd64"],
                                                    default_opts="quiet amd_pstate=active"))
    assert boot_entries.check_entries(cfg["entries"], {"amd_pstate": "active"})["ok"]
    cfg = boot_grub.parse_grub_cfg(fx.grub_cfg_text(["6.1.0-56-amd64"]))
    result = boot_entries.check_entries(cfg["entries"], {"amd_pstate": "active"})
    assert len(result["problems"]) == 2  # the simple entry and the advanced one
