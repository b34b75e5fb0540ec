"""sysctl_write: writing ``/proc/sys`` keys with read-back and a reason for each key that
did not take, the sysctl.d file (rendered, parsed as systemd-sysctl reads it: ``#``/``;``
comments, a ``-`` prefix), the files applied at boot in sysctl.d(5)'s order and the later
ones that would undo a value, whose file is the collection's own, and the value checks.
The module (sysctl_settings) is tests/unit/plugins/modules/test_sysctl_settings.py."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl_settings
from fixtures import procsys


@pytest.fixture
def desktop(tmp_path):
    procsys.sysctls(tmp_path, procsys.DESKTOP_SYSCTLS)
    return str(tmp_path)


def _write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)
    return full


def test_write_sysctl_writes_normalized_and_reads_back(desktop):
    sysctl_settings.write_sysctl(desktop, "net.ipv4.tcp_rmem", "4096\t87380   16777216")
    with open(sysctl.key_path(desktop, "net.ipv4.tcp_rmem")) as handle:
        assert handle.read() == "4096 87380 16777216\n"


def test_a_missing_key_is_kind_missing(desktop):
    # (a tree creates a file the kernel would refuse when only the last part is missing:
    # apply_values reads first and skips such a key, see below)
    with pytest.raises(sysctl_settings.SysctlWriteError) as err:
        sysctl_settings.write_sysctl(desktop, "nokernel.nope", "1")
    assert err.value.kind == "missing" and err.value.key == "nokernel.nope"
    assert "the kernel has no such key" in str(err.value)


def test_a_value_that_does_not_read_back_is_kind_mismatch(desktop, monkeypatch):
    monkeypatch.setattr(sysctl_settings, "read_sysctl", lambda root, key: "1")
    with pytest.raises(sysctl_settings.SysctlWriteError) as err:
        sysctl_settings.write_sysctl(desktop, "vm.swappiness", "10")
    assert err.value.kind == "mismatch" and "wrote 10 but reads back 1" in str(err.value)


def test_apply_values_reports_every_key_and_never_stops(desktop):
    values = {"vm.swappiness": "10", "kernel.numa_balancing": "1", "kernel.nope": "0",
              "net.core.rmem_max": "16777216"}
    procsys.sysctls(desktop, {"net.core.rmem_max": "33554432"})
    out = sysctl_settings.apply_values(desktop, values, at_least=sysctl.AT_LEAST)
    assert [(r["key"], r["status"]) for r in out] == [
        ("vm.swappiness", "changed"), ("kernel.numa_balancing", "ok"),
        ("kernel.nope", "skipped"), ("net.core.rmem_max", "ok")]
    assert out[0]["before"] == "60" and out[0]["after"] == "10"
    assert out[3]["wanted"] == "33554432"  # a larger ceiling is kept
    assert sysctl.read_sysctl(desktop, "vm.swappiness") == "10"


def test_apply_values_check_mode_writes_nothing(desktop, snapshot_tree):
    before = snapshot_tree(desktop)
    out = sysctl_settings.apply_values(desktop, {"vm.swappiness": "10"}, check_mode=True)
    assert out[0]["status"] == "changed" and out[0]["after"] == "10"
    assert snapshot_tree(desktop) == before


def test_apply_values_refuses_a_bad_key_before_writing_any(desktop, snapshot_tree):
    before = snapshot_tree(desktop)
    with pytest.raises(ValueError, match="invalid sysctl key"):
        sysctl_settings.apply_values(desktop, {"vm.swappiness": "10", "../etc/passwd": "x"})
    assert snapshot_tree(desktop) == before


def test_render_and_parse_conf_round_trip():
    text = sysctl_settings.render_conf({"vm.swappiness": 10, "net.ipv4.tcp_rmem": "4096  87380"},
                                       header="Managed\n\nby us")
    assert text == ("# Managed\n#\n# by us\nvm.swappiness = 10\n"
                    "net.ipv4.tcp_rmem = 4096 87380\n")
    assert sysctl_settings.parse_conf(text) == {"vm.swappiness": "10",
                                                "net.ipv4.tcp_rmem": "4096 87380"}
    assert sysctl_settings.parse_conf("; c\n-kernel.x = 1\nnoequals\n  vm.a=2 \n") == {
        "kernel.x": "1", "vm.a": "2"}


def test_boot_files_in_systemd_sysctl_order_etc_hiding_lib(tmp_path):
    root = str(tmp_path)
    _write(root, "/usr/lib/sysctl.d/50-default.conf", "kernel.x = 1\n")
    _write(root, "/etc/sysctl.d/50-default.conf", "kernel.x = 2\n")
    _write(root, "/run/sysctl.d/10-run.conf", "")
    _write(root, "/etc/sysctl.d/README", "")
    _write(root, "/etc/sysctl.conf", "vm.swappiness = 60\n")  # never read by itself
    assert sysctl_settings.boot_files(root) == [("/run/sysctl.d/10-run.conf", "10-run.conf"),
                                                ("/etc/sysctl.d/50-default.conf",
                                                 "50-default.conf")]


def test_boot_overrides_names_later_files_undoing_a_value(tmp_path):
    root = str(tmp_path)
    own = sysctl_settings.OWN_FILE
    _write(root, "/etc/sysctl.d/10-early.conf", "vm.swappiness = 60\n")      # before ours
    _write(root, "/etc/sysctl.d/99-zz-late.conf", "vm.swappiness = 30\n"
           "net.core.rmem_max = 33554432\nkernel.numa_balancing = 0\n")
    _write(root, "/etc/sysctl.conf", "kernel.numa_balancing = 1\n")
    os.symlink("/etc/sysctl.conf", os.path.join(root, "etc/sysctl.d/99-zzz-sysctl.conf"))
    wanted = {"vm.swappiness": "10", "net.core.rmem_max": "16777216",
              "kernel.numa_balancing": "0"}
    found = sysctl_settings.boot_overrides(root, own, wanted, at_least=sysctl.AT_LEAST)
    assert found == [
        {"key": "vm.swappiness", "file": "/etc/sysctl.d/99-zz-late.conf", "value": "30",
         "wanted": "10"},
        # Debian 12's link to /etc/sysctl.conf, resolved inside the root
        {"key": "kernel.numa_balancing", "file": "/etc/sysctl.d/99-zzz-sysctl.conf",
         "value": "1", "wanted": "0"}]


def test_owned_files(tmp_path):
    root = str(tmp_path)
    assert sysctl_settings.owned(os.path.join(root, "none.conf"))
    mine = _write(root, "/etc/sysctl.d/50-x.conf", "# Managed by gpuhost.tuning (...)\n")
    theirs = _write(root, "/etc/sysctl.d/60-y.conf", "vm.swappiness = 1\n")
    named = _write(root, "/etc/sysctl.d/99-gpuhost-tuning.conf", "vm.swappiness = 1\n")
    link = os.path.join(root, "etc/sysctl.d/70-link.conf")
    os.symlink(mine, link)
    assert sysctl_settings.owned(mine) and sysctl_settings.owned(named)
    assert not sysctl_settings.owned(theirs) and not sysctl_settings.owned(link)


def test_validate_names_every_bad_value_and_normalizes():
    assert sysctl_settings.validate({"vm.swappiness": 10, "kernel.x": True, "net.a": " 1  2 "}) \
        == {"vm.swappiness": "10", "kernel.x": "1", "net.a": "1 2"}
    with pytest.raises(ValueError) as err:
        sysctl_settings.validate({"vm.a": None, "vm.b": [], "vm.c": " ", "bad/key": "1"})
    text = str(err.value)
    assert text.startswith("invalid sysctl values, nothing written: ")
    assert "vm.a" in text and "vm.b" in text and "vm.c" in text and "bad/key" in text


def test_file_values_keep_a_larger_current_ceiling(desktop):
    procsys.sysctls(desktop, {"net.core.rmem_max": "33554432"})
    assert sysctl_settings.file_values(desktop, {"net.core.rmem_max": "16777216",
                                                 "vm.swappiness": "10"}, sysctl.AT_LEAST) == {
        "net.core.rmem_max": "33554432", "vm.swappiness": "10"}
