"""kmod_info: a module file's .modinfo (real ELF objects from fixtures/driver.py
``elf_module``, plain and xz as kmod loads them) and which file modprobe picks."""

import os
import subprocess

import pytest
from fixtures import driver

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import kmod_info

NEXT, NEW, OLD = driver.NEXT, driver.NEW, driver.OLD


def _module(folder, name, data):
    path = os.path.join(str(folder), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


@pytest.mark.parametrize("suffix", [".ko", ".ko.xz", ".ko.gz"])
def test_modinfo_reads_version_and_vermagic(tmp_path, suffix):
    data = driver.packed(driver.elf_module("nvidia-uvm", NEXT, NEW), suffix)
    info = kmod_info.modinfo(_module(tmp_path, "nvidia-uvm" + suffix, data))
    assert info["version"] == [NEW] and info["name"] == ["nvidia_uvm"]
    assert info["vermagic"][0].split()[0] == NEXT


def test_a_32_bit_big_endian_elf_reads_too(tmp_path):
    """The reader follows the ELF header's class and byte order (gcc -m32 where it can)."""
    src = tmp_path / "m.c"
    src.write_text('static const char v[] __attribute__((used, section(".modinfo"))) = '
                   '"version=%s";\n' % OLD)
    out = tmp_path / "m.o"
    done = subprocess.run(["gcc", "-m32", "-c", "-o", str(out), str(src)],
                          capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        pytest.skip("gcc -m32 is not available here")
    assert kmod_info.modinfo(str(out))["version"] == [OLD]


@pytest.mark.parametrize("data, said", [
    (b"", "empty, not an ELF kernel module"),
    (b"MZ" + b"\x00" * 100, "without the ELF magic"),
    (b"\x7fELF\x02\x01\x01" + b"\x00" * 57, "no ELF section table"),
])
def test_what_is_no_module_is_named(tmp_path, data, said):
    path = _module(tmp_path, "nvidia.ko", data)
    with pytest.raises(kmod_info.ModuleInfoError) as err:
        kmod_info.modinfo(path, label="/lib/modules/x/nvidia.ko")
    assert str(err.value).startswith("/lib/modules/x/nvidia.ko: ") and said in str(err.value)


def test_a_bad_xz_stream_is_named(tmp_path):
    path = _module(tmp_path, "nvidia.ko.xz", b"\xfd7zXZ\x00garbage")
    with pytest.raises(kmod_info.ModuleInfoError, match="not readable as a kernel module"):
        kmod_info.modinfo(path)


def test_picked_follows_modules_dep_and_else_the_search_order(tmp_path):
    root = str(tmp_path)
    lib = os.path.join(root, "lib/modules", NEXT)
    _module(lib, "updates/dkms/nvidia.ko", driver.elf_module("nvidia", NEXT, NEW))
    _module(lib, "kernel/drivers/video/nvidia.ko", driver.elf_module("nvidia", NEXT, OLD))
    item = kmod_info.picked(root, NEXT, ["nvidia"])[0]
    assert (item["source"], item["path"], item["version"]) == (
        "search order", "/lib/modules/%s/updates/dkms/nvidia.ko" % NEXT, NEW)
    _module(lib, "modules.dep", b"kernel/drivers/video/nvidia.ko:\n")
    item = kmod_info.picked(root, NEXT, ["nvidia"])[0]
    assert (item["source"], item["version"]) == ("modules.dep", OLD)
    assert "holds version %s, not %s" % (OLD, NEW) in kmod_info.judge(item, NEW, NEXT)
    assert kmod_info.judge(item, OLD, NEXT) is None


def test_dash_and_underscore_are_one_module_name(tmp_path):
    root = str(tmp_path)
    lib = os.path.join(root, "lib/modules", NEXT)
    _module(lib, "updates/dkms/nvidia-uvm.ko", driver.elf_module("nvidia-uvm", NEXT, NEW))
    _module(lib, "modules.dep", b"updates/dkms/nvidia-uvm.ko: updates/dkms/nvidia.ko\n")
    assert kmod_info.modules_dep(root, NEXT, ["nvidia_uvm"]) == {
        "nvidia_uvm": "updates/dkms/nvidia-uvm.ko"}
    assert kmod_info.modules_dep(root, "6.1.0-99-amd64", ["nvidia"]) is None


def test_module_name():
    assert kmod_info.module_name("/x/nvidia-drm.ko.zst") == "nvidia-drm"
    assert kmod_info.module_name("/x/.ko") is None
