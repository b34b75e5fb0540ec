"""/proc readers on the real formats."""

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from fixtures import lxc as lxcfix

SEED_AFTER_TWICE = lxcfix.proc_devices_text("after", caps_twice=True)


def test_sections_kept_apart_block_majors_are_not_char_majors():
    parsed = procfs.parse_proc_devices(lxcfix.proc_devices_text("after"))
    assert parsed["character"]["nvidia-uvm"] == 509
    assert parsed["character"]["nvidia-frontend"] == 195
    assert parsed["block"]["device-mapper"] == 252
    assert parsed["block"]["blkext"] == 259
    # 252 is tpmrm among character devices, device-mapper among block devices
    assert parsed["character"]["tpmrm"] == 252
    assert "device-mapper" not in parsed["character"]
    assert "nvidia-uvm" not in parsed["block"]


def test_before_era_has_the_old_majors():
    parsed = procfs.parse_proc_devices(lxcfix.proc_devices_text("before"))["character"]
    assert parsed["nvidia-uvm"] == 504
    assert parsed["nvidia-caps"] == 507


def test_a_name_under_two_majors_keeps_both(tmp_path):
    lxcfix.proc_devices(tmp_path, "after", caps_twice=True)
    assert procfs.char_majors(str(tmp_path))["nvidia-caps"] == [237, 238]
    assert procfs.char_major(str(tmp_path), "nvidia-caps") == 237
    # the convenience dict keeps the first
    assert procfs.parse_proc_devices(SEED_AFTER_TWICE)["character"]["nvidia-caps"] == 237


def test_one_major_with_several_names_and_names_with_slashes():
    entries = procfs.parse_proc_devices_entries(lxcfix.proc_devices_text("before"))
    assert (4, "/dev/vc/0") in entries["character"]
    assert (4, "ttyS") in entries["character"]
    assert (5, "/dev/ptmx") in entries["character"]
    names = procfs.char_majors(text=lxcfix.proc_devices_text("before"))
    assert names["cpu/msr"] == [202]


def test_registered_set_and_missing_file(tmp_path):
    with pytest.raises(procfs.ProcDevicesError, match="proc/devices is missing"):
        procfs.char_majors(str(tmp_path))
    with pytest.raises(procfs.ProcDevicesError, match="proc/devices is missing"):
        procfs.registered_char_majors(str(tmp_path))
    lxcfix.proc_devices(tmp_path, "after")
    regs = procfs.registered_char_majors(str(tmp_path))
    assert 509 in regs and 504 not in regs and 507 not in regs and 259 not in regs


def test_without_uvm_loaded(tmp_path):
    lxcfix.proc_devices(tmp_path, "after", without=("nvidia-uvm",))
    assert procfs.char_major(str(tmp_path), "nvidia-uvm") is None
    assert procfs.char_major(str(tmp_path), "nvidia-caps") == 238


PROC_MODULES = """nvidia_uvm 2076672 4 - Live 0x0000000000000000 (POE)
nvidia_drm 135168 0 - Live 0x0000000000000000 (POE)
nvidia_modeset 1638400 1 nvidia_drm, Live 0x0000000000000000 (POE)
nvidia 104071168 52 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)
zfs 6602752 6 - Live 0x0000000000000000 (PO)
"""


def test_loaded_modules(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "modules").write_text(PROC_MODULES)
    names = procfs.loaded_modules(str(tmp_path))
    assert names == ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia", "zfs"]
    assert procfs.module_loaded(str(tmp_path), "nvidia-uvm")
    assert not procfs.module_loaded(str(tmp_path), "nvidia_peermem")


def test_cmdline(tmp_path):
    (tmp_path / "proc").mkdir()
    line = ('initrd=\\EFI\\proxmox\\6.14.11-5-bpo12-pve\\initrd.img-6.14.11-5-bpo12-pve '
            'root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active processor.max_cstate=1 '
            'nmi_watchdog=0 quiet dyndbg="file drivers/x.c +p"\n')
    (tmp_path / "proc" / "cmdline").write_text(line)
    text = procfs.read_cmdline(str(tmp_path))
    assert text.endswith('+p"')
    params = procfs.cmdline_params(text)
    assert params["root"] == "ZFS=rpool/ROOT/pve-1"
    assert params["amd_pstate"] == "active"
    assert params["quiet"] is None
    assert params["dyndbg"] == "file drivers/x.c +p"
    assert procfs.read_cmdline(str(tmp_path / "nope")) is None


@pytest.mark.parametrize("text", ["", "garbage\n", "Character devices:\n"])
def test_odd_inputs_do_not_crash(text):
    assert procfs.parse_proc_devices(text) == {"character": {}, "block": {}}
