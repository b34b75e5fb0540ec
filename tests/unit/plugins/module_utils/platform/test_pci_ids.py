"""platform/pci_ids.py: the PCI vocabulary of options and host files, normalized the one way
pci.py, the option checks and the boot-time config use (lspci -D's address form)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import pci_ids


@pytest.mark.parametrize("given, expected", [
    ("01:00.0", "0000:01:00.0"), ("0000:C1:00.1", "0000:c1:00.1"),
    (" 10002:41:1f.7 ", "10002:41:1f.7")])
def test_addresses_take_lspci_forms(given, expected):
    assert pci_ids.normalize_address(given) == expected


@pytest.mark.parametrize("bad", ["01:00", "0000:01:20.0", "zz:00.0", None, "01:00.8"])
def test_a_bad_address_says_the_form_to_use(bad):
    with pytest.raises(ValueError, match="invalid PCI address"):
        pci_ids.normalize_address(bad)


def test_classes_and_vendors_are_lowercase_hex():
    assert pci_ids.normalize_class("0x0302") == "0302"
    assert pci_ids.normalize_class("030200") == "030200"
    assert pci_ids.norm_hex("0x10DE", "vendor") == "10de"
    with pytest.raises(ValueError, match="quote it in YAML"):
        pci_ids.normalize_class(300)
    with pytest.raises(ValueError, match="hex digits"):
        pci_ids.norm_hex("nvidia", "vendor")


def test_the_defaults_select_nvidia_display_and_3d_controllers():
    assert pci_ids.NVIDIA_VENDOR == "10de" and pci_ids.GPU_CLASSES == ("0300", "0302")
    assert pci_ids.MRRS_SIZES == tuple(128 << n for n in range(6))
