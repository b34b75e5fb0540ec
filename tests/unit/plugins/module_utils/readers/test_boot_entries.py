"""Reading what the boot loader will boot: loader entries, grub.cfg, kernel list, defaults."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.readers import boot_entries as bl
from ansible_collections.gpuhost.tuning.plugins.module_utils.readers import boot_grub as blg
from ansible_collections.gpuhost.tuning.plugins.module_utils.readers import boot_sdboot as bls
from ansible_collections.gpuhost.tuning.plugins.module_utils.readers import kernels as kernel
from fixtures import bootloader as fx

OLD, NEW = "6.8.12-9-pve", "6.14.11-5-bpo12-pve"
PVE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
TUNED = PVE + " amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
PARAMS = {"amd_pstate": "active", "processor.max_cstate": "1", "nmi_watchdog": 0}
ESP_DIR = "/var/lib/gpuhost-doubles/esp"


def test_kernel_from_path_knows_every_layout():
    assert kernel.kernel_from_path("/boot/vmlinuz-6.1.0-56-amd64") == "6.1.0-56-amd64"
    assert kernel.kernel_from_path("/vmlinuz-6.1.0-56-amd64") == "6.1.0-56-amd64"
    assert kernel.kernel_from_path("/EFI/proxmox/%s/vmlinuz-%s" % (NEW, NEW)) == NEW
    assert kernel.kernel_from_path("/%s/6.1.0-56-amd64/linux" % fx.MACHINE_ID) == "6.1.0-56-amd64"
    assert kernel.kernel_from_path("(hd0,gpt2)/@/boot/vmlinuz-6.1.0-9-amd64") == "6.1.0-9-amd64"
    assert kernel.kernel_from_path("/EFI/Linux/ukify.efi") is None


def test_loader_entry_as_proxmox_boot_tool_writes_it(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED)
    data = bls.read_esp(esp)
    assert [e["id"] for e in data["entries"]] == ["proxmox-%s.conf" % NEW,
                                                  "proxmox-%s.conf" % OLD]
    entry = [e for e in data["entries"] if e["kernel"] == NEW][0]
    assert entry["options"] == TUNED
    assert entry["title"] == "Proxmox Virtual Environment"
    assert entry["initrd"] == ["/EFI/proxmox/%s/initrd.img-%s" % (NEW, NEW)]
    assert data["loader_conf"] == {"timeout": "3", "default": "proxmox-*"}


def test_loader_entry_joins_options_lines_and_reads_kernel_install_layout():
    entry = bls.parse_loader_entry(
        "title Debian\nversion 6.1.0-56-amd64\noptions root=UUID=x ro\noptions  quiet\n"
        "linux /abc/6.1.0-56-amd64/linux\ninitrd /abc/6.1.0-56-amd64/intel-ucode.img\n"
        "initrd /abc/6.1.0-56-amd64/initrd.img-6.1.0-56-amd64\n# comment\n")
    assert entry["options"] == "root=UUID=x ro quiet"
    assert len(entry["initrd"]) == 2
    no_version = bls.parse_loader_entry("title x\nlinux /abc/6.1.0-9-amd64/linux\n")
    assert no_version["kernel"] == "6.1.0-9-amd64"


def test_systemd_boot_default_glob_picks_newest_and_pin_wins(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED)
    sd = bls.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    assert sd["default"]["kernel"] == NEW and "loader.conf default" in sd["default_how"]
    # a pin (proxmox-boot-tool kernel pin OLD; refresh) writes the file name as default
    fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED,
               default="proxmox-%s.conf" % OLD)
    sd = bls.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    assert sd["default"]["kernel"] == OLD


def test_version_order_is_numeric_not_alphabetic(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", ["6.8.12-10-pve", "6.8.12-9-pve"], PVE)
    sd = bls.read_systemd_boot(str(tmp_path), [{"uuid": "A", "path": esp}])
    assert sd["default"]["kernel"] == "6.8.12-10-pve"


def test_efi_variables_override_loader_conf(tmp_path):
    base = fx.kernel_install_entries(tmp_path, ["6.1.0-55-amd64", "6.1.0-56-amd64"],
                                     "root=UUID=x ro quiet")
    esps = [{"uuid": None, "path": base}]
    assert bls.read_systemd_boot(str(tmp_path), esps)["default"]["kernel"] == "6.1.0-56-amd64"
    fx.efivar(tmp_path, "LoaderEntryDefault", "%s-6.1.0-55-amd64.conf" % fx.MACHINE_ID)
    sd = bls.read_systemd_boot(str(tmp_path), esps)
    assert sd["default"]["kernel"] == "6.1.0-55-amd64"
    assert sd["default_how"].startswith("LoaderEntryDefault")
    fx.efivar(tmp_path, "LoaderEntryOneShot", "%s-6.1.0-56-amd64.conf" % fx.MACHINE_ID)
    sd = bls.read_systemd_boot(str(tmp_path), esps)
    assert sd["default"]["kernel"] == "6.1.0-56-amd64" and sd["oneshot"]


def test_boot_partition_search_order(tmp_path):
    assert bls.boot_partition(str(tmp_path)) is None
    fx.kernel_install_entries(tmp_path, ["6.1.0-56-amd64"], "root=x", boot="/boot/efi")
    assert bls.boot_partition(str(tmp_path)) == "/boot/efi"


def test_locate_esps_by_uuid_and_reports_unreadable(tmp_path):
    fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [NEW], TUNED)
    found = bls.locate_esps(str(tmp_path), [ESP_DIR], ["9B2E-4F1C", "9B2E-A7D3"])
    assert found[0]["uuid"] == "9B2E-4F1C" and found[0]["path"].endswith("9B2E-4F1C")
    assert {"uuid": "9B2E-A7D3", "path": None} in found
    # without the uuid list every ESP-looking subfolder counts
    assert [f["uuid"] for f in bls.locate_esps(str(tmp_path), [ESP_DIR])] == ["9B2E-4F1C"]


def test_grub_cfg_entries_submenu_ids_and_options():
    text = fx.grub_cfg_text(["6.1.0-55-amd64", "6.1.0-56-amd64"],
                            default_opts="quiet amd_pstate=active")
    cfg = blg.parse_grub_cfg(text)
    titles = [">".join(e["path_titles"]) for e in cfg["entries"]]
    assert titles[0] == "Debian GNU/Linux"
    assert titles[1] == ("Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux "
                         "6.1.0-56-amd64")
    normal = cfg["entries"][1]
    assert normal["index"] == "1>0"
    assert normal["kernel"] == "6.1.0-56-amd64"
    assert normal["options"] == "root=UUID=%s ro quiet amd_pstate=active" % fx.ROOT_UUID
    assert blg.grub_entry_ref(normal) == "gnulinux-advanced-%s>gnulinux-6.1.0-56-amd64-" \
        "advanced-%s" % (fx.ROOT_UUID, fx.ROOT_UUID)
    recovery = cfg["entries"][2]
    assert recovery["recovery"] and "single" in recovery["options"]
    assert cfg["entries"][-1]["title"] == "UEFI Firmware Settings"
    assert cfg["entries"][-1]["kernel"] is None
    assert cfg["defaults"] == ["0"] and cfg["uses_next_entry"]


def test_grub_default_follows_grubenv(tmp_path):
    ks = ["6.1.0-55-amd64", "6.1.0-56-amd64"]
    fx.grub_cfg(tmp_path, ks)
    grub = blg.read_grub(str(tmp_path))
    assert grub["default"]["kernel"] == "6.1.0-56-amd64"
    assert grub["default"]["index"] == "0"
    # GRUB_DEFAULT=saved with grub-set-default to the old kernel, grub-reboot to the new
    fx.grub_cfg(tmp_path, ks, default="saved")
    old_ref = "gnulinux-advanced-%s>gnulinux-6.1.0-55-amd64-advanced-%s" % (
        fx.ROOT_UUID, fx.ROOT_UUID)
    fx.grubenv(tmp_path, saved_entry=old_ref)
    grub = blg.read_grub(str(tmp_path))
    assert grub["default"]["kernel"] == "6.1.0-55-amd64"
    assert "saved_entry" in grub["default_how"]
    fx.grubenv(tmp_path, saved_entry=old_ref, next_entry="1>0")
    grub = blg.read_grub(str(tmp_path))
    assert grub["default"]["kernel"] == "6.1.0-56-amd64" and "grub-reboot" in grub["default_how"]
    assert os.path.getsize(os.path.join(str(tmp_path), "boot/grub/grubenv")) == 1024


def test_grub_default_index_and_title_forms():
    cfg = blg.parse_grub_cfg(fx.grub_cfg_text(["6.1.0-55-amd64", "6.1.0-56-amd64"]))
    entries = cfg["entries"]
    assert blg._resolve_grub(entries, "1>2")["kernel"] == "6.1.0-55-amd64"
    assert blg._resolve_grub(entries, "1")["index"] == "1>0"
    assert blg._resolve_grub(
        entries, "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux "
        "6.1.0-55-amd64")["index"] == "1>2"
    assert blg._resolve_grub(entries, "9") is None


def test_kernel_list_plain_and_pinned_blocks():
    plain = bl.parse_kernel_list(fx.KERNEL_LIST_PLAIN)
    assert plain == {"manual": [], "automatic": [OLD, NEW], "pinned": None, "next_boot": None}
    pinned = bl.parse_kernel_list(fx.KERNEL_LIST_PINNED)
    assert pinned["manual"] == ["6.5.13-6-pve"]
    assert pinned["pinned"] == OLD and pinned["next_boot"] == NEW


def test_pin_files_read_offline(tmp_path):
    assert bl.pbt_files(str(tmp_path))["pinned"] is None
    os.makedirs(os.path.join(str(tmp_path), "etc/kernel"))
    with open(os.path.join(str(tmp_path), "etc/kernel/next-boot-pin"), "w") as handle:
        handle.write(NEW + "\n")
    assert bl.pbt_files(str(tmp_path))["next_boot"] == NEW


def test_missing_params_values_flags_and_absent():
    line = "root=x amd-pstate=active processor.max_cstate=2 quiet"
    assert bl.missing_params(line, PARAMS) == ["processor.max_cstate=1", "nmi_watchdog=0"]
    assert bl.missing_params(TUNED, PARAMS) == []
    assert bl.missing_params(line, {"quiet": True, "splash": None}) == []
    assert bl.missing_params(line, {"mitigations": False}) == ["mitigations=off"]
    assert bl.missing_params("root=x mitigations=off", {"mitigations": False}) == []
    assert bl.missing_params(line, {"iommu": True}) == ["iommu"]
    assert bl.missing_params(line, {}, ["quiet", "processor.max_cstate=1"]) == ["!quiet"]


def test_check_entries_names_the_kernel_and_the_missing_parameter(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], PVE)
    sd = bls.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    result = bl.check_entries(sd["entries"], PARAMS, kernels=[NEW, "6.15.0-1-pve"])
    assert not result["ok"]
    assert "no boot entry for kernel 6.15.0-1-pve" in result["problems"]
    assert any(NEW in p and "amd_pstate=active" in p and "9B2E-4F1C" in p
               for p in result["problems"])
    fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED)
    sd = bls.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    assert bl.check_entries(sd["entries"], PARAMS, kernels=[NEW])["ok"]


def test_check_entries_skips_grub_recovery_entries():
    cfg = blg.parse_grub_cfg(fx.grub_cfg_text(["6.1.0-56-amd64"], default_opts="quiet "
                                             "amd_pstate=active"))
    assert bl.check_entries(cfg["entries"], {"amd_pstate": "active"})["ok"]
    cfg = blg.parse_grub_cfg(fx.grub_cfg_text(["6.1.0-56-amd64"]))
    result = bl.check_entries(cfg["entries"], {"amd_pstate": "active"})
    assert len(result["problems"]) == 2  # the simple entry and the advanced one
