"""sysinfo: the small host readers (the NVIDIA driver version,
module parameters and modprobe.d options, the CPU vendor, module availability) on trees
the fixture builders write in the kernel's formats (tests/fixtures/procsys.py: the
``/proc/driver/nvidia/version`` banners of the open and proprietary modules, a 128-thread
``/proc/cpuinfo``; tests/fixtures/dkms.py: ``modules.dep``)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import sysinfo
from fixtures import dkms as dkmsfix
from fixtures import procsys


def _write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


@pytest.mark.parametrize("open_modules", [True, False])
def test_nvidia_driver_version_from_both_banners(tmp_path, open_modules):
    procsys.nvidia_driver(tmp_path, "590.48.01", open_modules=open_modules)
    os.unlink(str(tmp_path / "sys/module/nvidia/version"))
    assert sysinfo.nvidia_driver_version(str(tmp_path)) == "590.48.01"


def test_nvidia_driver_version_falls_back_to_sysfs_then_none(tmp_path):
    procsys.nvidia_driver(tmp_path, "580.159.04")
    _write(tmp_path, "/proc/driver/nvidia/version", "something else entirely\n")
    assert sysinfo.nvidia_driver_version(str(tmp_path)) == "580.159.04"
    assert sysinfo.nvidia_driver_version(str(tmp_path / "none")) is None


def test_module_param_takes_dashed_names(tmp_path):
    procsys.nvidia_driver(tmp_path, uvm_disable_hmm="Y")
    assert sysinfo.module_param(str(tmp_path), "nvidia-uvm", "uvm_disable_hmm") == "Y"
    assert sysinfo.module_param(str(tmp_path), "nvidia_uvm", "absent") is None


@pytest.mark.parametrize("text,want", [("Y", True), ("1\n", True), ("N", False), ("0", False),
                                       ("off", False), ("maybe", None), (None, None)])
def test_param_true(text, want):
    assert sysinfo.param_true(text) is want


def test_modprobe_options_later_files_win_and_etc_shadows_lib(tmp_path):
    root = str(tmp_path)
    _write(root, "/lib/modprobe.d/nvidia-uvm.conf", "options nvidia_uvm uvm_disable_hmm=0\n")
    _write(root, "/usr/lib/modprobe.d/50-other.conf", "options nvidia-uvm a=1 b=2\n")
    procsys.modprobe_option(root)  # /etc/modprobe.d/nvidia-uvm.conf: uvm_disable_hmm=1
    _write(root, "/etc/modprobe.d/90-last.conf",
           "# options nvidia_uvm b=commented\noptions nvidia_uvm \\\n  b=3\n"
           "options nvidia NVreg_X=1\n")
    _write(root, "/etc/modprobe.d/readme", "options nvidia_uvm b=9\n")  # not a .conf
    out = sysinfo.modprobe_options(root, "nvidia-uvm")
    assert out["options"] == {"a": "1", "b": "3", "uvm_disable_hmm": "1"}
    assert out["files"] == ["/usr/lib/modprobe.d/50-other.conf",
                            "/etc/modprobe.d/90-last.conf", "/etc/modprobe.d/nvidia-uvm.conf"]
    assert sysinfo.modprobe_options(str(tmp_path / "none"), "x") == {"options": {},
                                                                     "files": []}


def test_cpu_identity_reads_the_first_block_only(tmp_path):
    procsys.cpuinfo(tmp_path, threads=4)
    # a later block that disagrees is never read
    with open(str(tmp_path / "proc/cpuinfo"), "a") as handle:
        handle.write("\nprocessor\t: 4\nvendor_id\t: GenuineIntel\n")
    out = sysinfo.cpu_identity(str(tmp_path))
    assert out["vendor"] == "AuthenticAMD"
    assert out["model_name"] == "AMD EPYC 9335 32-Core Processor"
    assert "avx512f" in out["flags"]
    none = sysinfo.cpu_identity(str(tmp_path / "none"))
    assert none == {"vendor": None, "model_name": None, "flags": []}


def test_module_available_by_modules_dep_or_an_updates_copy(tmp_path):
    root = str(tmp_path)
    release = dkmsfix.SEED_RUNNING
    dkmsfix.kernel_tree(root, release)
    assert sysinfo.module_available(root, release, "nvme-core") is True  # dashes as in .dep
    assert sysinfo.module_available(root, release, "nvidia") is False
    _write(root, "/lib/modules/%s/updates/dkms/nvidia.ko.zst" % release, "x")
    assert sysinfo.module_available(root, release, "nvidia") is True
    assert sysinfo.module_available(root, "9.9.9-unknown", "nvme") is None
    assert sysinfo.module_available(root, None, "nvme") is None
