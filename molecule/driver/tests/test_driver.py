"""Testinfra checks of the driver scenario (after check, converge and idempotence): playbook
driver_upgrade moved the Proxmox-like container's stand-in NVIDIA driver from 580.95.05 to
590.48.01 with the real apt, dkms and dpkg, on the host and in container 130's root; 131
(bind-mounted libraries) needed nothing; the previous build and packages are kept for a
back-out; nothing rebooted."""

import json
import os

SUITE = os.environ.get("GPUHOST_TEST_SUITE", "bookworm")
HOST = "gpuhost-%s-%s" % (os.environ["MOLECULE_SCENARIO_NAME"], SUITE)
KERNEL = os.environ.get("GPUHOST_OLD_KERNEL", "6.1.0-55-amd64")
KO = {"trixie": ".ko.xz"}.get(SUITE, ".ko")     # dkms 3.2.2 compresses for Debian 13
OLD, NEW = "580.95.05", "590.48.01"
CT130 = "/rpool/data/subvol-130-disk-0"
CT131 = "/rpool/data/subvol-131-disk-0"
REPORTS = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "reports")
testinfra_hosts = ["podman://" + HOST]


def versions(host, admindir=None):
    where = " --admindir=%s/var/lib/dpkg" % admindir if admindir else ""
    out = host.check_output("dpkg-query%s -W -f '${Package}=${Version} ' "
                            "libcuda1 libnvidia-ml1 nvidia-smi" % where)
    return out.strip()


def test_host_packages_are_the_new_version(host):
    assert versions(host) == "libcuda1=%s-1 libnvidia-ml1=%s-1 nvidia-smi=%s-1" % (NEW, NEW, NEW)
    assert host.check_output("dpkg-query -W -f '${Version}' nvidia-kernel-dkms") == NEW + "-1"


def test_dkms_built_the_new_version_for_the_kernel_and_only_it_is_installed(host):
    status = host.check_output("dkms status -m nvidia")
    assert "nvidia/%s, %s, x86_64: installed" % (NEW, KERNEL) in status
    assert "nvidia/%s, %s, x86_64: installed" % (OLD, KERNEL) not in status
    ko = host.file("/lib/modules/%s/updates/dkms/nvidia%s" % (KERNEL, KO))
    assert ko.is_file and ko.size > 0
    # what modprobe would load after the reboot: the new version, built for that kernel
    assert host.check_output("modinfo -k %s -F version nvidia" % KERNEL) == NEW
    assert host.check_output("modinfo -k %s -F vermagic nvidia" % KERNEL).startswith(KERNEL + " ")


def test_container_130_has_the_new_user_space_and_131_still_bind_mounts(host):
    assert versions(host, CT130) == (
        "libcuda1=%s-1 libnvidia-ml1=%s-1 nvidia-smi=%s-1" % (NEW, NEW, NEW))
    assert not host.file(CT131 + "/usr/lib/x86_64-linux-gnu").exists
    conf = host.file("/etc/pve/lxc/131.conf").content_string
    assert "lxc.mount.entry: /usr/lib/x86_64-linux-gnu/libcuda.so.1 " in conf


def test_the_previous_version_is_kept_for_a_back_out(host):
    keep = "/var/lib/gpuhost-tuning/driver"
    assert host.file("%s/dkms/nvidia/%s" % (keep, OLD)).is_directory
    debs = host.check_output("ls %s/debs" % keep).split()
    assert "nvidia-kernel-dkms_%s-1_amd64.deb" % OLD in debs, debs
    # container 130's previous user space, taken with pct pull (its cache had none: apt
    # fetched them into it with --reinstall --download-only first)
    kept = host.check_output("ls %s/containers/130/debs" % keep).split()
    assert kept == ["%s_%s-1_amd64.deb" % (p, OLD)
                    for p in ("libcuda1", "libnvidia-ml1", "nvidia-smi")], kept
    assert not host.file("%s/containers/131" % keep).exists


def test_no_reboot_and_the_rollout_names_the_driver(host):
    with open(os.path.join(REPORTS, "rollout.json")) as handle:
        rollout = json.load(handle)
    assert rollout["title"] == "driver_upgrade"
    (entry,) = rollout["hosts"]
    assert entry["driver"]["after"] in (None, NEW), entry     # no module loads in a container
    calls = host.file("/var/log/gpuhost-doubles.jsonl").content_string
    assert "reboot" not in [json.loads(line)["argv"][0] for line in calls.splitlines() if line]
