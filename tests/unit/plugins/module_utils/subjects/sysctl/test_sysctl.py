"""sysctl: reading ``/proc/sys`` under a root and comparing with wanted values the way
sysctl(8) prints them (vectors such as ``net.ipv4.tcp_rmem`` tab-separated in the file,
one space apart when printed), the "at least" keys, and the key names refused before any
path is built. Trees from tests/fixtures/procsys.py."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl
from fixtures import procsys


@pytest.fixture
def desktop(tmp_path):
    procsys.sysctls(tmp_path, procsys.DESKTOP_SYSCTLS)
    return str(tmp_path)


def test_key_path_maps_dots_to_folders(tmp_path):
    assert sysctl.key_path(str(tmp_path), "net.core.rmem_max") == str(
        tmp_path / "proc/sys/net/core/rmem_max")


@pytest.mark.parametrize("key", ["", ".hidden", "kernel..x", "kernel/../../etc/passwd",
                                 "../x", None])
def test_key_path_refuses_names_that_could_leave_proc_sys(tmp_path, key):
    with pytest.raises(ValueError, match="invalid sysctl key"):
        sysctl.key_path(str(tmp_path), key)


def test_read_sysctl_normalizes_vectors_and_none_when_absent(desktop):
    assert sysctl.read_sysctl(desktop, "net.ipv4.tcp_rmem") == "4096 131072 6291456"
    assert sysctl.read_sysctl(desktop, "vm.swappiness") == "60"
    assert sysctl.read_sysctl(desktop, "kernel.nope") is None


def test_read_many_leaves_out_a_key_whose_file_is_refused(desktop):
    fifo = sysctl.key_path(desktop, "vm.dirty_ratio")
    os.unlink(fifo)
    os.mkfifo(fifo)  # a FIFO where a host tree should hold a file: never read, never blocks
    out = sysctl.read_many(desktop, ["vm.swappiness", "vm.dirty_ratio", "kernel.nope"])
    assert out == {"vm.swappiness": "60", "kernel.nope": None}


@pytest.mark.parametrize("key,current,wanted,ok", [
    ("vm.swappiness", "10", "10", True),
    ("vm.swappiness", "60", "10", False),
    ("net.ipv4.tcp_rmem", "4096\t131072  6291456", "4096 131072 6291456", True),
    ("net.core.rmem_max", "33554432", "16777216", True),   # larger is as good
    ("net.core.rmem_max", "212992", "16777216", False),
    ("vm.dirty_ratio", "40", "20", False),                  # not an at-least key
    ("vm.swappiness", None, "10", False),
])
def test_satisfied(key, current, wanted, ok):
    assert sysctl.satisfied(key, current, wanted) is ok


@pytest.mark.parametrize("current,wanted,out", [
    ("33554432", "16777216", "33554432"),
    ("212992", "16777216", "16777216"),
    (None, " 16777216 ", "16777216"),
    ("abc", "16777216", "16777216"),
])
def test_at_least_value_keeps_a_larger_ceiling(current, wanted, out):
    assert sysctl.at_least_value(current, wanted) == out


def test_normalize():
    assert sysctl.normalize(" 1\t2\n 3 ") == "1 2 3" and sysctl.normalize(5) == "5"
