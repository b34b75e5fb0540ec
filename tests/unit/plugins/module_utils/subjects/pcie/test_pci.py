"""module_utils/pci: addresses, sysfs attributes, capability walk, upstream walk (the MRRS
write: test_pci_write.py)."""

import os
import struct

import pytest
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci

from fixtures import pci as fx


@pytest.fixture
def seed(tmp_path):
    info = fx.seed_gpus(tmp_path)
    return str(tmp_path), info


@pytest.fixture
def vm(tmp_path):
    address = fx.vm_gpu(tmp_path)
    return str(tmp_path), address


# --- addresses -------------------------------------------------------------------------


@pytest.mark.parametrize("given,want", [
    ("01:00.0", "0000:01:00.0"),
    ("0000:01:00.0", "0000:01:00.0"),
    ("0000:C1:00.1", "0000:c1:00.1"),
    (" 81:00.0 ", "0000:81:00.0"),
    ("10000:e1:00.0", "10000:e1:00.0"),  # VMD domain
])
def test_normalize_address(given, want):
    assert pci.normalize_address(given) == want


@pytest.mark.parametrize("bad", ["", "01:00", "0000:01:00.8", "gpu0", "0000:01:20.0",
                                 "0000:001:00.0", None])
def test_normalize_address_rejects(bad):
    with pytest.raises(ValueError, match="invalid PCI address"):
        pci.normalize_address(bad)


# --- decoding on the real H200's values -------------------------------------------------


def test_decode_devctl_h200():
    d = pci.decode_devctl(0x5134)
    assert d["mrrs"] == 4096
    assert d["mps"] == 256
    assert d["relaxed_ordering"] is True
    assert d["extended_tag"] is True
    assert d["no_snoop"] is False
    assert d["fatal_error_reporting"] is True
    assert d["correctable_error_reporting"] is False
    assert d["nonfatal_error_reporting"] is False
    assert d["unsupported_request_reporting"] is False
    assert d["bridge_retry_or_flr"] is False


def test_decode_devctl_reserved_sizes_are_none():
    assert pci.decode_devctl(0x6000)["mrrs"] is None
    assert pci.decode_devctl(0x7000 | 0x00E0)["mps"] is None
    assert pci.decode_devctl(0x8000)["bridge_retry_or_flr"] is True


def test_decode_devcap_h200():
    d = pci.decode_devcap(0x112C8021)
    assert d["mps_supported"] == 256
    assert d["flr_capable"] is True
    assert d["extended_tag_supported"] is True
    assert d["role_based_error_reporting"] is True


@pytest.mark.parametrize("text,want", [
    ("32.0 GT/s PCIe", 32.0), ("16.0 GT/s PCIe", 16.0), ("2.5 GT/s PCIe", 2.5),
    ("8 GT/s", 8.0), ("5 GT/s", 5.0), ("Unknown", None), ("Unknown speed", None), (None, None),
])
def test_parse_link_speed(text, want):
    assert pci.parse_link_speed(text) == want


# --- the VM H200: PCIe cap at 0x60, directly on the host bridge --------------------------


def test_vm_gpu_registers_and_summary(vm):
    root, address = vm
    dev = pci.PciDevice(root, address)
    assert dev.pcie_cap_offset() == 0x60
    assert dev.devcap == 0x112C8021
    assert dev.devctl == 0x5134
    assert dev.port_type == "endpoint"
    assert dev.upstream() == []
    assert dev.on_host_bridge
    s = pci.summary(dev)
    assert set(s) == {"address", "vendor", "device", "class", "driver", "numa_node",
                      "max_read_request_size", "max_payload_size",
                      "max_payload_size_supported", "link"}
    assert s == {
        "address": "0000:00:10.0", "vendor": "10de", "device": "2335", "class": "030200",
        "driver": "nvidia", "numa_node": -1, "max_read_request_size": 4096,
        "max_payload_size": 256, "max_payload_size_supported": 256,
        "link": {"speed_gts": 32.0, "width": 16, "max_speed_gts": 32.0, "max_width": 16},
    }


# --- the seed host -----------------------------------------------------------------------


def test_seed_gpu_chain_has_pcie_not_first(seed):
    root, info = seed
    dev = pci.PciDevice(root, info["gpus"][0])
    caps = dev.capabilities()
    assert [c for _o, c in caps] == [0x01, 0x05, 0x10, 0x09, 0x11]
    assert caps[0] != (0x78, 0x10)
    assert dev.pcie_cap_offset() == 0x78
    assert dev.devctl == 0x2936  # MRRS 512, MPS 256, NoSnoop+ ExtTag+ RlxdOrd+ NonFatal+ Fatal+
    rp = pci.PciDevice(root, info["root_ports"][0])
    assert rp.pcie_cap_offset() == 0x58
    assert rp.port_type == "root_port"
    assert rp.header_type() == 1


def test_seed_attributes(seed):
    root, info = seed
    gpu = pci.PciDevice(root, "81:00.0")
    assert (gpu.vendor, gpu.device, gpu.pci_class) == ("10de", "2bb5", "030200")
    assert gpu.driver == "nvidia"
    assert gpu.numa_node == 1
    assert gpu.link == {"speed_gts": 32.0, "width": 16, "max_speed_gts": 32.0, "max_width": 16}
    hb = pci.PciDevice(root, "0000:00:00.0")
    assert hb.driver is None
    assert hb.pcie_cap_offset() is None  # AMD root complex: no capability list at all
    assert pci.summary(hb)["max_read_request_size"] is None
    audio = pci.PciDevice(root, info["audio"][0])
    assert audio.driver == "snd_hda_intel"


def test_list_and_select(seed):
    root, info = seed
    listed = pci.list_devices(root)
    assert listed == sorted(listed) and len(listed) == 34
    selected = [d.address for d in pci.select_devices(root)]
    assert selected == info["gpus"]
    assert not set(selected) & set(info["audio"])
    assert [d.address for d in pci.select_devices(root, "0x10de", ["0x0403"])] == info["audio"]
    assert [d.address for d in pci.select_devices(root, "144d", ["010802"])] == [info["nvme"]]
    assert pci.select_devices(root, "1002") == []
    with pytest.raises(ValueError, match="quote it"):
        pci.select_devices(root, classes=["300"])


def test_list_devices_without_sysfs(tmp_path):
    assert pci.list_devices(str(tmp_path)) == []


def test_unknown_device_is_a_clear_error(seed):
    root, _info = seed
    with pytest.raises(pci.PciError, match="0000:09:00.0 not found.*lspci -D"):
        pci.PciDevice(root, "09:00.0")


def test_link_old_kernel_unknown_and_degraded(tmp_path):
    root = str(tmp_path)
    info = fx.seed_gpus(root, old_kernel=True)
    assert pci.PciDevice(root, info["gpus"][0]).link["speed_gts"] == 32.0
    with open(os.path.join(fx.device_dir(root, info["gpus"][0]), "current_link_speed")) as h:
        assert h.read() == "32 GT/s\n"
    fx.degrade_link(root, info["gpus"][1], 16.0, 8)
    dev = pci.PciDevice(root, info["gpus"][1])
    assert dev.link == {"speed_gts": 16.0, "width": 8, "max_speed_gts": 32.0, "max_width": 16}
    buf = dev.config()
    assert struct.unpack_from("<H", buf, 0x78 + 0x12)[0] & 0x3FF == 0x84  # 16 GT/s x8
    with open(os.path.join(fx.device_dir(root, info["gpus"][2]), "current_link_speed"), "w") as h:
        h.write("Unknown\n")
    assert pci.PciDevice(root, info["gpus"][2]).link["speed_gts"] is None


# --- capability walk robustness ----------------------------------------------------------


def _patch(root, address, **offsets):
    buf = bytearray(fx.read_config(root, address))
    for off, val in offsets.items():
        buf[int(off[1:], 16)] = val
    fx.write_config(root, address, buf)


def test_walk_loop_guard_and_bad_pointers(seed):
    root, info = seed
    gpu = info["gpus"][0]
    # MSI's next pointer back to PM (0x60): a loop before the PCIe cap.
    _patch(root, gpu, x69=0x60)
    dev = pci.PciDevice(root, gpu)
    assert [o for o, _c in dev.capabilities()] == [0x60, 0x68]
    # a loop before the PCIe capability is an error naming the device, never "conventional PCI"
    with pytest.raises(pci.PciError, match="%s.*loops at 0x60" % gpu):
        dev.pcie_cap_offset()
    # self-loop on the first capability
    _patch(root, gpu, x61=0x60)
    assert [o for o, _c in dev.capabilities()] == [0x60]
    # a pointer into the header ends the walk
    _patch(root, gpu, x61=0x10)
    assert [o for o, _c in dev.capabilities()] == [0x60]
    # pointers are dword aligned: 0x6b -> 0x68
    _patch(root, gpu, x61=0x6B, x69=0x7B)
    assert dev.pcie_cap_offset() == 0x78


def test_device_off_the_bus_is_an_error(seed):
    root, info = seed
    gpu = info["gpus"][5]
    fx.write_config(root, gpu, b"\xff" * 4096)
    with pytest.raises(pci.PciError, match="0000:82:00.0.*all ones"):
        pci.PciDevice(root, gpu).pcie_cap_offset()


def test_status_bit4_clear_means_no_capabilities(seed):
    root, info = seed
    gpu = info["gpus"][0]
    buf = bytearray(fx.read_config(root, gpu))
    buf[0x06] &= ~0x10
    fx.write_config(root, gpu, buf)
    assert pci.PciDevice(root, gpu).pcie_cap_offset() is None


def test_unprivileged_64_byte_config_is_an_error_not_a_missing_cap(seed):
    root, info = seed
    gpu = info["gpus"][0]
    path = os.path.join(fx.device_dir(root, gpu), "config")
    with open(path, "rb") as h:
        head = h.read(64)
    with open(path, "wb") as h:
        h.write(head)
    with pytest.raises(pci.PciError, match="only 64 bytes.*root"):
        pci.summary(pci.PciDevice(root, gpu))


# --- upstream walk and symlinks inside the root ----------------------------------------------


def test_upstream_root_port(seed):
    root, info = seed
    for gpu in info["gpus"]:
        ups = pci.PciDevice(root, gpu).upstream()
        assert [u.address for u in ups] == info["upstream"][gpu]
    assert pci.PciDevice(root, info["root_ports"][0]).upstream() == []


def test_upstream_through_switch(tmp_path):
    root = str(tmp_path)
    info = fx.switch_gpus(root)
    for gpu in info["gpus"]:
        ups = pci.PciDevice(root, gpu).upstream()
        assert [u.address for u in ups] == info["upstream"][gpu]
        assert [u.port_type for u in ups] == ["downstream_port", "upstream_port", "root_port"]


def test_absolute_links_resolve_inside_root(seed):
    # A capture made with cp -a of absolute links (or a hand-made tree) must still map into
    # the capture, never onto this machine's /sys.
    root, info = seed
    gpu = info["gpus"][4]
    link = os.path.join(root, "sys/bus/pci/devices", gpu)
    real = "/" + os.path.relpath(fx.device_dir(root, gpu), root)
    os.unlink(link)
    os.symlink(real, link)
    dev = pci.PciDevice(root, gpu)
    assert dev.path.startswith(root)
    assert [u.address for u in dev.upstream()] == info["upstream"][gpu]
    assert dev.devctl == 0x2936


def test_links_cannot_escape_root(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"))
    os.symlink("../../../../../../../../etc", os.path.join(root, "sys/bus/pci/devices/x"))
    assert pci.resolve_in_root(root, "/sys/bus/pci/devices/x") == "/etc"
    loop = os.path.join(root, "sys/loop")
    os.symlink("loop", loop)
    with pytest.raises(pci.PciError, match="too many levels"):
        pci.resolve_in_root(root, "/sys/loop/x")
