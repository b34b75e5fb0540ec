"""module_utils/cuda_driver: the sysfs, /proc and /dev readers the CUDA probe's causes use,
on trees built under tmp_path (PCI sysfs by tests/fixtures/pci.py, /proc/devices by
tests/fixtures/lxc.py, both in the kernel's layout)."""

import os

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda_driver
from fixtures import lxc, pci


@pytest.mark.parametrize("text,want", [
    ("0000:00:06.0", "0000:00:06.0"),
    ("0000:A1:00.0", "0000:a1:00.0"),
    ("00000000:C1:00.0", "0000:c1:00.0"),
    ("0001:0a:1f.7", "0001:0a:1f.7"),
])
def test_bus_ids_in_sysfs_form(text, want):
    assert cuda_driver.normalize_bus_id(text) == want


@pytest.mark.parametrize("gts,width,want", [
    (32.0, 16, 63.0), (16.0, 16, 31.5), (8.0, 16, 15.8), (5.0, 16, 8.0), (2.5, 16, 4.0),
    (32.0, 8, 31.5), (None, 16, None), (32.0, None, None),
])
def test_link_ceiling_per_direction(gts, width, want):
    got = cuda_driver.link_ceiling_gbs(gts, width)
    assert (round(got, 1) if got else None) == want


@pytest.mark.parametrize("text,want", [
    ("32.0 GT/s PCIe", 32.0), ("8 GT/s", 8.0), ("2.5 GT/s", 2.5), ("Unknown", None), (None, None),
])
def test_parse_gts_reads_what_the_kernel_prints(text, want):
    assert cuda_driver.parse_gts(text) == want


def test_nvidia_gpus_by_vendor_and_class_without_passthrough(tmp_path):
    info = pci.seed_gpus(tmp_path)
    root = str(tmp_path)
    assert cuda_driver.nvidia_gpus(root) == sorted(info["gpus"])
    # rebind one GPU to vfio-pci, as a VM's GPU is: CUDA on the host does not see it
    gpu = info["gpus"][1]
    drv = os.path.join(pci.device_dir(root, gpu), "driver")
    os.unlink(drv)
    os.makedirs(os.path.join(root, "sys/bus/pci/drivers/vfio-pci"))
    os.symlink("../../../../bus/pci/drivers/vfio-pci", drv)
    assert gpu in cuda_driver.nvidia_gpus(root)
    assert cuda_driver.nvidia_gpus(root, passthrough=False) == sorted(
        g for g in info["gpus"] if g != gpu)
    assert cuda_driver.nvidia_gpus(str(tmp_path / "empty")) == []


def test_nvidia_function_of_another_class_is_not_a_gpu(tmp_path):
    info = pci.seed_gpus(tmp_path)
    gpu = info["gpus"][0]
    with open(os.path.join(pci.device_dir(str(tmp_path), gpu), "class"), "w") as handle:
        handle.write("0x040300\n")  # an NVIDIA HD audio function
    assert gpu not in cuda_driver.nvidia_gpus(str(tmp_path))


def test_read_link_from_sysfs(tmp_path):
    info = pci.seed_gpus(tmp_path)
    gpu = info["gpus"][0]
    assert cuda_driver.read_link(str(tmp_path), gpu) == {
        "speed": "32.0 GT/s PCIe", "width": 16, "gbs": 63.0}
    pci.degrade_link(tmp_path, gpu, 16.0, 8)
    assert cuda_driver.read_link(str(tmp_path), gpu)["gbs"] == 15.8
    assert cuda_driver.read_link(str(tmp_path), "0000:ff:00.0") == {
        "speed": None, "width": None, "gbs": None}


def test_char_majors_reads_only_the_character_section(tmp_path):
    lxc.proc_devices(tmp_path, "before")
    majors = cuda_driver.char_majors(str(tmp_path))
    assert majors["nvidia-uvm"] == 504 and majors["mem"] == 1
    assert "blkext" not in majors  # a block device major
    lxc.proc_devices(tmp_path, "after")
    assert cuda_driver.char_majors(str(tmp_path))["nvidia-uvm"] == 509


def test_uvm_state_names_what_is_wrong(tmp_path):
    root = str(tmp_path)
    lxc.proc_devices(tmp_path, "after", without=("nvidia-uvm",))
    assert "not in /proc/devices" in cuda_driver.uvm_state(root)
    os.chmod(os.path.join(root, "proc/devices"), 0o644)
    lxc.proc_devices(tmp_path, "after")
    assert "does not exist here" in cuda_driver.uvm_state(root)
    os.makedirs(os.path.join(root, "dev"))
    with open(os.path.join(root, "dev/nvidia-uvm"), "w"):
        pass  # a bind mount gone wrong leaves a plain file
    found = cuda_driver.uvm_state(root)
    assert "not a character device" in found and "major is 509" in found
    assert found in cuda_driver.cause_for(cuda_driver.UNKNOWN, root)


def test_cause_for_no_device_names_cuda_visible_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES=''" in cuda_driver.cause_for(cuda_driver.NO_DEVICE, str(
        tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "CUDA_VISIBLE_DEVICES" not in cuda_driver.cause_for(cuda_driver.NO_DEVICE, str(
        tmp_path))
    assert cuda_driver.cause_for(12345, str(tmp_path)) is None
