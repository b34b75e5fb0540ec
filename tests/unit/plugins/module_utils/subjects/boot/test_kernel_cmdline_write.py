"""bootcfg_write: editing a kernel command line (``apply``) and the GRUB and systemd-boot
plans and writes, on the boot fixtures of tests/fixtures/boot.py (moved from
test_bootcfg.py, which keeps the reading side)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernel_cmdline
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    kernel_cmdline_write,
)
from fixtures import boot

PVE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
SEED_PARAMS = {"amd_pstate": "active", "processor.max_cstate": 1, "nmi_watchdog": 0}


def test_apply_seed_params_appends_in_order_and_keeps_root():
    out = kernel_cmdline_write.apply(PVE, SEED_PARAMS)
    assert out == PVE + " amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
    assert kernel_cmdline_write.apply(out, SEED_PARAMS) == out


def test_apply_replaces_in_place_and_drops_duplicates():
    line = "root=/dev/sda1 nmi_watchdog=1 quiet nmi_watchdog=panic splash"
    assert kernel_cmdline_write.apply(line, {"nmi_watchdog": 0}) == (
        "root=/dev/sda1 nmi_watchdog=0 quiet splash")


def test_apply_dash_and_underscore_are_one_name():
    assert kernel_cmdline_write.apply("root=x amd-pstate=passive", {"amd_pstate": "active"}) == (
        "root=x amd_pstate=active")


def test_apply_flags_removal_and_false():
    line = "root=x quiet splash mitigations=auto"
    assert kernel_cmdline_write.apply(line, {"quiet": True}) == line
    assert kernel_cmdline_write.apply(line, {"splash": None, "iommu": "pt"}, ["mitigations"]) == (
        "root=x quiet iommu=pt")
    # YAML's unquoted `mitigations: off` arrives as False: the user means the word "off"
    assert kernel_cmdline_write.apply(line, {"mitigations": False}) == (
        "root=x quiet splash mitigations=off")
    assert kernel_cmdline_write.apply(line, {"quiet": None}) == "root=x splash mitigations=auto"
    assert kernel_cmdline_write.apply("root=x quiet=1", {"quiet": True}) == "root=x quiet"


def test_apply_quotes_values_with_spaces_and_keeps_untouched_tokens():
    line = 'root=x dyndbg="module nvidia +p"'
    assert kernel_cmdline_write.apply(line, {"foo": "a b"}) == 'root=x dyndbg="module nvidia +p" foo="a b"'  # noqa: E501


def test_apply_unchanged_string_is_returned_byte_for_byte():
    line = "root=x   quiet\tsplash"
    assert kernel_cmdline_write.apply(line, {"quiet": True}, ["absentparam"]) is line


def test_apply_absent_with_value_removes_only_that_pair_and_lists_repeat():
    line = "root=x console=tty0 console=ttyS0,115200"
    assert kernel_cmdline_write.apply(line, {}, ["console=tty0"]) == "root=x console=ttyS0,115200"
    assert kernel_cmdline_write.apply(line, {"console": ["ttyS1,115200", "tty0"]}) == (
        "root=x console=ttyS1,115200 console=tty0")


def test_apply_adds_before_init_arguments():
    assert kernel_cmdline_write.apply("root=x ro -- single", {"quiet": True}) == (
        "root=x ro quiet -- single")


def test_apply_refuses_removing_root_and_conflicts():
    with pytest.raises(kernel_cmdline.BootConfigError, match="root="):
        kernel_cmdline_write.apply(PVE, {}, ["root"])
    with pytest.raises(kernel_cmdline.BootConfigError, match="both"):
        kernel_cmdline_write.apply(PVE, {"quiet": True}, ["quiet"])


def test_plan_systemd_boot_seed(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    planned = kernel_cmdline_write.plan(str(tmp_path), SEED_PARAMS)
    assert planned["changed"] and planned["refresh_required"]
    assert planned["refresh_commands"] == [["proxmox-boot-tool", "refresh"]]
    assert planned["files"][0]["content_after"] == (
        PVE + " amd_pstate=active processor.max_cstate=1 nmi_watchdog=0\n")
    assert [f["path"] for f in planned["files"]] == ["/etc/kernel/cmdline"]


def test_plan_systemd_boot_without_root_fails_for_proxmox(tmp_path):
    boot.proxmox_systemd_boot(tmp_path, cmdline="boot=zfs quiet")
    with pytest.raises(kernel_cmdline.BootConfigError, match="no root="):
        kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})


def test_plan_systemd_boot_missing_file_starts_from_proc_cmdline(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    (tmp_path / "etc/kernel/cmdline").unlink()
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})
    assert planned["after"] == PVE + " nmi_watchdog=0"  # initrd= dropped
    assert planned["files"][0]["exists"] is False


def test_plan_systemd_boot_refuses_multi_line_file(tmp_path):
    boot.proxmox_systemd_boot(tmp_path)
    (tmp_path / "etc/kernel/cmdline").write_text(PVE + "\nquiet\n")
    with pytest.raises(kernel_cmdline.BootConfigError, match="one line"):
        kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})


def test_plan_grub_edits_one_line_keeps_others(tmp_path):
    path = boot.debian_grub(tmp_path)
    original = open(path).read()
    planned = kernel_cmdline_write.plan(str(tmp_path), SEED_PARAMS)
    new = planned["files"][0]["content_after"]
    old_lines, new_lines = original.splitlines(True), new.splitlines(True)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert len(old_lines) == len(new_lines) and changed == [8]
    assert new_lines[8] == ('GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=active '
                            'processor.max_cstate=1 nmi_watchdog=0"\n')
    assert planned["refresh_commands"] == [["update-grub"]]
    assert planned["before"] == "quiet"


def test_plan_grub_keeps_single_quote_style_and_edits_grub_cmdline_linux(tmp_path):
    path = boot.debian_grub(tmp_path, linux="nmi_watchdog=1 console=ttyS0")
    text = open(path).read().replace('GRUB_CMDLINE_LINUX_DEFAULT="quiet"',
                                     "GRUB_CMDLINE_LINUX_DEFAULT='quiet'")
    open(path, "w").write(text)
    planned = kernel_cmdline_write.plan(str(tmp_path), SEED_PARAMS)
    new = planned["files"][0]["content_after"]
    assert "GRUB_CMDLINE_LINUX_DEFAULT='quiet amd_pstate=active processor.max_cstate=1'\n" in new
    assert 'GRUB_CMDLINE_LINUX="nmi_watchdog=0 console=ttyS0"\n' in new
    assert planned["after"] == (
        "nmi_watchdog=0 console=ttyS0 quiet amd_pstate=active processor.max_cstate=1")


def test_plan_grub_dropin_override_is_edited_not_dead_default(tmp_path):
    path = boot.debian_grub(tmp_path)
    dropin = boot.grub_dropin(tmp_path)
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0}, ["quiet"])
    files = {f["path"]: f for f in planned["files"]}
    assert not files["/etc/default/grub"]["changed"]  # overridden: dead text, left alone
    assert files["/etc/default/grub"]["content_after"] == open(path).read()
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0 nmi_watchdog=0"\n' in (
        files["/etc/default/grub.d/50-cloudimg-settings.cfg"]["content_after"])
    assert open(dropin).read() != files["/etc/default/grub.d/50-cloudimg-settings.cfg"][
        "content_after"]


def test_plan_grub_append_style_dropin_does_not_duplicate(tmp_path):
    boot.debian_grub(tmp_path, default="quiet nmi_watchdog=1")
    boot.grub_dropin(tmp_path, "90-extra.cfg",
                     text='GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"\n')
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0, "amd_pstate": "active"})
    assert planned["after"] == "quiet nmi_watchdog=0 iommu=pt amd_pstate=active"
    files = {f["path"]: f["content_after"] for f in planned["files"]}
    assert files["/etc/default/grub.d/90-extra.cfg"] == (
        'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt amd_pstate=active"\n')


def test_plan_grub_new_dropin_file(tmp_path):
    boot.debian_grub(tmp_path)
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0}, grub_file="99-gpuhost.cfg")  # noqa: E501
    files = {f["path"]: f for f in planned["files"]}
    new = files["/etc/default/grub.d/99-gpuhost.cfg"]
    assert new["exists"] is False and new["changed"]
    assert new["content_after"].endswith(
        'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT nmi_watchdog=0"\n')
    assert planned["after"] == "quiet nmi_watchdog=0"
    assert not files["/etc/default/grub"]["changed"]


def test_plan_grub_file_overridden_later_fails(tmp_path):
    boot.debian_grub(tmp_path)
    boot.grub_dropin(tmp_path)  # 50-cloudimg-settings.cfg sets the variable outright
    with pytest.raises(kernel_cmdline.BootConfigError, match="would not reach the kernel"):
        kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0},
                                  grub_file="/etc/default/grub.d/10-a.cfg")


def test_write_keeps_mode(tmp_path):
    path = boot.proxmox_systemd_boot(tmp_path)
    import os
    os.chmod(path, 0o600)
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})
    kernel_cmdline_write.write(str(tmp_path), planned)
    assert open(path).read() == PVE + " nmi_watchdog=0\n"
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_grub_unquoted_and_empty_values_get_quoted(tmp_path):
    path = boot.debian_grub(tmp_path)
    text = open(path).read().replace('GRUB_CMDLINE_LINUX_DEFAULT="quiet"',
                                     "GRUB_CMDLINE_LINUX_DEFAULT=quiet")
    open(path, "w").write(text)
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})
    new = planned["files"][0]["content_after"]
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet nmi_watchdog=0"\n' in new
    planned = kernel_cmdline_write.plan(str(tmp_path), {}, ["quiet"])
    assert 'GRUB_CMDLINE_LINUX_DEFAULT=""\n' in planned["files"][0]["content_after"]


def test_grub_escaped_inner_quotes_survive(tmp_path):
    path = boot.debian_grub(tmp_path)
    text = open(path).read().replace(
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet"',
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet dyndbg=\\"module nvidia +p\\""')
    open(path, "w").write(text)
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})
    assert planned["before"] == 'quiet dyndbg="module nvidia +p"'
    assert ('GRUB_CMDLINE_LINUX_DEFAULT="quiet dyndbg=\\"module nvidia +p\\" nmi_watchdog=0"\n'
            in planned["files"][0]["content_after"])


def test_grub_crlf_line_endings_kept(tmp_path):
    path = boot.debian_grub(tmp_path)
    data = open(path).read().replace("\n", "\r\n")
    open(path, "w", newline="").write(data)
    planned = kernel_cmdline_write.plan(str(tmp_path), {"nmi_watchdog": 0})
    after = planned["files"][0]["content_after"]
    assert after.count("\r\n") == data.count("\r\n")
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet nmi_watchdog=0"\r\n' in after
