"""Kernel releases as each platform spells them, against the REAL Debian tools (``suite``,
tests/platforms.py; inside the test image on both, IN_IMAGE: it reads the image's own
/lib/modules and /boot). Debian 13's releases carry a ``+`` (``6.12.107+deb13-amd64``,
``6.12.115+deb13.1-amd64``); Proxmox VE 9's are ``6.14.8-2-pve`` and ``6.17.2-1-pve``.
linux-base's ``linux-version sort`` is Debian's own order of kernel releases (the kernel
packages' hooks use it); kernel_sort_key must agree with it on every spelling.
"""

import subprocess

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels

pytestmark = [pytest.mark.integration]
IN_IMAGE = True

RELEASES = [
    "6.12.117+deb13-amd64", "6.12.115+deb13.1-amd64", "6.12.115+deb13-amd64",
    "6.12.107+deb13-rt-amd64", "6.12.107+deb13-amd64", "6.12.90+deb13.1-amd64",
    "6.14.8-2-pve", "6.17.2-1-pve", "6.8.12-9-pve", "6.14.11-5-bpo12-pve",
    "6.1.0-56-amd64", "6.1.0-9-amd64", "6.1.0-55-amd64",
]


def _linux_version(*args):
    return subprocess.run(["linux-version"] + list(args), capture_output=True, text=True,
                          check=True, timeout=60).stdout.split()


def test_sort_key_agrees_with_linux_version_sort(suite):
    assert sorted(RELEASES, key=kernels.kernel_sort_key) == _linux_version("sort", *RELEASES)


def test_installed_kernels_and_package_names_of_the_image(suite):
    with open("/etc/gpuhost-test-image") as handle:
        info = dict(line.strip().split("=", 1) for line in handle if "=" in line)
    old = info["old_kernel"]
    # the image's one kernel, read from /lib/modules and /boot as linux-base lists it
    assert kernels.installed_kernels("/") == _linux_version("list") == [old]
    assert kernels.has_headers("/", old)
    names = kernels.kernel_info("/", old)
    assert (names["image_package"], names["headers_package"]) == (
        "linux-image-" + old, "linux-headers-" + old)
    for package in (names["image_package"], names["headers_package"]):
        status = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", package],
                                capture_output=True, text=True, check=False, timeout=60)
        assert status.stdout == "install ok installed", (package, status.stderr)
    assert ("+" in old) is (suite == "trixie")
