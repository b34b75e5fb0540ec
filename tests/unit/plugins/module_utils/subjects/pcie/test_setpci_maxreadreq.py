"""pci_write: the masked MRRS write of the Device Control word (config space or setpci),
read back, and the errors that name device, offset and the usual cause (lockdown, not
root), on the seed and H200 trees of tests/fixtures/pci.py (moved from test_pci.py, which
keeps the readers)."""

import errno
import os
import struct
import subprocess

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner

from fixtures import pci as fx


@pytest.fixture
def seed(tmp_path):
    info = fx.seed_gpus(tmp_path)
    return str(tmp_path), info


@pytest.fixture
def vm(tmp_path):
    address = fx.vm_gpu(tmp_path)
    return str(tmp_path), address


def _diff_offsets(a, b):
    return [i for i in range(max(len(a), len(b))) if a[i:i + 1] != b[i:i + 1]]


def test_the_seeds_whole_word_would_change_more_than_mrrs():
    # Why the module masks: the seed's 0x5937 on the H200's 0x5134 flips other bits.
    assert 0x5937 ^ 0x5134 != 0
    assert setpci_maxreadreq.mrrs_devctl(0x5134, 4096) == 0x5134
    assert setpci_maxreadreq.mrrs_devctl(0x5134, 512) == 0x2134


@pytest.mark.parametrize("size", [0, 64, 3000, 8192, "big", None])
def test_size_field_refuses(size):
    with pytest.raises(ValueError, match="128, 256, 512, 1024, 2048 or 4096"):
        setpci_maxreadreq.size_field(size)


def test_mrrs_devctl_never_sets_bit15_on_endpoint_keeps_it_on_bridge():
    assert setpci_maxreadreq.mrrs_devctl(0x8936, 4096, endpoint=True) == 0x5936
    assert setpci_maxreadreq.mrrs_devctl(0x8936, 4096, endpoint=False) == 0xD936


def test_device_without_pcie(tmp_path):
    root = str(tmp_path)
    address = fx.no_pcie_device(root)
    dev = pci.PciDevice(root, address)
    assert [c for _o, c in dev.capabilities()] == [0x01, 0x05]
    assert dev.pcie_cap_offset() is None
    assert dev.devctl is None
    s = pci.summary(dev)
    assert s["max_read_request_size"] is None and s["max_payload_size"] is None
    assert s["max_payload_size_supported"] is None
    assert s["link"] == {"speed_gts": None, "width": None, "max_speed_gts": None,
                         "max_width": None}
    with pytest.raises(pci.PciError, match="no PCI Express capability"):
        setpci_maxreadreq.set_mrrs(dev, 4096)


# --- the masked write ----------------------------------------------------------------------


@pytest.mark.parametrize("which", ["gpu", "root_port"])
def test_masked_write_keeps_every_other_bit(seed, which):
    root, info = seed
    address = info["gpus"][0] if which == "gpu" else info["root_ports"][0]
    dev = pci.PciDevice(root, address)
    cap = dev.pcie_cap_offset()
    before = fx.read_config(root, address)
    result = setpci_maxreadreq.set_mrrs(dev, 4096)
    after = fx.read_config(root, address)
    assert len(after) == 4096
    assert _diff_offsets(before, after) == [cap + 9]  # high byte of Device Control only
    old = struct.unpack_from("<H", before, cap + 8)[0]
    new = struct.unpack_from("<H", after, cap + 8)[0]
    assert old ^ new == (old ^ new) & 0x7000
    assert pci.decode_devctl(new)["mrrs"] == 4096
    assert result["before"] == 512 and result["after"] == 4096
    assert result["devctl_after"] == new


def test_write_h200_values(vm):
    root, address = vm
    dev = pci.PciDevice(root, address)
    assert setpci_maxreadreq.set_mrrs(dev, 4096)["changed"] is False  # already 4096: nothing written  # noqa: E501
    setpci_maxreadreq.set_mrrs(dev, 512)
    assert fx.devctl_of(root, address) == 0x2134


def test_endpoint_bit15_read_as_one_is_written_as_zero(seed):
    root, info = seed
    gpu = info["gpus"][0]
    buf = bytearray(fx.read_config(root, gpu))
    buf[0x78 + 9] |= 0x80
    fx.write_config(root, gpu, buf)
    setpci_maxreadreq.set_mrrs(pci.PciDevice(root, gpu), 4096)
    assert fx.devctl_of(root, gpu) == 0x5936


def test_bad_size_writes_nothing(seed, snapshot_tree):
    root, info = seed
    before = snapshot_tree(root)
    with pytest.raises(ValueError):
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 3000)
    assert snapshot_tree(root) == before


def test_dropped_write_is_an_error_naming_the_device(seed, monkeypatch):
    root, info = seed
    monkeypatch.setattr(setpci_maxreadreq, "_write_config", lambda path, offset, data: None)
    with pytest.raises(setpci_maxreadreq.PciWriteError) as exc:
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][2]), 4096)
    msg = str(exc.value)
    assert "0000:03:00.0" in msg and "wanted 4096" in msg and "read back 512" in msg


@pytest.mark.parametrize("mode,expect", [
    ("integrity", r"lockdown mode 'integrity'.*need root"),
    (None, r"If the kernel is locked down .*need root"),
])
def test_eperm_mentions_lockdown_and_root(seed, monkeypatch, mode, expect):
    root, info = seed
    if mode:
        fx.set_lockdown(root, mode)

    def refuse(path, offset, data):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM), path)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", refuse)
    with pytest.raises(setpci_maxreadreq.PciWriteError, match=expect) as exc:
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 4096)
    assert "0000:01:00.0" in str(exc.value)
    assert fx.devctl_of(root, info["gpus"][0]) == 0x2936


def test_eacces_names_root_privileges(seed, monkeypatch):
    root, info = seed

    def refuse(path, offset, data):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", refuse)
    with pytest.raises(setpci_maxreadreq.PciWriteError, match="Permission denied.*need root"):
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 4096)


def test_other_write_errors_name_device_and_offset(seed, monkeypatch):
    root, info = seed

    def broken(path, offset, data):
        raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", broken)
    with pytest.raises(setpci_maxreadreq.PciWriteError, match=r"0000:01:00.0: writing .*config at 0x80"):  # noqa: E501
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 4096)


# --- the setpci method (real pciutils against the fixture tree) --------------------------


needs_setpci = pytest.mark.skipif(Runner(processes=subprocess).which("setpci") is None,
                                  reason="pciutils not installed (scripts/apt-ensure.sh pciutils)")


@needs_setpci
@pytest.mark.parametrize("which", ["gpu", "root_port"])
def test_setpci_method_masked(seed, which):
    root, info = seed
    address = info["gpus"][3] if which == "gpu" else info["root_ports"][3]
    dev = pci.PciDevice(root, address)
    cap = dev.pcie_cap_offset()
    before = fx.read_config(root, address)
    runner = Runner(processes=subprocess)
    setpci_maxreadreq.set_mrrs(dev, 4096, method="setpci", runner=runner)
    after = fx.read_config(root, address)
    assert _diff_offsets(before, after) == [cap + 9]
    assert pci.decode_devctl(struct.unpack_from("<H", after, cap + 8)[0])["mrrs"] == 4096
    cmd = runner.calls[-1]
    mask = "f000" if which == "gpu" else "7000"
    assert cmd[1:] == ["-A", "linux-sysfs", "-O", "sysfs.path=%s/sys/bus/pci" % root,
                       "-s", address, "CAP_EXP+8.w=5000:%s" % mask]


class FakeRunner(object):
    def __init__(self, err="", path="/usr/bin/setpci"):
        self.err, self.path, self.calls = err, path, []

    def which(self, name):
        return self.path

    def run(self, args, **kwargs):
        self.calls.append(args)
        return 0, "", self.err


def test_setpci_exit0_with_warning_is_still_a_failure(seed):
    root, info = seed
    fx.set_lockdown(root, "confidentiality")
    runner = FakeRunner(err="setpci: sysfs_write: write failed: Operation not permitted\n")
    with pytest.raises(setpci_maxreadreq.PciWriteError, match="lockdown mode 'confidentiality'"):
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 4096, "setpci", runner)
    # silent no-op (device not matched, write ignored): the read-back catches it
    with pytest.raises(setpci_maxreadreq.PciWriteError, match="did not take"):
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 4096, "setpci", FakeRunner())  # noqa: E501


def test_setpci_missing(seed):
    root, info = seed
    with pytest.raises(setpci_maxreadreq.PciWriteError, match="install pciutils"):
        setpci_maxreadreq.set_mrrs(pci.PciDevice(root, info["gpus"][0]), 4096, "setpci",
                                   FakeRunner(path=None))
