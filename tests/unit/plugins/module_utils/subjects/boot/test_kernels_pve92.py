"""Proxmox VE 9.2's kernel 7.0 through the kernel readers: releases of the 7.x series sort
after 6.17 (numerically, never as text: 7.0.10 after 7.0.2), and their package names follow
Proxmox's rule for every kernel since 6.2 (proxmox-kernel-<abi>-signed,
proxmox-headers-<abi>; the release strings as PVE 9.2's pveversion -v lists them:
proxmox-kernel-7.0.2-6-pve-signed beside proxmox-kernel-6.17.13-2-pve-signed)."""

import os

from fixtures import dkms

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels


def test_a_7x_release_sorts_after_6_17_and_by_number():
    releases = ["7.0.10-1-pve", "6.17.13-2-pve", "7.0.2-6-pve", "6.14.11-5-bpo12-pve",
                "6.8.12-9-pve"]
    assert sorted(releases, key=kernels.kernel_sort_key) == [
        "6.8.12-9-pve", "6.14.11-5-bpo12-pve", "6.17.13-2-pve", "7.0.2-6-pve",
        "7.0.10-1-pve"]


def test_7x_package_names_and_flavour():
    assert kernels.release_flavour("7.0.2-6-pve") == "proxmox"
    assert kernels.image_package("7.0.2-6-pve") == "proxmox-kernel-7.0.2-6-pve-signed"
    assert kernels.headers_package("7.0.2-6-pve") == "proxmox-headers-7.0.2-6-pve"


def test_the_newest_installed_kernel_is_the_7x_one(tmp_path):
    root = str(tmp_path)
    for release in ("6.17.13-2-pve", "7.0.2-6-pve", "6.14.11-5-bpo12-pve"):
        dkms.kernel_tree(root, release, headers=True)
    assert kernels.newest_kernel(root) == "7.0.2-6-pve"
    assert kernels.installed_kernels(root)[-1] == "7.0.2-6-pve"
    assert os.path.isdir(os.path.join(root, "lib/modules/7.0.2-6-pve"))
