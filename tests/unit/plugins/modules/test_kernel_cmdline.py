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
    assert result["failed"] and "no boot loader configuration under" in result["msg"]
    assert "/etc/kernel/cmdline" in result["msg"] and "backend=grub" in result["msg"]


def test_forced_grub_without_grub_files_names_the_option(tmp_path):
    result = _run(tmp_path, backend="grub", params={"nmi_watchdog": 0})
    assert result["failed"] and result["msg"].startswith("backend=grub: no /etc/default/grub")
    assert "gpuhost_boot_config_backend" in result["msg"]


# --- YAML booleans: `mitigations: off` arrives as False and means mitigations=off


def test_false_from_yaml_off_writes_off_and_warns(tmp_path):
    import yaml
    path = boot.proxmox_systemd_boot(tmp_path)
    params = yaml.safe_load("mitigations: off\npti: no\nnmi_watchdog: 0\n")
    assert params["mitigations"] is False and params["pti"] is False  # what the module gets
    result = _run(tmp_path, params=params)
    assert not result.get("failed"), result.get("msg")
    assert result["after"] == PVE + " mitigations=off pti=off nmi_watchdog=0"
    assert open(path).read() == result["after"] + "\n"
    (warning,) = result["warnings"]
    # ansible-core 2.19 returns a summary with the text under event.msg; older ones a str
    text = warning["event"]["msg"] if isinstance(warning, dict) else warning
    assert "params mitigations, pti: false" in text and "written as =off" in text
    again = _run(tmp_path, params=params)
    assert again["changed"] is False and not again.get("warnings")


def test_false_replaces_a_present_value_in_place(tmp_path):
    path = boot.proxmox_systemd_boot(tmp_path, cmdline=PVE + " mitigations=auto quiet")
    result = _run(tmp_path, params={"mitigations": False})
    assert result["after"] == PVE + " mitigations=off quiet"
    assert open(path).read() == PVE + " mitigations=off quiet\n"


def test_false_on_grub_and_in_a_list(tmp_path):
    path = boot.debian_grub(tmp_path)
    result = _run(tmp_path, params={"pcie_aspm": False, "console": ["tty0", False]})
    assert not result.get("failed"), result.get("msg")
    assert result["after"] == "quiet pcie_aspm=off console=tty0 console=off"
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet pcie_aspm=off console=tty0 console=off"' in \
        open(path).read()


def test_null_and_absent_still_remove(tmp_path):
    boot.proxmox_systemd_boot(tmp_path, cmdline=PVE + " quiet splash mitigations=off")
    result = _run(tmp_path, params={"splash": None}, absent=["quiet"])
    assert result["after"] == PVE + " mitigations=off"
    assert not result.get("warnings")


def test_true_is_still_a_flag(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    result = _run(tmp_path, params={"nosmt": True, "intel_iommu": "on"})
    assert result["after"] == PVE + " nosmt intel_iommu=on"


def test_false_in_check_mode_writes_nothing(tmp_path, snapshot_tree):
    boot.proxmox_systemd_boot(tmp_path)
    before = snapshot_tree(str(tmp_path))
    result = _run(tmp_path, check_mode=True, params={"mitigations": False})
    assert result["changed"] and result["after"] == PVE + " mitigations=off"
    assert snapshot_tree(str(tmp_path)) == before
