"""initramfs_check against REAL initramfs-tools on both platforms (``suite``,
tests/platforms.py): update-initramfs / lsinitramfs 0.142 (Debian 12) and 0.148.4
(Debian 13), on the image's own old kernel (6.1.0-55-amd64, 6.12.107+deb13-amd64: a '+' in
the release) and its initrd. Runs inside the test image on both (IN_IMAGE): it regenerates
/boot/initrd.img-<k> and writes /etc/modprobe.d, which on this machine would be its own.
"""

import os
import subprocess

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.modules import initramfs_check
from modrun import run_module

pytestmark = [pytest.mark.integration]
IN_IMAGE = True
CONF = "/etc/modprobe.d/gpuhost-initramfs-test.conf"


def _image_kernels():
    with open("/etc/gpuhost-test-image") as handle:
        info = dict(line.strip().split("=", 1) for line in handle if "=" in line)
    return info["old_kernel"]


def test_modprobe_option_is_seen_only_after_update_initramfs(suite):
    old = _image_kernels()
    assert kernels.installed_kernels("/") == [old]
    assert kernels.release_flavour(old) == "debian"
    args = {"kernels": [old], "files": [CONF], "require": False}
    with open(CONF, "w") as handle:
        handle.write("options gpuhost_hello disable_hmm=1\n")
    try:
        before = run_module(initramfs_check, args)
        assert not before.get("failed"), before
        image = before["images"][0]
        assert image["exists"] and image["missing"] == [CONF], image
        # small images: only the listed modules (the molecule scenarios do the same)
        with open("/etc/initramfs-tools/conf.d/gpuhost-test.conf", "w") as handle:
            handle.write("MODULES=list\n")
        subprocess.run(["update-initramfs", "-u", "-k", old], check=True, timeout=600,
                       capture_output=True)
        after = run_module(initramfs_check, args)
        assert after["images"][0]["missing"] == [] and after["images"][0]["present"] == [CONF]
        # an image that does not exist: reported, the remedy names the release as spelt
        missing = {"bookworm": "6.1.0-99-amd64", "trixie": "6.12.99+deb13-amd64"}[suite]
        gone = run_module(initramfs_check, dict(args, kernels=[missing]))
        assert gone["images"][0]["exists"] is False
        assert any("update-initramfs -c -k %s" % missing in problem
                   for problem in gone["problems"]), gone["problems"]
    finally:
        os.unlink(CONF)
