"""module_utils/bootloader_grub: grub.cfg menu entries (menuentry in submenu, as
grub-mkconfig's 10_linux writes them: tests/fixtures/bootloader.py), grubenv and the entry
GRUB boots without a key press."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_grub
from fixtures import bootloader as fx


def test_grub_cfg_entries_submenu_ids_and_options():
    text = fx.grub_cfg_text(["6.1.0-55-amd64", "6.1.0-56-amd64"],
                            default_opts="quiet amd_pstate=active")
    cfg = boot_grub.parse_grub_cfg(text)
    titles = [">".join(e["path_titles"]) for e in cfg["entries"]]
    assert titles[0] == "Debian GNU/Linux"
    assert titles[1] == ("Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux "
                         "6.1.0-56-amd64")
    normal = cfg["entries"][1]
    assert normal["index"] == "1>0"
    assert normal["kernel"] == "6.1.0-56-amd64"
    assert normal["options"] == "root=UUID=%s ro quiet amd_pstate=active" % fx.ROOT_UUID
    assert boot_grub.grub_entry_ref(normal) == "gnulinux-advanced-%s>gnulinux-6.1.0-56-amd64-" \
        "advanced-%s" % (fx.ROOT_UUID, fx.ROOT_UUID)
    recovery = cfg["entries"][2]
    assert recovery["recovery"] and "single" in recovery["options"]
    assert cfg["entries"][-1]["title"] == "UEFI Firmware Settings"
    assert cfg["entries"][-1]["kernel"] is None
    assert cfg["defaults"] == ["0"] and cfg["uses_next_entry"]


def test_grub_default_follows_grubenv(tmp_path):
    ks = ["6.1.0-55-amd64", "6.1.0-56-amd64"]
    fx.grub_cfg(tmp_path, ks)
    grub = boot_grub.read_grub(str(tmp_path))
    assert grub["default"]["kernel"] == "6.1.0-56-amd64"
    assert grub["default"]["index"] == "0"
    # GRUB_DEFAULT=saved with grub-set-default to the old kernel, grub-reboot to the new
    fx.grub_cfg(tmp_path, ks, default="saved")
    old_ref = "gnulinux-advanced-%s>gnulinux-6.1.0-55-amd64-advanced-%s" % (
        fx.ROOT_UUID, fx.ROOT_UUID)
    fx.grubenv(tmp_path, saved_entry=old_ref)
    grub = boot_grub.read_grub(str(tmp_path))
    assert grub["default"]["kernel"] == "6.1.0-55-amd64"
    assert "saved_entry" in grub["default_how"]
    fx.grubenv(tmp_path, saved_entry=old_ref, next_entry="1>0")
    grub = boot_grub.read_grub(str(tmp_path))
    assert grub["default"]["kernel"] == "6.1.0-56-amd64" and "grub-reboot" in grub["default_how"]
    assert os.path.getsize(os.path.join(str(tmp_path), "boot/grub/grubenv")) == 1024


def test_grub_default_index_and_title_forms():
    cfg = boot_grub.parse_grub_cfg(fx.grub_cfg_text(["6.1.0-55-amd64", "6.1.0-56-amd64"]))
    entries = cfg["entries"]
    assert boot_grub._resolve_grub(entries, "1>2")["kernel"] == "6.1.0-55-amd64"
    assert boot_grub._resolve_grub(entries, "1")["index"] == "1>0"
    assert boot_grub._resolve_grub(
        entries, "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux "
        "6.1.0-55-amd64")["index"] == "1>2"
    assert boot_grub._resolve_grub(entries, "9") is None


def test_grubenv_as_grub_editenv_writes_it():
    # grub-editenv: a header line, key=value lines, '#' padding to 1024 bytes
    block = "# GRUB Environment Block\nsaved_entry=gnulinux-advanced-x>gnulinux-6.1-x\n" \
        "next_entry=1>0\n"
    block += "#" * (1024 - len(block))
    env = boot_grub.parse_grubenv(block)
    assert env == {"saved_entry": "gnulinux-advanced-x>gnulinux-6.1-x", "next_entry": "1>0"}
    assert boot_grub.parse_grubenv(None) == {}


def test_next_entry_ignored_when_grub_cfg_does_not_read_it():
    cfg = boot_grub.parse_grub_cfg(
        "set default=\"0\"\n"
        "menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-x' {\n"
        "\tlinux\t/boot/vmlinuz-6.1.0-56-amd64 root=UUID=x ro  quiet\n"
        "\tinitrd\t/boot/initrd.img-6.1.0-56-amd64\n"
        "}\n"
        "menuentry 'Memory test (memtest86+x64.efi)' --class memtest {\n"
        "\tlinux\t/boot/memtest86+x64.efi\n"
        "}\n")
    assert not cfg["uses_next_entry"]
    assert cfg["entries"][0]["id"] == "gnulinux-simple-x"
    assert cfg["entries"][0]["options"] == "root=UUID=x ro quiet"
    entry, how = boot_grub.grub_default_entry(cfg, {"next_entry": "1"})
    assert entry["index"] == "0" and how == "set default=0"


def test_read_grub_takes_the_first_cfg_found(tmp_path):
    assert boot_grub.read_grub(str(tmp_path)) is None
    path = os.path.join(str(tmp_path), "boot/grub2")
    os.makedirs(path)
    with open(os.path.join(path, "grub.cfg"), "w") as handle:
        handle.write(fx.grub_cfg_text(["6.1.0-56-amd64"]))
    grub = boot_grub.read_grub(str(tmp_path))
    assert grub["grub_cfg"] == "/boot/grub2/grub.cfg" and grub["grubenv"] == {}
    assert grub["entries"][0]["where"] == "/boot/grub2/grub.cfg: Debian GNU/Linux"
