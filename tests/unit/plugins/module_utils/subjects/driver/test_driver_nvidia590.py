"""driver_state under NVIDIA's two Ubuntu naming schemes and versioned bind mounts.

NVIDIA's Ubuntu repository drops the branch from package names at 590
(libnvidia-compute-580 -> libnvidia-compute, nvidia-dkms-580-open -> nvidia-dkms-open:
NVIDIA's driver installation guide, "Recent Updates", "Ubuntu 590 and later packages",
https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/recent-updates.html).
Ubuntu's own archive keeps the branch (nvidia-utils-595 595.71.05-0ubuntu0.24.04.1,
packages.ubuntu.com), Debian has its own names (libcuda1, nvidia-driver, nvidia-kernel-dkms).

Where the formats come from:
- dpkg status stanzas: the field order and NVIDIA's repository fields (``Section: NVIDIA``,
  ``Maintainer: NVIDIA <cudatools@nvidia.com>``, ``Source:``, ``-0ubuntu1`` revisions) of
  the real stanza of a real H200 machine (tests/fixtures/driver-h200/
  dpkg-status-cuda-compat.txt, cuda-compat-13-0 580.95.05-0ubuntu1 from that repository);
  the 590 names from the guide's rename table; the versions as that repository serves them
  (``nvidia-open=590.48.01-0ubuntu1``, ``libnvidia-gl_590.48.01-0ubuntu1_amd64.deb``,
  ``cuda-drivers=590.48.01-0ubuntu1`` in public install scripts; ``-1`` in its Debian
  repository). The 590 stanzas' ``Source: nvidia-graphics-drivers`` is assumed (nothing
  here reads it).
- Debian's ``nvidia-kernel-common`` 20151021+15 (its own version stream, not the driver's):
  Debian's nvidia-modprobe/nvidia-kernel-common source.
- versioned bind mounts: ``lxc.mount.entry: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
  usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05 none bind,optional,create=file`` as
  Proxmox users write them.
"""

import os

import pytest
from fixtures import driver

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_records
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_state

OLD, NEW = driver.OLD, driver.NEW          # 580.95.05, 590.48.01
MAINT = driver.NVIDIA_MAINTAINER


def nv_stanza(package, version, source="nvidia-graphics-drivers", arch="amd64"):
    """One stanza of NVIDIA's Ubuntu repository in the real stanza's field order."""
    return ("Package: %s\nStatus: install ok installed\nPriority: optional\nSection: NVIDIA\n"
            "Installed-Size: 1024\nMaintainer: %s\nArchitecture: %s\nSource: %s\n"
            "Version: %s\nDescription: NVIDIA driver\n stand-in text.\n"
            % (package, MAINT, arch, source, version))


UBUNTU_590 = ("libnvidia-compute", "libnvidia-cfg1", "nvidia-utils", "nvidia-compute-utils",
              "libnvidia-gpucomp")
HOST_590 = ("nvidia-dkms-open", "nvidia-kernel-common", "nvidia-kernel-source-open",
            "nvidia-open", "cuda-drivers") + UBUNTU_590
HOST_580 = ("nvidia-dkms-580-open", "nvidia-kernel-common-580", "nvidia-kernel-source-580-open",
            "nvidia-driver-580-open", "cuda-drivers-580", "libnvidia-compute-580",
            "libnvidia-cfg1-580", "nvidia-utils-580", "nvidia-compute-utils-580",
            "libnvidia-gpucomp-580")


def _ct_590(root, vmid, names=UBUNTU_590, version=NEW + "-0ubuntu1"):
    fs_root = driver.zfs_root(root, vmid)
    driver.dpkg_status(fs_root, [nv_stanza(n, version) for n in names])
    driver.libs(fs_root, version.split("-")[0])
    driver.container_config(root, vmid, "local-zfs:subvol-%s-disk-0,size=100G" % vmid)
    return fs_root


def test_a_container_at_590_with_unbranched_names_is_installed_deb_with_them(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_run(root, NEW)
    _ct_590(root, 140)
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    # before: no name matched, the libraries alone made it "unknown" with no packages
    assert (user["method"], user["version"]) == ("installed-deb", NEW)
    assert sorted(p["name"] for p in user["packages"]) == sorted(UBUNTU_590)
    assert {p["version"] for p in user["packages"]} == {NEW + "-0ubuntu1"}
    refusals = driver_state.driver_state(root, NEW)["gate"]["refusals"]
    assert not [r for r in refusals if r.startswith("140:")], refusals


@pytest.mark.parametrize("names,version,method", [
    (HOST_590, NEW + "-0ubuntu1", "nvidia-repo"),      # NVIDIA's Ubuntu repository, 590
    (HOST_580, OLD + "-0ubuntu1", "nvidia-repo"),      # the same, 580 (branch-numbered)
])
def test_the_host_reads_both_ubuntu_schemes(tmp_path, names, version, method):
    root = driver.host_base(tmp_path, loaded=None)
    driver.dpkg_status(root, [nv_stanza(n, version) for n in names])
    installed = driver_state.driver_state(root)["host"]["installed"]
    assert (installed["method"], installed["version"]) == (method, version.split("-")[0])
    assert sorted(p["name"] for p in installed["packages"]) == sorted(names)


def test_debian_names_and_debians_own_kernel_common_stay_as_they_were(tmp_path):
    root = driver.host_base(tmp_path, loaded=None)
    driver.host_debian(root, NEW, "-1")
    path = os.path.join(root, "var/lib/dpkg/status")
    with open(path, "a") as handle:
        handle.write("\n" + driver.stanza("nvidia-kernel-common", "20151021+15",
                                          driver.DEBIAN_MAINTAINER, "nvidia-modprobe"))
    installed = driver_state.driver_state(root)["host"]["installed"]
    assert (installed["method"], installed["version"]) == ("debian", NEW)
    # its own version stream: no driver package, never pinned to a driver version
    assert "nvidia-kernel-common" not in [p["name"] for p in installed["packages"]]


def test_an_unbranched_kernel_common_of_nvidias_repository_is_a_driver_package():
    pkgs = [{"name": "nvidia-kernel-common", "version": NEW + "-0ubuntu1", "maintainer": MAINT,
             "source": None}]
    assert driver_records.driver_side(pkgs, driver_records.KERNEL_PACKAGES) == pkgs


@pytest.mark.parametrize("name,version,names", [
    ("libnvidia-compute-580", NEW, ["libnvidia-compute-580", "libnvidia-compute-590",
                                    "libnvidia-compute"]),
    ("nvidia-dkms-580-open", NEW, ["nvidia-dkms-580-open", "nvidia-dkms-590-open",
                                   "nvidia-dkms-open"]),
    ("nvidia-utils-580-server", "595.71.05", ["nvidia-utils-580-server",
                                              "nvidia-utils-595-server",
                                              "nvidia-utils-server"]),
    ("libnvidia-cfg1-580", NEW, ["libnvidia-cfg1-580", "libnvidia-cfg1-590",
                                 "libnvidia-cfg1"]),
    ("cuda-drivers-580", NEW, ["cuda-drivers-580", "cuda-drivers-590", "cuda-drivers"]),
    ("libnvidia-compute", OLD, ["libnvidia-compute", "libnvidia-compute-580"]),
    ("nvidia-dkms-open", OLD, ["nvidia-dkms-open", "nvidia-dkms-580-open"]),
    ("nvidia-driver-open", OLD, ["nvidia-driver-open", "nvidia-driver-580-open"]),
    # Debian's names and the ones with a version of their own have one name only
    ("libcuda1", NEW, ["libcuda1"]),
    ("nvidia-tesla-535-driver", NEW, ["nvidia-tesla-535-driver"]),
    ("nvidia-open", OLD, ["nvidia-open"]),
])
def test_scheme_names_in_the_order_tried(name, version, names):
    assert driver_records.scheme_names(name, version) == names


# --------------------------------------------------------------------------- bind mounts

LIBDIR = "/usr/lib/x86_64-linux-gnu"


def _bound(tmp_path, entry_version, host_version):
    root = driver.host_base(tmp_path)
    driver.host_run(root, host_version)
    driver.ct_bind_mount(root, 131, sources=["%s/libcuda.so.%s" % (LIBDIR, entry_version)])
    return root


def test_an_entry_at_the_old_version_on_a_staged_host_says_rewrite_it(tmp_path):
    root = _bound(tmp_path, OLD, NEW)
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert user["versioned"] == [{"index": user["versioned"][0]["index"],
                                  "source": "%s/libcuda.so.%s" % (LIBDIR, OLD),
                                  "target": "usr/lib/x86_64-linux-gnu/libcuda.so.%s" % OLD,
                                  "version": OLD, "missing": True}]
    assert user["host_version"] == NEW
    refusal = driver_state.driver_state(root, NEW)["gate"]["refusals"][-1]
    assert "rewrite the entry to %s/libcuda.so.%s" % (LIBDIR, NEW) in refusal
    assert "not on the host" in refusal and "stage the host's user space" not in refusal


def test_an_entry_at_the_old_version_still_on_the_host_says_rewrite_it(tmp_path):
    root = _bound(tmp_path, OLD, NEW)
    driver.libs(root, OLD)   # the old file kept beside the new one
    driver.libs(root, NEW)
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert user["versioned"][0]["missing"] is False
    refusal = driver_state.driver_state(root, NEW)["gate"]["refusals"][-1]
    assert refusal == ("131: lxc.mount.entry binds %s/libcuda.so.%s (%s), target %s: rewrite "
                       "the entry to %s/libcuda.so.%s (driver_stage with rewrite_bind_mounts: "
                       "true rewrites it to the staged version)"
                       % (LIBDIR, OLD, OLD, NEW, LIBDIR, NEW))


def test_an_entry_at_the_target_the_host_lacks_says_stage_the_host(tmp_path):
    root = _bound(tmp_path, NEW, OLD)
    refusal = driver_state.driver_state(root, NEW)["gate"]["refusals"][-1]
    assert refusal.startswith("131: lxc.mount.entry binds %s/libcuda.so.%s, which is not on "
                              "the host" % (LIBDIR, NEW))
    assert refusal.endswith("stage the host's user space at %s" % NEW)


def test_an_entry_at_the_target_the_host_has_passes(tmp_path):
    root = _bound(tmp_path, NEW, NEW)
    refusals = driver_state.driver_state(root, NEW)["gate"]["refusals"]
    assert not [r for r in refusals if r.startswith("131:")]
