"""boot_entries, kernel_state and initramfs_check modules: what a user sees in the task
result."""

import os
import stat

from ansible_collections.gpuhost.tuning.plugins.modules import (
    boot_entries,
    initramfs_check,
    kernel_state,
)
from fixtures import boot, dkms, hosts
from fixtures import bootloader as fx
from modrun import run_module

OLD, NEW = hosts.SEED_RUNNING, hosts.SEED_NEW
PARAMS = {"amd_pstate": "active", "processor.max_cstate": "1", "nmi_watchdog": "0"}
ESP_DIR = "/var/lib/gpuhost-doubles/esp"
UUIDS = ("9B2E-4F1C", "9B2E-A7D3")


def _seed(tmp_path, cmdline=hosts.PVE_CMDLINE):
    root = str(tmp_path)
    dkms.seed(root)
    boot.proxmox_systemd_boot(root, cmdline=cmdline, uuids=UUIDS)
    for uuid in UUIDS:
        fx.pbt_esp(root, ESP_DIR, uuid, [OLD, NEW], cmdline)
    return root


def run(args, check_mode=False):
    return run_module(boot_entries, args, check_mode=check_mode)


def state(args):
    return run_module(kernel_state, args)


def test_seed_host_next_boot_target_packages_and_dkms_gap(tmp_path):
    root = _seed(tmp_path)
    res = run({"root": root, "esp_dirs": [ESP_DIR]})
    assert not res.get("failed"), res
    assert res["backend"] == "systemd-boot" and res["tool"] == "proxmox-boot-tool"
    assert res["next_boot_kernel"] == NEW
    assert len(res["esps"]) == 2 and res["unreadable_esps"] == []
    assert res["kernel_list"]["pinned"] is None
    # the kernel side is kernel_state's, not the boot loader's
    assert not {"running", "kernels", "target", "dkms", "configured_cmdline"} & set(res)
    res = state({"root": root, "kernel": NEW})
    assert not res.get("failed"), res
    assert res["changed"] is False
    assert res["target"]["image_package"] == "proxmox-kernel-%s-signed" % NEW
    assert res["target"]["headers_package"] == "proxmox-headers-%s" % NEW
    assert res["target"]["installed"] and not res["target"]["headers"]
    assert res["running"]["kernel"] == OLD
    assert res["kernels"]["newest"] == NEW
    installed = {(e["name"], e["kernel"]) for e in res["dkms"] if e["state"] == "installed"}
    assert ("nvidia", OLD) in installed and ("nvidia", NEW) not in installed


def test_require_fails_naming_esp_entry_and_parameter(tmp_path):
    root = _seed(tmp_path)
    res = run({"root": root, "esp_dirs": [ESP_DIR], "params": PARAMS, "kernels": [NEW],
               "require": True})
    assert res["failed"]
    assert "9B2E-4F1C:loader/entries/proxmox-%s.conf" % NEW in res["msg"]
    assert "amd_pstate=active" in res["msg"]
    running = state({"root": root, "params": PARAMS})["running"]
    assert running["kernel"] == OLD
    assert running["missing"] == ["amd_pstate=active", "processor.max_cstate=1",
                                  "nmi_watchdog=0"]


def test_require_passes_when_every_esp_carries_the_parameters(tmp_path):
    tuned = hosts.PVE_CMDLINE + " " + hosts.TUNED_PARAMS
    root = _seed(tmp_path, cmdline=tuned)
    res = run({"root": root, "esp_dirs": [ESP_DIR], "params": PARAMS, "kernels": [NEW],
               "require": True, "require_next_boot": NEW})
    assert not res.get("failed"), res["msg"] if res.get("failed") else ""
    assert res["check"]["ok"] and len(res["check"]["checked"]) == 2


def test_one_stale_esp_out_of_two_fails(tmp_path):
    tuned = hosts.PVE_CMDLINE + " " + hosts.TUNED_PARAMS
    root = _seed(tmp_path, cmdline=tuned)
    fx.pbt_esp(root, ESP_DIR, UUIDS[1], [OLD, NEW], hosts.PVE_CMDLINE)
    res = run({"root": root, "esp_dirs": [ESP_DIR], "params": PARAMS, "require": True})
    assert res["failed"] and UUIDS[1] in res["msg"] and UUIDS[0] not in res["msg"]


def test_esp_not_found_is_a_failure_not_a_pass(tmp_path):
    tuned = hosts.PVE_CMDLINE + " " + hosts.TUNED_PARAMS
    root = _seed(tmp_path, cmdline=tuned)
    res = run({"root": root, "esp_dirs": ["/nowhere"], "params": PARAMS, "require": True})
    assert res["failed"] and "unreadable" in res["msg"]


def test_pinned_next_boot_is_reported_and_required_kernel_checked(tmp_path):
    root = _seed(tmp_path)
    with open(os.path.join(root, "etc/kernel/next-boot-pin"), "w") as handle:
        handle.write(OLD + "\n")
    for uuid in UUIDS:
        fx.pbt_esp(root, ESP_DIR, uuid, [OLD, NEW], hosts.PVE_CMDLINE,
                   default="proxmox-%s.conf" % OLD)
    res = run({"root": root, "esp_dirs": [ESP_DIR], "require": True,
               "require_next_boot": NEW})
    assert res["failed"] and "will boot %s next" % OLD in res["msg"]
    assert res["kernel_list"]["next_boot"] == OLD


def test_debian_grub_host_entries_and_grub_ref(tmp_path):
    root = str(tmp_path)
    dkms.kernel_tree(root, "6.1.0-56-amd64")
    dkms.kernel_tree(root, "6.1.0-55-amd64")
    boot.debian_grub(root, default="quiet")
    fx.grub_cfg(root, ["6.1.0-55-amd64", "6.1.0-56-amd64"], default_opts="quiet")
    res = run({"root": root, "params": {"amd_pstate": "active"}})
    assert res["backend"] == "grub" and res["next_boot_kernel"] == "6.1.0-56-amd64"
    assert not res["check"]["ok"]
    assert res["grub_ref"]["6.1.0-55-amd64"].endswith(
        ">gnulinux-6.1.0-55-amd64-advanced-%s" % fx.ROOT_UUID)
    kernel = state({"root": root, "kernel": "6.1.0-56-amd64"})
    assert kernel["target"]["image_package"] == "linux-image-6.1.0-56-amd64"
    assert kernel["configured_cmdline"] == "quiet"
    assert kernel["kernels"]["installed"] == ["6.1.0-55-amd64", "6.1.0-56-amd64"]
    assert state({"root": root, "kernel": "6.1.0-56 ; rm"})["failed"]


def test_check_mode_is_read_only(tmp_path, snapshot_tree):
    root = _seed(tmp_path)
    before = snapshot_tree(root)
    res = run({"root": root, "esp_dirs": [ESP_DIR], "params": PARAMS}, check_mode=True)
    assert not res["changed"] and snapshot_tree(root) == before


def _lsinitramfs(folder, listing, rc=0):
    path = os.path.join(str(folder), "lsinitramfs")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\ncat <<'EOF'\n%sEOF\nexit %d\n" % (listing, rc))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_initramfs_check_finds_and_misses_the_modprobe_file(tmp_path):
    root = tmp_path / "root"
    dkms.kernel_tree(str(root), NEW)
    lister = _lsinitramfs(tmp_path, "kernel\nkernel/x86\nusr/lib/modprobe.d/aliases.conf\n"
                          "etc/modprobe.d\netc/modprobe.d/gpuhost-nvidia-uvm.conf\n")
    conf = "/etc/modprobe.d/gpuhost-nvidia-uvm.conf"
    res = run_module(initramfs_check, {"root": str(root), "kernels": [NEW], "files": [conf],
                                       "executable": lister})
    assert not res.get("failed") and res["images"][0]["present"] == [conf]
    lister = _lsinitramfs(tmp_path, "etc/modprobe.d\netc/modprobe.d/other.conf\n")
    res = run_module(initramfs_check, {"root": str(root), "kernels": [NEW, "6.0.0-1-pve"],
                                       "files": [conf], "executable": lister})
    assert res["failed"] and res["stale"] == [NEW, "6.0.0-1-pve"]
    assert "update-initramfs -u -k %s" % NEW in res["msg"]
    assert "/boot/initrd.img-6.0.0-1-pve does not exist" in res["msg"]


def test_initramfs_check_absent_file_still_inside(tmp_path):
    root = tmp_path / "root"
    dkms.kernel_tree(str(root), NEW)
    lister = _lsinitramfs(tmp_path, "etc/modprobe.d/gpuhost-nvidia-uvm.conf\n")
    res = run_module(initramfs_check, {"root": str(root), "kernels": [NEW], "require": False,
                                       "absent_files": ["/etc/modprobe.d/gpuhost-nvidia-uvm.conf"],
                                       "executable": lister})
    assert not res.get("failed") and not res["ok"] and res["stale"] == [NEW]


def test_kernel_state_initramfs_kernels_and_dkms_needed_follow_the_audits_rules(tmp_path):
    root = _seed(tmp_path)
    res = state({"root": root, "kernel": NEW, "next_boot": NEW})
    # running and newest (also next boot and target): both initramfs, oldest first
    assert res["initramfs_kernels"] == [OLD, NEW]
    # nvidia runs on the old kernel: the new one needs it
    assert res["dkms_needed"] == ["nvidia"]
    # a target that is not installed has no initramfs to make; without kernel the next
    # boot's needs count
    res = state({"root": root, "kernel": "6.14.11-9-bpo12-pve"})
    assert res["initramfs_kernels"] == [OLD, NEW]
    assert state({"root": root, "next_boot": NEW})["dkms_needed"] == ["nvidia"]
