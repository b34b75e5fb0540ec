"""module_utils/bootloader_sdboot: Boot Loader Specification type #1 entries and
loader.conf (as proxmox-boot-tool and kernel-install write them: tests/fixtures/
subjects/boot/boot_entries.py), systemd-boot's EFI variables, the menu order and where the ESPs
are."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_sdboot
from fixtures import bootloader as fx

OLD, NEW = "6.8.12-9-pve", "6.14.11-5-bpo12-pve"
PVE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
TUNED = PVE + " amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
ESP_DIR = "/var/lib/gpuhost-doubles/esp"


def test_loader_entry_as_proxmox_boot_tool_writes_it(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED)
    data = boot_sdboot.read_esp(esp)
    assert [e["id"] for e in data["entries"]] == ["proxmox-%s.conf" % NEW,
                                                  "proxmox-%s.conf" % OLD]
    entry = [e for e in data["entries"] if e["kernel"] == NEW][0]
    assert entry["options"] == TUNED
    assert entry["title"] == "Proxmox Virtual Environment"
    assert entry["initrd"] == ["/EFI/proxmox/%s/initrd.img-%s" % (NEW, NEW)]
    assert data["loader_conf"] == {"timeout": "3", "default": "proxmox-*"}


def test_loader_entry_joins_options_lines_and_reads_kernel_install_layout():
    entry = boot_sdboot.parse_loader_entry(
        "title Debian\nversion 6.1.0-56-amd64\noptions root=UUID=x ro\noptions  quiet\n"
        "linux /abc/6.1.0-56-amd64/linux\ninitrd /abc/6.1.0-56-amd64/intel-ucode.img\n"
        "initrd /abc/6.1.0-56-amd64/initrd.img-6.1.0-56-amd64\n# comment\n")
    assert entry["options"] == "root=UUID=x ro quiet"
    assert len(entry["initrd"]) == 2
    no_version = boot_sdboot.parse_loader_entry("title x\nlinux /abc/6.1.0-9-amd64/linux\n")
    assert no_version["kernel"] == "6.1.0-9-amd64"


def test_systemd_boot_default_glob_picks_newest_and_pin_wins(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    assert sd["default"]["kernel"] == NEW and "loader.conf default" in sd["default_how"]
    # a pin (proxmox-boot-tool kernel pin OLD; refresh) writes the file name as default
    fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [OLD, NEW], TUNED,
               default="proxmox-%s.conf" % OLD)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), [{"uuid": "9B2E-4F1C", "path": esp}])
    assert sd["default"]["kernel"] == OLD


def test_version_order_is_numeric_not_alphabetic(tmp_path):
    esp = fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", ["6.8.12-10-pve", "6.8.12-9-pve"], PVE)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), [{"uuid": "A", "path": esp}])
    assert sd["default"]["kernel"] == "6.8.12-10-pve"


def test_efi_variables_override_loader_conf(tmp_path):
    base = fx.kernel_install_entries(tmp_path, ["6.1.0-55-amd64", "6.1.0-56-amd64"],
                                     "root=UUID=x ro quiet")
    esps = [{"uuid": None, "path": base}]
    assert boot_sdboot.read_systemd_boot(str(tmp_path), esps)["default"]["kernel"] == "6.1.0-56-amd64"  # noqa: E501
    fx.efivar(tmp_path, "LoaderEntryDefault", "%s-6.1.0-55-amd64.conf" % fx.MACHINE_ID)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), esps)
    assert sd["default"]["kernel"] == "6.1.0-55-amd64"
    assert sd["default_how"].startswith("LoaderEntryDefault")
    fx.efivar(tmp_path, "LoaderEntryOneShot", "%s-6.1.0-56-amd64.conf" % fx.MACHINE_ID)
    sd = boot_sdboot.read_systemd_boot(str(tmp_path), esps)
    assert sd["default"]["kernel"] == "6.1.0-56-amd64" and sd["oneshot"]


def test_boot_partition_search_order(tmp_path):
    assert boot_sdboot.boot_partition(str(tmp_path)) is None
    fx.kernel_install_entries(tmp_path, ["6.1.0-56-amd64"], "root=x", boot="/boot/efi")
    assert boot_sdboot.boot_partition(str(tmp_path)) == "/boot/efi"


def test_locate_esps_by_uuid_and_reports_unreadable(tmp_path):
    fx.pbt_esp(tmp_path, ESP_DIR, "9B2E-4F1C", [NEW], TUNED)
    found = boot_sdboot.locate_esps(str(tmp_path), [ESP_DIR], ["9B2E-4F1C", "9B2E-A7D3"])
    assert found[0]["uuid"] == "9B2E-4F1C" and found[0]["path"].endswith("9B2E-4F1C")
    assert {"uuid": "9B2E-A7D3", "path": None} in found
    # without the uuid list every ESP-looking subfolder counts
    assert [f["uuid"] for f in boot_sdboot.locate_esps(str(tmp_path), [ESP_DIR])] == ["9B2E-4F1C"]


def test_loader_conf_last_assignment_wins_and_comments_skipped():
    conf = boot_sdboot.parse_loader_conf("# systemd-boot\ntimeout 3\n#default x\ndefault proxmox-*\n"  # noqa: E501
                                 "console-mode keep\ntimeout 5\n")
    assert conf == {"timeout": "5", "default": "proxmox-*", "console-mode": "keep"}


def test_sort_key_orders_before_version():
    # BLS: entries with sort-key first (ascending), then by version, newest first
    entries = [dict(boot_sdboot.parse_loader_entry(text), id=name) for name, text in (
        ("a.conf", "title A\nversion 6.8.12-9-pve\n"),
        ("b.conf", "title B\nversion 6.14.11-5-bpo12-pve\n"),
        ("c.conf", "title C\nsort-key zz\nversion 6.1.0-1-amd64\n"))]
    entry, how = boot_sdboot.default_entry(entries)
    assert entry["id"] == "c.conf" and how == "first menu entry"
    entry, how = boot_sdboot.default_entry(entries[:2], conf_default="a")  # glob without .conf
    assert entry["id"] == "a.conf" and how == "loader.conf default a"
    assert boot_sdboot.default_entry([]) == (None, "no entries")


def test_efivar_needs_attributes_and_a_value(tmp_path):
    assert boot_sdboot.read_efivar(str(tmp_path), "LoaderEntryOneShot") is None
    fx.efivar(tmp_path, "LoaderEntryOneShot", "")
    assert boot_sdboot.read_efivar(str(tmp_path), "LoaderEntryOneShot") is None
    fx.efivar(tmp_path, "LoaderEntryOneShot", "proxmox-%s.conf" % NEW)
    assert boot_sdboot.read_efivar(str(tmp_path), "LoaderEntryOneShot") == "proxmox-%s.conf" % NEW


def test_pbt_uuids_one_per_line(tmp_path):
    assert boot_sdboot.pbt_uuids(str(tmp_path)) is None
    path = tmp_path / "etc/kernel"
    path.mkdir(parents=True)
    (path / "proxmox-boot-uuids").write_text("9B2E-4F1C\n\n9B2E-A7D3\n")
    assert boot_sdboot.pbt_uuids(str(tmp_path)) == ["9B2E-4F1C", "9B2E-A7D3"]
