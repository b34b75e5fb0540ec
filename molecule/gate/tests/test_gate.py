"""Testinfra checks of the gate scenario: 6.1.0-56-amd64 installed without headers (its
DKMS hook skipped gpustub); reboot_verify, asked to upgrade and allowed to reboot, stopped
on the headers before any pin, boot-loader change or reboot."""

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
ESP = "/var/lib/gpuhost-doubles/esp/5A3E-11C0"
REPORT = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "reports",
                      "%s-reboot.json" % HOST)


def report():
    with open(REPORT) as handle:
        return json.load(handle)


def test_the_trap_is_set_new_image_without_headers_or_driver(host):
    """What prepare built, as the headers trap has it (else this scenario proves nothing)."""
    assert "Status: install ok installed" in host.run("dpkg -s linux-image-" + NEW).stdout
    assert host.run("dpkg -s linux-headers-" + NEW).rc != 0
    assert not host.file("/lib/modules/%s/build" % NEW).exists
    assert not host.file("/lib/modules/%s/updates/dkms/gpustub%s" % (NEW, KO)).exists
    assert "gpustub/1.0, %s, x86_64: installed" % OLD in host.check_output("dkms status")


def test_reboot_verify_failed_on_the_headers(host):
    result = report()
    # the trap was armed: the ESP sync made the driverless kernel the next boot
    assert result["before"]["next_boot_kernel"] == NEW
    assert result["result"] == "failed"
    assert "linux-headers-%s" % NEW in result["failure"]
    assert result["upgrade"] is None and result["boot_config"] is None  # stopped in the upgrade
    assert result["reboot"] == {"required": None, "expected_kernel": None, "rebooted": False,
                                "note": "not reached"}


def test_no_pin_no_refresh_no_boot_change(host):
    log = host.file("/var/log/gpuhost-doubles.jsonl").content_string
    calls = [json.loads(line)["argv"] for line in log.splitlines() if line.strip()]
    assert calls, "the role never asked proxmox-boot-tool anything: the doubles are not wired"
    assert not [c for c in calls if c[1:3] == ["kernel", "pin"]], calls
    assert ["proxmox-boot-tool", "refresh"] not in calls
    for pin in ("/etc/kernel/next-boot-pin", "/etc/kernel/proxmox-boot-pin"):
        assert not host.file(pin).exists
    assert host.file("/etc/kernel/cmdline").content_string == "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"
    # the kernel hook synced the new kernel to the ESP with the old command line: the role
    # added no parameter there and did not change the loader's default
    entry = host.file("%s/loader/entries/proxmox-%s.conf" % (ESP, NEW)).content_string
    assert "options  root=ZFS=rpool/ROOT/pve-1 boot=zfs\n" in entry
    assert host.file(ESP + "/loader/loader.conf").content_string == "timeout 3\ndefault proxmox-*\n"


def test_the_container_did_not_reboot(host):
    assert len(host.check_output("journalctl --list-boots --no-pager -q").splitlines()) == 1
