"""Testinfra checks of the kernel scenario (after converge and idempotence): playbook
reboot_verify moved the Proxmox-like container from 6.1.0-55-amd64 to 6.1.0-56-amd64 with
real apt, dkms and update-initramfs, and the proxmox-boot-tool double; nothing rebooted."""

import json
import os

# The platform (scripts/molecule.sh exports these per run from the image's labels):
# Debian 12 (bookworm, the default) or Debian 13 (trixie), its old and new kernel.
SUITE = os.environ.get("GPUHOST_TEST_SUITE", "bookworm")
HOST = "gpuhost-%s-%s" % (os.environ["MOLECULE_SCENARIO_NAME"], SUITE)
OLD = os.environ.get("GPUHOST_OLD_KERNEL", "6.1.0-55-amd64")
NEW = os.environ.get("GPUHOST_NEW_KERNEL", "6.1.0-56-amd64")
# dkms 3.2.2 installs gpustub.ko.xz for Debian 13's kernels (CONFIG_MODULE_COMPRESS_XZ)
KO = {"trixie": ".ko.xz"}.get(SUITE, ".ko")
testinfra_hosts = ["podman://" + HOST]
PARAMS = "amd_pstate=active processor.max_cstate=1 nmi_watchdog=0"
MODPROBE = "/etc/modprobe.d/gpuhost-gpustub.conf"
ESP = "/var/lib/gpuhost-doubles/esp/5A3E-11C0"
REPORT = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "reports",
                      "%s-reboot.json" % HOST)


def doubles_calls(host):
    log = host.file("/var/log/gpuhost-doubles.jsonl").content_string
    return [json.loads(line)["argv"] for line in log.splitlines() if line.strip()]


def report():
    with open(REPORT) as handle:
        return json.load(handle)


def test_new_image_and_headers_are_installed(host):
    for package in ("linux-image-" + NEW, "linux-headers-" + NEW):
        status = host.run("dpkg -s %s" % package)
        assert "Status: install ok installed" in status.stdout, package + status.stderr
    assert host.file("/boot/vmlinuz-" + NEW).is_file
    assert host.file("/lib/modules/%s/build/Makefile" % NEW).is_file  # headers reachable


def test_gpustub_is_built_and_installed_for_the_new_kernel(host):
    ko = host.file("/lib/modules/%s/updates/dkms/gpustub%s" % (NEW, KO))
    assert ko.is_file and ko.size > 0
    status = host.check_output("dkms status gpustub")
    assert "gpustub/1.0, %s, x86_64: installed" % NEW in status
    assert "gpustub/1.0, %s, x86_64: installed" % OLD in status  # the old one kept
    # what modprobe would load after the reboot, built against the new kernel
    assert host.check_output("modinfo -k %s -F filename gpustub" % NEW) == ko.path
    assert host.check_output("modinfo -k %s -F vermagic gpustub" % NEW).startswith(NEW + " ")


def test_modprobe_options_file_is_written(host):
    conf = host.file(MODPROBE)
    assert "options gpustub disable_hmm=1\n" in conf.content_string


def test_new_initramfs_carries_the_options_and_the_driver(host):
    names = host.check_output("lsinitramfs /boot/initrd.img-%s" % NEW).splitlines()
    assert MODPROBE.lstrip("/") in names
    assert "usr/lib/modules/%s/updates/dkms/gpustub%s" % (NEW, KO) in names
    # the file inside the image is the one on disk, not an older copy
    inside = host.check_output(
        "d=$(mktemp -d) && unmkinitramfs /boot/initrd.img-%s $d && cat $d/%s; rm -rf $d"
        % (NEW, MODPROBE.lstrip("/")))
    assert inside + "\n" == host.file(MODPROBE).content_string


def test_kernel_cmdline_carries_the_parameters_after_root(host):
    cmdline = host.file("/etc/kernel/cmdline").content_string
    assert cmdline == "root=ZFS=rpool/ROOT/pve-1 boot=zfs %s\n" % PARAMS


def test_esp_boots_the_new_kernel_next_with_the_parameters_and_new_initrd(host):
    assert "default proxmox-%s.conf" % NEW in host.file(ESP + "/loader/loader.conf").content_string
    entry = host.file("%s/loader/entries/proxmox-%s.conf" % (ESP, NEW)).content_string
    assert "options  root=ZFS=rpool/ROOT/pve-1 boot=zfs %s\n" % PARAMS in entry
    # the initrd the loader reads is the regenerated one
    host.run_expect([0], "cmp /boot/initrd.img-{0} {1}/EFI/proxmox/{0}/initrd.img-{0}"
                    .format(NEW, ESP))
    assert host.file("/etc/kernel/next-boot-pin").content_string.strip() == NEW


def test_double_was_asked_to_pin_for_one_boot_and_refresh(host):
    calls = doubles_calls(host)
    pins = [c for c in calls if c[1:3] == ["kernel", "pin"]]
    assert pins == [["proxmox-boot-tool", "kernel", "pin", NEW, "--next-boot"]]
    refreshes = [i for i, c in enumerate(calls) if c == ["proxmox-boot-tool", "refresh"]]
    assert refreshes and refreshes[0] > calls.index(pins[0])  # the pin written to the ESP
    assert not [c for c in calls if c[1:3] == ["kernel", "unpin"]]


def test_nothing_rebooted_and_the_report_says_what_is_pending(host):
    assert len(host.check_output("journalctl --list-boots --no-pager -q").splitlines()) == 1
    result = report()
    assert result["result"] == "passed", result["failure"]
    assert result["upgrade"]["dkms_modules"] == ["gpustub"]  # found without being told
    # the report is the idempotence run's: the pin was there, nothing to run again
    assert result["upgrade"]["next_boot_method"] == "proxmox-boot-tool"
    assert result["upgrade"]["next_boot_commands"] == []
    assert result["reboot"]["required"] is True and result["reboot"]["rebooted"] is False
    assert {c["name"]: c["status"] for c in result["checks"]} == {
        "kernel": "pending", "cmdline": "pending", "module_params": "pending"}
    # CUDA was proved on the host through the stand-in libcuda.so.1 (one GPU, cuInit 0)
    assert result["cuda_host"]["init"]["name"] == "CUDA_SUCCESS"
    assert result["cuda_host"]["devices"] == 1 and result["cuda_host"]["failure"] is None
