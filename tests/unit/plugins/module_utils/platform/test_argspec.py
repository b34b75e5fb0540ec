"""argspec: the option specs several modules share, and ``fill`` (a spec's checks and
defaults for callers that pass a module's options by hand, host_tune's parts)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci


def test_gpu_selection_defaults_are_the_pci_readers_own():
    spec = argspec.gpu_selection()
    assert spec == {"gpu_vendor": {"type": "str", "default": pci.NVIDIA_VENDOR},
                    "gpu_classes": {"type": "list", "elements": "str",
                                    "default": list(pci.GPU_CLASSES)}}
    # each call its own list: a caller that edits its default leaves the next one whole
    spec["gpu_classes"]["default"].append("0680")
    assert argspec.gpu_selection()["gpu_classes"]["default"] == list(pci.GPU_CLASSES)


def test_device_selection_renames_and_adds_include_upstream():
    spec = argspec.device_selection()
    assert sorted(spec) == ["classes", "include_upstream", "vendor"]
    assert spec["include_upstream"] == {"type": "bool", "default": True}


def test_root():
    assert argspec.root() == {"root": {"type": "path", "default": "/"}}


def test_fill_completes_defaults_and_treats_none_as_not_given():
    spec = dict(argspec.gpu_selection(), size=dict(type="int", default=4096))
    out = argspec.fill(spec, {"size": "512", "gpu_vendor": None})
    assert out == {"gpu_vendor": pci.NVIDIA_VENDOR, "gpu_classes": list(pci.GPU_CLASSES),
                   "size": 512}


def test_fill_keeps_internal_keys_as_given_and_unchecked():
    spec = {"size": dict(type="int", default=4096)}
    obj = object()
    out = argspec.fill(spec, {"size": 256, "ctx": obj}, internal=("ctx", "absent"))
    assert out["size"] == 256 and out["ctx"] is obj and out["absent"] is None


def test_fill_names_every_problem():
    spec = {"size": dict(type="int", default=4096),
            "mode": dict(type="str", choices=["a", "b"], default="a")}
    with pytest.raises(ValueError) as err:
        argspec.fill(spec, {"size": "big", "mode": "c", "bogus": 1})
    text = str(err.value)
    assert "size" in text and "mode" in text and "bogus" in text


def test_fill_without_ansible_gives_defaults_then_given(monkeypatch):
    # the audit timer's program on the host has no Ansible: no checks, the same shape
    monkeypatch.setattr(argspec, "ArgumentSpecValidator", None)
    spec = {"size": dict(type="int", default=4096), "list": dict(type="list", default=[1])}
    out = argspec.fill(spec, {"size": 512, "ctx": "x"}, internal=("ctx",))
    assert out == {"size": 512, "list": [1], "ctx": "x"}
    out["list"].append(2)
    assert spec["list"]["default"] == [1]
