"""Issue 36, the third hostile round: the driver gate judges what the next boot will
actually load (the module file modprobe picks and the version its ELF ``.modinfo`` holds)
and every NVIDIA library and driver package of a container's root; a container's
ld.so.conf is bounded. Module files are real ELF objects (fixtures/driver.py
``elf_module``, compiled by gcc; ``modinfo`` reads them as modules)."""

import os
import shutil
import subprocess
import time

import pytest
from digest import digest
from fixtures import dkms, driver

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import kmod_info

OLD, NEW, NEXT, RUNNING = driver.OLD, driver.NEW, driver.NEXT, driver.RUNNING
UPDATES = "lib/modules/%s/updates/dkms" % NEXT
FIX = "dkms install -m nvidia -v %s -k %s --force" % (NEW, NEXT)


def _host(tmp_path, suffix=".ko", installed_version=None):
    """The issue's host: .run 580.95.05 loaded, DKMS says 590.48.01 is installed for the
    next kernel; ``installed_version`` what the installed files really hold."""
    root = driver.host_base(tmp_path / "host", loaded=OLD)
    driver.host_run(root, OLD)
    dkms.dkms_tree(root, "nvidia", NEW, installed=[RUNNING, NEXT], suffix=suffix)
    driver.real_modules(root, "nvidia", NEW, (RUNNING, NEXT), suffix=suffix,
                        installed_version=installed_version)
    driver.run_log(root, NEW)
    return root


def _refusals(root, same=True, **kwargs):
    """The gate's refusals for NEW and the state; the tree unchanged (``same``: by its
    digest, which cannot read a tree holding a FIFO)."""
    before = digest(root) if same else None
    state = driver_state.driver_state(root, NEW, **kwargs)
    if same:
        assert digest(root) == before
    return state["gate"]["refusals"], state


def _needs(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip("needs %s (kmod, zstd)" % ", ".join(missing))


def test_the_fixture_modules_are_real_elf_modules_modinfo_reads(tmp_path):
    _needs("modinfo")
    path = tmp_path / "nvidia.ko"
    path.write_bytes(driver.elf_module("nvidia", NEXT, OLD))
    out = subprocess.run(["modinfo", "-F", "version", str(path)], capture_output=True,
                         text=True, check=True, timeout=30).stdout.strip()
    assert out == OLD
    assert kmod_info.modinfo(str(path))["version"] == [OLD]


def test_a_staged_host_passes(tmp_path):
    refusals, state = _refusals(_host(tmp_path))
    assert refusals == []
    assert {m["version"] for m in state["host"]["next_modules"]} == {NEW}
    assert state["host"]["next_modules"][0]["source"] == "modules.dep"


@pytest.mark.parametrize("suffix", [".ko", ".ko.xz"])
def test_dkms_says_new_but_the_installed_module_is_old(tmp_path, suffix):
    """dkms 3.0.10's case: the tree says 590.48.01 installed, the file holds 580's."""
    root = _host(tmp_path, suffix, installed_version=OLD)
    refusals, _state = _refusals(root)
    path = "/%s/nvidia%s" % (UPDATES, suffix)
    assert any(path + " (modules.dep), which holds version %s, not %s" % (OLD, NEW) in r
               and r.endswith(FIX) for r in refusals), refusals


def test_an_empty_module_file_is_refused_naming_it(tmp_path):
    root = _host(tmp_path)
    open(os.path.join(root, UPDATES, "nvidia.ko"), "w").close()
    refusals, _state = _refusals(root)
    assert ("host: the next kernel %s would not load nvidia %s: /%s/nvidia.ko: empty, not "
            "an ELF kernel module; %s" % (NEXT, NEW, UPDATES, FIX)) in refusals


@pytest.mark.parametrize("junk", [b"\x7fELF fake nvidia", b"\x7fELF" + b"\xff" * 60,
                                  b"\x00" * 4096])
def test_a_module_file_that_is_no_elf_module_is_refused(tmp_path, junk):
    root = _host(tmp_path)
    with open(os.path.join(root, UPDATES, "nvidia.ko"), "wb") as handle:
        handle.write(junk)
    refusals, _state = _refusals(root)
    assert any("/%s/nvidia.ko: " % UPDATES in r and r.endswith(FIX) for r in refusals)


def test_the_next_kernels_module_missing_is_refused(tmp_path):
    root = _host(tmp_path)
    os.unlink(os.path.join(root, UPDATES, "nvidia.ko"))
    refusals, _state = _refusals(root)
    assert any(r.startswith("host: the next kernel %s would not load nvidia %s: /%s/nvidia.ko"
                            % (NEXT, NEW, UPDATES)) for r in refusals), refusals


def test_modules_dep_without_the_module_is_refused(tmp_path):
    root = _host(tmp_path)
    dep = os.path.join(root, "lib/modules", NEXT, "modules.dep")
    lines = [x for x in open(dep).read().splitlines() if "nvidia.ko" not in x.split(":")[0]]
    with open(dep, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    refusals, _state = _refusals(root)
    assert any("/lib/modules/%s/modules.dep lists no nvidia module: modprobe will not find "
               "it (run depmod %s)" % (NEXT, NEXT) in r for r in refusals), refusals


def test_modprobe_loads_what_modules_dep_lists_not_what_dkms_installed(tmp_path):
    """The .run's old module left in kernel/drivers/video and modules.dep naming it."""
    root = _host(tmp_path)
    old = os.path.join(root, "lib/modules", NEXT, "kernel/drivers/video/nvidia.ko")
    os.makedirs(os.path.dirname(old))
    with open(old, "wb") as handle:
        handle.write(driver.elf_module("nvidia", NEXT, OLD))
    dep = os.path.join(root, "lib/modules", NEXT, "modules.dep")
    text = open(dep).read().replace("updates/dkms/nvidia.ko:", "kernel/drivers/video/nvidia.ko:")
    with open(dep, "w") as handle:
        handle.write(text)
    refusals, _state = _refusals(root)
    assert any("loads /lib/modules/%s/kernel/drivers/video/nvidia.ko (modules.dep), which "
               "holds version %s" % (NEXT, OLD) in r for r in refusals), refusals


def test_without_modules_dep_depmods_order_puts_updates_first(tmp_path):
    root = _host(tmp_path)
    os.unlink(os.path.join(root, "lib/modules", NEXT, "modules.dep"))
    old = os.path.join(root, "lib/modules", NEXT, "kernel/drivers/video/nvidia.ko")
    os.makedirs(os.path.dirname(old))
    with open(old, "wb") as handle:
        handle.write(driver.elf_module("nvidia", NEXT, OLD))
    refusals, state = _refusals(root)
    assert refusals == []
    first = state["host"]["next_modules"][0]
    assert (first["source"], first["path"]) == ("search order", "/%s/nvidia.ko" % UPDATES)


@pytest.mark.parametrize("plant", ["fifo", "folder", "link out of the root"])
def test_a_module_path_that_is_no_file_in_the_root_is_refused(tmp_path, plant):
    """A FIFO never blocks, a folder is named, a link out of the root resolves inside it
    (the decoy, a right module in the test's own tmp_path, is never read)."""
    root = _host(tmp_path)
    path = os.path.join(root, UPDATES, "nvidia.ko")
    os.unlink(path)
    decoy = tmp_path / "decoy.ko"
    decoy.write_bytes(driver.elf_module("nvidia", NEXT, NEW))
    if plant == "fifo":
        os.mkfifo(path)
    elif plant == "folder":
        os.mkdir(path)
    else:
        os.symlink(str(decoy), path)
    started = time.monotonic()
    refusals, _state = _refusals(root, same=plant != "fifo")
    assert time.monotonic() - started < 5
    assert any(r.startswith("host: the next kernel %s would not load nvidia %s: /%s/nvidia.ko"
                            % (NEXT, NEW, UPDATES)) and r.endswith(FIX)
               for r in refusals), refusals


def test_a_module_built_for_another_kernel_is_reported(tmp_path):
    root = _host(tmp_path)
    with open(os.path.join(root, UPDATES, "nvidia.ko"), "wb") as handle:
        handle.write(driver.elf_module("nvidia", RUNNING, NEW))
    _refusals_, state = _refusals(root)
    assert state["host"]["next_modules"][0]["vermagic"] == RUNNING


def test_a_zstd_module_is_read_by_modinfo_or_refused_by_name(tmp_path):
    _needs("zstd", "modinfo")
    root = _host(tmp_path)
    plain = os.path.join(root, UPDATES, "nvidia.ko")
    subprocess.run(["zstd", "-q", "--rm", plain], check=True, timeout=30)
    dep = os.path.join(root, "lib/modules", NEXT, "modules.dep")
    text = open(dep).read().replace("updates/dkms/nvidia.ko:", "updates/dkms/nvidia.ko.zst:")
    with open(dep, "w") as handle:
        handle.write(text)
    refusals, _state = _refusals(root)
    assert any("nvidia.ko.zst: a zstd-compressed module" in r for r in refusals), refusals
    refusals, state = _refusals(root, runner=Runner(processes=subprocess))
    assert refusals == [] and state["host"]["next_modules"][0]["version"] == NEW


def test_a_huge_sparse_module_is_read_by_its_section_table_only(tmp_path):
    """100 MB of holes, the ELF header first and the section table at the end (as the
    linker writes it): read in milliseconds, never whole."""
    import struct
    elf = bytearray(driver.elf_module("nvidia", NEXT, NEW))
    shoff, = struct.unpack("<Q", elf[0x28:0x30])
    entsize, count = struct.unpack("<HH", elf[0x3A:0x3E])
    table = bytes(elf[shoff:shoff + entsize * count])
    at = (100 << 20) - len(table)
    elf[0x28:0x30] = struct.pack("<Q", at)
    path = tmp_path / "nvidia.ko"
    with open(str(path), "wb") as handle:
        handle.write(bytes(elf))
        handle.seek(at)
        handle.write(table)
    started = time.monotonic()
    assert kmod_info.modinfo(str(path))["version"] == [NEW]
    assert time.monotonic() - started < 0.5


def test_a_section_table_claiming_too_much_is_refused_quickly(tmp_path):
    import struct
    elf = bytearray(driver.elf_module("nvidia", NEXT, NEW))
    elf[0x3C:0x3E] = struct.pack("<H", 0)          # e_shnum 0: the count in section 0
    path = tmp_path / "nvidia.ko"
    path.write_bytes(bytes(elf))
    with pytest.raises(kmod_info.ModuleInfoError):
        kmod_info.modinfo(str(path))


# --------------------------------------------------------------------------- user space


def _ct_host(tmp_path):
    root = _host(tmp_path)
    return root


def test_mixed_run_libraries_in_a_container_are_refused(tmp_path):
    root = _ct_host(tmp_path)
    fs_root = driver.ct_installed_run(root, 140, NEW)
    lib = os.path.join(fs_root, driver.LIB.lstrip("/"))
    os.unlink(os.path.join(lib, "libnvidia-ml.so.%s" % NEW))
    with open(os.path.join(lib, "libnvidia-ml.so.%s" % OLD), "wb") as handle:
        handle.write(b"\x7fELF stand-in")
    os.unlink(os.path.join(lib, "libnvidia-ml.so.1"))
    os.symlink("libnvidia-ml.so.%s" % OLD, os.path.join(lib, "libnvidia-ml.so.1"))
    refusals, _state = _refusals(root, containers=[140])
    assert len(refusals) == 1 and refusals[0].startswith(
        "140: mixed NVIDIA user space in its root (installed-run): ")
    assert "libnvidia-ml.so.1 %s (%s/libnvidia-ml.so.1)" % (OLD, driver.LIB) in refusals[0]
    assert "libcuda.so.1 %s" % NEW in refusals[0]


def test_an_old_library_beside_new_ones_is_refused(tmp_path):
    """Not only libcuda and libnvidia-ml: libnvidia-ptxjitcompiler left at 580."""
    root = _ct_host(tmp_path)
    fs_root = driver.ct_installed_run(root, 141, NEW)
    lib = os.path.join(fs_root, driver.LIB.lstrip("/"))
    with open(os.path.join(lib, "libnvidia-ptxjitcompiler.so.%s" % OLD), "wb") as handle:
        handle.write(b"\x7fELF stand-in")
    os.symlink("libnvidia-ptxjitcompiler.so.%s" % OLD,
               os.path.join(lib, "libnvidia-ptxjitcompiler.so.1"))
    refusals, _state = _refusals(root, containers=[141])
    assert "libnvidia-ptxjitcompiler.so.1 %s" % OLD in refusals[0]


def test_mixed_driver_packages_in_a_container_are_refused(tmp_path):
    root = _ct_host(tmp_path)
    fs_root = driver.ct_installed_deb(root, 142, NEW)
    with open(os.path.join(fs_root, "var/lib/dpkg/status"), "a") as handle:
        handle.write("\n" + driver.stanza("libnvidia-ml1", OLD + "-1",
                                          driver.DEBIAN_MAINTAINER, "nvidia-graphics-drivers"))
    refusals, state = _refusals(root, containers=[142])
    assert refusals[0].startswith("142: mixed NVIDIA user space in its root (installed-deb):")
    assert "package libnvidia-ml1 %s-1" % OLD in refusals[0]
    assert state["containers"][0]["userspace"]["mixed"]


def test_cuda_compat_and_own_version_packages_are_not_mixed(tmp_path):
    root = _ct_host(tmp_path)
    fs_root = driver.ct_installed_deb(root, 143, NEW)
    compat = os.path.join(fs_root, "usr/local/cuda-13.0/compat")
    os.makedirs(compat)
    with open(os.path.join(compat, "libcuda.so.%s" % OLD), "wb") as handle:
        handle.write(b"\x7fELF compat")
    os.symlink("libcuda.so.%s" % OLD, os.path.join(compat, "libcuda.so.1"))
    with open(os.path.join(fs_root, "var/lib/dpkg/status"), "a") as handle:
        for name, version in (("nvidia-settings", "535.171.04-1"),
                              ("cuda-compat-13-0", OLD + "-1"),
                              ("libnvidia-egl-wayland1", "1:1.1.13-1")):
            handle.write("\n" + driver.stanza(name, version, driver.DEBIAN_MAINTAINER))
    refusals, state = _refusals(root, containers=[143])
    assert refusals == [] and state["containers"][0]["userspace"]["mixed"] == []


# --------------------------------------------------------------------------- ld.so.conf


def _conf_host(tmp_path, text):
    root = _ct_host(tmp_path)
    fs_root = driver.ct_installed_deb(root, 150, NEW)
    with open(os.path.join(fs_root, "etc/ld.so.conf"), "w") as handle:
        handle.write(text)
    return root


@pytest.mark.parametrize("text, cap", [
    ("".join("/opt/lib%d\n" % i for i in range(80000)), "over 64 KiB"),
    ("/" + "x" * (4 << 20) + "\n", "over 64 KiB"),
    ("".join("/opt/l%d\n" % i for i in range(300)), "more than 256 folders listed"),
])
def test_a_huge_ld_so_conf_is_a_named_error_in_well_under_a_second(tmp_path, text, cap):
    root = _conf_host(tmp_path, text)
    started = time.monotonic()
    refusals, state = _refusals(root, containers=[150])
    assert time.monotonic() - started < 1.0
    ct = state["containers"][0]
    assert ct["readable"] is False and "etc/ld.so.conf: " in ct["reason"] and cap in ct["reason"]
    assert refusals == ["150: %s" % ct["reason"]]


def test_more_than_64_included_files_is_a_named_error(tmp_path):
    root = _conf_host(tmp_path, "include /etc/ld.so.conf.d/*.conf\n")
    folder = os.path.join(root, "rpool/data/subvol-150-disk-0/etc/ld.so.conf.d")
    for i in range(70):
        with open(os.path.join(folder, "%03d.conf" % i), "w") as handle:
            handle.write("/opt/x%d\n" % i)
    started = time.monotonic()
    _refusals_, state = _refusals(root, containers=[150])
    assert time.monotonic() - started < 1.0
    assert "more than 64 ld.so.conf files included" in state["containers"][0]["reason"]


def test_a_repeated_folder_within_the_cap_is_searched_once(tmp_path):
    root = _conf_host(tmp_path, "/usr/lib/x86_64-linux-gnu\n" * 2500)  # 65,000 bytes
    started = time.monotonic()
    refusals, _state = _refusals(root, containers=[150])
    assert time.monotonic() - started < 1.0 and refusals == []


def test_a_hook_container_over_mixed_host_libraries_is_refused(tmp_path):
    root = _ct_host(tmp_path)
    driver.ct_hook(root, 144)
    lib = os.path.join(root, driver.LIB.lstrip("/"))
    with open(os.path.join(lib, "libnvidia-nvvm.so.%s" % OLD), "wb") as handle:
        handle.write(b"\x7fELF stand-in")
    os.symlink("libnvidia-nvvm.so.%s" % OLD, os.path.join(lib, "libnvidia-nvvm.so.4"))
    refusals, _state = _refusals(root, containers=[144])
    assert refusals[0].startswith("144: mixed NVIDIA user space on the host, which the "
                                  "nvidia hook mounts: ")
    assert "libnvidia-nvvm.so.4 %s" % OLD in refusals[0]


def test_a_bound_library_folder_with_an_old_library_is_refused(tmp_path):
    root = _ct_host(tmp_path)
    fs_root = driver.zfs_root(root, 145)
    driver.dpkg_status(fs_root, [])
    lib = os.path.join(root, driver.LIB.lstrip("/"))
    with open(os.path.join(lib, "libnvidia-gpucomp.so.%s" % OLD), "wb") as handle:
        handle.write(b"\x7fELF stand-in")
    driver.container_config(root, 145, "local-zfs:subvol-145-disk-0,size=100G", [
        "lxc.mount.entry: %s usr/lib/nvidia none bind,ro,optional,create=dir" % driver.LIB])
    refusals, _state = _refusals(root, containers=[145])
    assert refusals == ["145: user space %s, target %s (bind-mount of the host's): stage the "
                        "host's user space" % (OLD, NEW)]
