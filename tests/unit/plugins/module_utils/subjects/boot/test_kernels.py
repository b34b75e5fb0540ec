"""Kernel discovery under a root: installed kernels, ordering, headers, package names."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from fixtures import dkms as fx


def test_sort_key_orders_real_releases():
    releases = ["6.1.0-9-amd64", "6.14.11-5-bpo12-pve", "6.1.0-56-amd64", "6.8.12-9-pve",
                "6.8.12-10-pve", "5.15.158-2-pve"]
    assert sorted(releases, key=kernels.kernel_sort_key) == [
        "5.15.158-2-pve", "6.1.0-9-amd64", "6.1.0-56-amd64", "6.8.12-9-pve", "6.8.12-10-pve",
        "6.14.11-5-bpo12-pve"]


def test_seed_kernels_running_and_newest(tmp_path):
    fx.seed(tmp_path)
    assert kernels.installed_kernels(str(tmp_path)) == ["6.8.12-9-pve", "6.14.11-5-bpo12-pve"]
    assert kernels.newest_kernel(str(tmp_path)) == "6.14.11-5-bpo12-pve"
    assert kernels.running_kernel(str(tmp_path)) == "6.8.12-9-pve"
    assert kernels.kernel_flavour(str(tmp_path)) == "proxmox"


def test_running_kernel_falls_back_to_proc_version(tmp_path):
    fx.proc_running(tmp_path, "6.8.12-9-pve")
    os.unlink(tmp_path / "proc/sys/kernel/osrelease")
    assert kernels.running_kernel(str(tmp_path)) == "6.8.12-9-pve"
    os.unlink(tmp_path / "proc/version")
    assert kernels.running_kernel(str(tmp_path)) is None


def test_headers_only_tree_and_depmod_leftovers_are_not_kernels(tmp_path):
    # linux-headers without the image: /lib/modules/<k>/{build,source}; dkms install then
    # runs depmod, which writes modules.dep there (seen on Debian 12 with real dkms)
    fx.kernel_tree(tmp_path, "6.1.0-56-amd64", headers=True, vmlinuz=False, modules=False)
    (tmp_path / "lib/modules/6.1.0-56-amd64/modules.dep").write_text("updates/dkms/x.ko:\n")
    fx.kernel_tree(tmp_path, "6.1.0-9-amd64", headers=False, vmlinuz=True, modules=False)
    assert kernels.installed_kernels(str(tmp_path)) == ["6.1.0-9-amd64"]
    assert kernels.has_headers(str(tmp_path), "6.1.0-56-amd64")


def test_dangling_build_link_is_not_headers(tmp_path):
    fx.seed(tmp_path)
    build = tmp_path / "lib/modules/6.14.11-5-bpo12-pve/build"
    assert os.path.islink(build)
    assert os.readlink(build) == "/usr/src/linux-headers-6.14.11-5-bpo12-pve"
    assert not kernels.has_headers(str(tmp_path), "6.14.11-5-bpo12-pve")
    assert kernels.has_headers(str(tmp_path), "6.8.12-9-pve")


def test_absolute_build_link_resolves_under_root_not_on_this_machine(tmp_path):
    # /usr/src/linux-headers-<k> may exist on the machine running the tests: a link that
    # resolves only on the real / must not count for a tree under tmp_path
    release = "6.1.0-56-amd64"
    fx.kernel_tree(tmp_path, release, headers=False, build_link=True)
    assert not kernels.has_headers(str(tmp_path), release)
    fx.kernel_tree(tmp_path, release, headers=True)
    assert kernels.has_headers(str(tmp_path), release)


def test_headers_dir_without_include_is_not_headers(tmp_path):
    release = "6.8.12-9-pve"
    fx.kernel_tree(tmp_path, release, headers=True)
    import shutil
    shutil.rmtree(tmp_path / ("usr/src/linux-headers-%s/include" % release))
    assert not kernels.has_headers(str(tmp_path), release)


def test_package_names():
    assert kernels.headers_package("6.14.11-5-bpo12-pve") == "proxmox-headers-6.14.11-5-bpo12-pve"
    assert kernels.image_package("6.14.11-5-bpo12-pve") == (
        "proxmox-kernel-6.14.11-5-bpo12-pve-signed")
    assert kernels.headers_package("6.1.0-56-amd64") == "linux-headers-6.1.0-56-amd64"
    assert kernels.image_package("6.1.0-56-amd64") == "linux-image-6.1.0-56-amd64"
    assert kernels.headers_package("5.15.158-2-pve") == "pve-headers-5.15.158-2-pve"
    assert kernels.release_flavour("6.8.0-45-generic") == "ubuntu"


def test_kernel_info_for_seed_near_miss(tmp_path):
    fx.seed(tmp_path)
    info = kernels.kernel_info(str(tmp_path), "6.14.11-5-bpo12-pve")
    assert info["vmlinuz"] and info["initrd"] and info["modules"]
    assert info["headers"] is False
    assert info["headers_package"] == "proxmox-headers-6.14.11-5-bpo12-pve"


def test_initramfs_kernels_every_installed_kernel_that_may_boot():
    installed = ["6.1.0-55-amd64", "6.1.0-56-amd64", "6.1.0-9-amd64"]
    # running, newest, next boot and an upgrade target, oldest first, each once
    assert kernels.initramfs_kernels(installed, "6.1.0-55-amd64", "6.1.0-56-amd64",
                                     also=["6.1.0-9-amd64"]) == [
        "6.1.0-9-amd64", "6.1.0-55-amd64", "6.1.0-56-amd64"]
    # the newest counts even when nothing else names it
    assert kernels.initramfs_kernels(installed, "6.1.0-9-amd64", None) == [
        "6.1.0-9-amd64", "6.1.0-56-amd64"]


def test_initramfs_kernels_leave_out_what_is_not_installed():
    # a container or a capture runs a kernel booted from elsewhere; a stale entry or a
    # target apt did not install has no initramfs to make
    assert kernels.initramfs_kernels(["6.8.12-9-pve"], "6.8.12-4-pve", "6.14.11-5-bpo12-pve",
                                     also=["6.14.11-5-bpo12-pve"]) == ["6.8.12-9-pve"]
    assert kernels.initramfs_kernels([], "6.8.12-9-pve", "6.8.12-9-pve") == []
