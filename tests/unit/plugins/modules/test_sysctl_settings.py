"""sysctl_settings module: main() with arguments, on /proc/sys trees built like real hosts."""

import errno
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import (
    sysctl_settings as sysctl_write,
)
from ansible_collections.gpuhost.tuning.plugins.modules import sysctl_settings
from fixtures import procsys
from modrun import run_module

CONF = "/etc/sysctl.d/99-gpuhost-tuning.conf"
WANTED = {
    "kernel.numa_balancing": "0",
    "kernel.sched_autogroup_enabled": "0",
    "net.core.rmem_max": "16777216",
    "net.core.wmem_max": "16777216",
    "vm.swappiness": "10",
}


def run(root, check_mode=False, diff=False, **args):
    args.setdefault("root", str(root))
    return run_module(sysctl_settings, args, check_mode=check_mode, diff=diff)


def proc(root, key):
    with open(os.path.join(str(root), "proc/sys", key.replace(".", "/")), "rb") as handle:
        return handle.read()


def conf(root):
    with open(os.path.join(str(root), CONF.lstrip("/"))) as handle:
        return handle.read()


@pytest.fixture
def host(tmp_path):
    procsys.sysctls(tmp_path, procsys.DESKTOP_SYSCTLS)
    return tmp_path


def test_applies_persists_and_is_idempotent(host):
    result = run(host, values=WANTED, at_least=["net.core.rmem_max", "net.core.wmem_max"])
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["file_changed"] is True
    assert sorted(result["changed_keys"]) == sorted(WANTED)
    assert result["skipped_keys"] == [] and result["failed_keys"] == []
    assert proc(host, "kernel.numa_balancing") == b"0\n"
    assert proc(host, "net.core.rmem_max") == b"16777216\n"
    text = conf(host)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["kernel.numa_balancing = 0", "kernel.sched_autogroup_enabled = 0",
                    "net.core.rmem_max = 16777216", "net.core.wmem_max = 16777216",
                    "vm.swappiness = 10"]
    assert sysctl_write.parse_conf(text) == WANTED
    assert oct(os.stat(os.path.join(str(host), CONF.lstrip("/"))).st_mode & 0o777) == "0o644"
    entry = [e for e in result["settings"] if e["key"] == "vm.swappiness"][0]
    assert entry == {"key": "vm.swappiness", "before": "60", "wanted": "10", "after": "10",
                     "status": "changed"}
    again = run(host, values=WANTED, at_least=["net.core.rmem_max", "net.core.wmem_max"])
    assert again["changed"] is False and again["file_changed"] is False
    assert again["changed_keys"] == []
    assert set(e["status"] for e in again["settings"]) == {"ok"}


def test_the_per_key_entries_are_reachable_with_jinja_dot_notation(host):
    """``settings`` (the name 0.1.0 gave them, ``values``, is the dict method in Jinja:
    ``result.values`` never reached the list). ``values`` stays one release, the same list."""
    import jinja2
    result = run(host, values=WANTED)
    env = jinja2.Environment()
    keys = env.from_string("{{ r.settings | map(attribute='key') | join(',') }}").render(r=result)
    assert keys.split(",") == sorted(WANTED)
    assert "built-in method values" in env.from_string("{{ r.values }}").render(r=result)
    assert result["values"] == result["settings"]           # deprecated, removed in 0.3.0


def test_file_keeps_nothing_else(host):
    path = os.path.join(str(host), CONF.lstrip("/"))
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write("# hand edit\nvm.overcommit_memory = 1\nvm.swappiness=10\n")
    result = run(host, values={"vm.swappiness": "10"}, diff=True)
    assert result["file_changed"] is True
    assert sysctl_write.parse_conf(conf(host)) == {"vm.swappiness": "10"}
    assert "vm.overcommit_memory = 1" in result["diff"][0]["before"]
    assert "vm.overcommit_memory" not in result["diff"][0]["after"]


def test_larger_buffer_kept_for_at_least_keys(host):
    procsys.sysctls(host, {"net.core.wmem_max": "33554432"})
    result = run(host, values=WANTED, at_least=["net.core.wmem_max"])
    assert proc(host, "net.core.wmem_max") == b"33554432\n"
    assert sysctl_write.parse_conf(conf(host))["net.core.wmem_max"] == "33554432"
    assert "net.core.wmem_max" not in result["changed_keys"]
    # the default is the collection's rule (the audit's): the larger buffer stays
    assert "net.core.wmem_max" not in run(host, values=WANTED)["changed_keys"]
    assert proc(host, "net.core.wmem_max") == b"33554432\n"
    # at_least [] makes every value exact
    run(host, values=WANTED, at_least=[])
    assert proc(host, "net.core.wmem_max") == b"16777216\n"


def test_check_mode_writes_nothing_and_shows_file_and_values(host, snapshot_tree):
    before = snapshot_tree(str(host))
    result = run(host, check_mode=True, diff=True, values=WANTED)
    assert snapshot_tree(str(host)) == before
    assert result["changed"] is True and result["file_changed"] is True
    assert sorted(result["changed_keys"]) == sorted(WANTED)
    file_diff, live_diff = result["diff"]
    assert file_diff["before"] == "" and "kernel.numa_balancing = 0" in file_diff["after"]
    assert "kernel.numa_balancing = 1" in live_diff["before"]
    assert "kernel.numa_balancing = 0" in live_diff["after"]


def test_missing_key_is_skipped_with_reason_not_failed(host):
    os.unlink(os.path.join(str(host), "proc/sys/kernel/numa_balancing"))  # single-node VM
    result = run(host, values=WANTED)
    assert result.get("failed") is not True, result
    assert [s["key"] for s in result["skipped_keys"]] == ["kernel.numa_balancing"]
    assert "no such key" in result["skipped_keys"][0]["reason"]
    assert any("sysctl skipped: kernel.numa_balancing" in str(w) for w in result["warnings"])
    # still persisted: the file is declarative
    assert sysctl_write.parse_conf(conf(host))["kernel.numa_balancing"] == "0"
    assert proc(host, "vm.swappiness") == b"10\n"


def read_only(monkeypatch, host, keys, code=errno.EROFS):
    """/proc/sys mounted read-only for ``keys`` (an LXC container): writes fail, access() says no.

    Tests run as root, for whom a 0444 file is still writable: the kernel's refusal is
    stood in for at the write call, the way a read-only mount refuses it."""
    paths = set(os.path.join(str(host), "proc/sys", k.replace(".", "/")) for k in keys)
    real_write = hostfs.write_in_place
    real_access = os.access

    def write(path, text):
        if path in paths:
            raise OSError(code, os.strerror(code), path)
        return real_write(path, text)

    def access(path, mode, *args, **kwargs):
        if path in paths and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(sysctl_write, "write_in_place", write)
    monkeypatch.setattr(sysctl_write.os, "access", access)


def test_read_only_proc_sys_in_container_is_skipped(host, monkeypatch):
    read_only(monkeypatch, host, ["kernel.numa_balancing", "kernel.sched_autogroup_enabled"])
    result = run(host, values=WANTED)
    assert result.get("failed") is not True, result
    skipped = dict((s["key"], s["reason"]) for s in result["skipped_keys"])
    assert sorted(skipped) == ["kernel.numa_balancing", "kernel.sched_autogroup_enabled"]
    assert "not writable here" in skipped["kernel.numa_balancing"]
    assert "Read-only file system" in skipped["kernel.numa_balancing"]
    assert proc(host, "kernel.numa_balancing") == b"1\n"
    assert proc(host, "net.core.rmem_max") == b"16777216\n"  # the network namespace's own
    check = run(host, check_mode=True, values=WANTED)
    assert [s["key"] for s in check["skipped_keys"]] == [
        "kernel.numa_balancing", "kernel.sched_autogroup_enabled"]
    assert check["changed"] is False


def test_value_not_taking_fails_but_sets_the_rest(host, monkeypatch):
    real_write = hostfs.write_in_place
    target = os.path.join(str(host), "proc/sys/kernel/numa_balancing")

    def clamp(path, text):
        real_write(path, "1\n" if path == target else text)  # the kernel keeps its value

    monkeypatch.setattr(sysctl_write, "write_in_place", clamp)
    result = run(host, values=WANTED)
    assert result["failed"] is True
    assert result["failed_keys"] == ["kernel.numa_balancing"]
    assert "kernel.numa_balancing" in result["msg"] and "reads back 1" in result["msg"]
    assert proc(host, "vm.swappiness") == b"10\n"
    assert sorted(result["changed_keys"]) == sorted(
        k for k in WANTED if k != "kernel.numa_balancing")


def test_invalid_key_writes_nothing(host, snapshot_tree):
    before = snapshot_tree(str(host))
    result = run(host, values={"vm.swappiness": "10", "../../etc/passwd": "x",
                               "vm.dirty_ratio": ""})
    assert result["failed"] is True
    assert "../../etc/passwd" in result["msg"] and "vm.dirty_ratio" in result["msg"]
    assert snapshot_tree(str(host)) == before


def test_absent_removes_the_file_and_is_idempotent(host):
    run(host, values=WANTED)
    check = run(host, check_mode=True, state="absent")
    assert check["changed"] is True and os.path.exists(os.path.join(str(host), CONF[1:]))
    gone = run(host, state="absent")
    assert gone["changed"] is True and not os.path.exists(os.path.join(str(host), CONF[1:]))
    assert proc(host, "vm.swappiness") == b"10\n"  # live values are the snapshot's business
    assert run(host, state="absent")["changed"] is False


def test_a_later_file_undoing_a_key_at_boot_fails_naming_it(host):
    """Debian links /etc/sysctl.d/99-sysctl.conf to ../sysctl.conf, read after
    99-gpuhost-tuning.conf at boot; /usr/lib/sysctl.d files sorted before ours do not matter."""
    etc = os.path.join(str(host), "etc")
    os.makedirs(os.path.join(etc, "sysctl.d"))
    with open(os.path.join(etc, "sysctl.conf"), "w") as handle:
        handle.write("# /etc/sysctl.conf - Configuration file for setting system variables\n"
                     "#kernel.domainname = example.com\nvm.swappiness = 60\n"
                     "net.core.rmem_max = 33554432\n")
    os.symlink("../sysctl.conf", os.path.join(etc, "sysctl.d/99-sysctl.conf"))
    usr = os.path.join(str(host), "usr/lib/sysctl.d")
    os.makedirs(usr)
    with open(os.path.join(usr, "50-default.conf"), "w") as handle:
        handle.write("kernel.numa_balancing = 1\n-net.core.wmem_max = 1\n")
    with open(os.path.join(usr, "zz-vendor.conf"), "w") as handle:
        handle.write("kernel.sched_autogroup_enabled = 1\n")
    result = run(host, values=WANTED, at_least=["net.core.rmem_max"])
    assert result["failed"] is True
    assert result["overridden_at_boot"] == [
        {"key": "vm.swappiness", "file": "/etc/sysctl.d/99-sysctl.conf", "value": "60",
         "wanted": "10"},
        {"key": "kernel.sched_autogroup_enabled", "file": "/usr/lib/sysctl.d/zz-vendor.conf",
         "value": "1", "wanted": "0"}]
    assert "vm.swappiness = 10 would not survive a reboot" in result["msg"]
    # everything was still applied and persisted
    assert proc(host, "vm.swappiness") == b"10\n" and result["file_changed"] is True
    # same name in /etc hides the vendor file: fixed by the operator
    with open(os.path.join(etc, "sysctl.d/zz-vendor.conf"), "w") as handle:
        handle.write("kernel.sched_autogroup_enabled = 0\n")
    with open(os.path.join(etc, "sysctl.conf"), "w") as handle:
        handle.write("net.core.rmem_max = 33554432\n")
    assert run(host, values=WANTED, at_least=["net.core.rmem_max"]).get("failed") is not True


def test_satisfied_is_exact_except_for_buffer_sizes():
    assert sysctl.satisfied("vm.swappiness", "10", 10)
    assert not sysctl.satisfied("vm.swappiness", "60", "10")
    assert not sysctl.satisfied("vm.swappiness", None, "10")
    assert sysctl.satisfied("net.ipv4.tcp_rmem", "4096\t131072  6291456", "4096 131072 6291456")
    # a larger socket buffer is as good; a smaller one is not; every rmem/wmem key alike
    for key in sysctl.AT_LEAST:
        assert sysctl.satisfied(key, "33554432", "16777216"), key
        assert not sysctl.satisfied(key, "212992", "16777216"), key
    assert not sysctl.satisfied("kernel.perf_event_paranoid", "2", "1")
