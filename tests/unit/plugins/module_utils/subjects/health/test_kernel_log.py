"""kernlog: the host health facts from the kernel log (classes counted over the window,
the OOM kill naming its container in both cgroup forms, the live journal read keeping only
the health lines), on stored kernel logs in their real formats (tests/fixtures/kernmsg.py;
moved from test_host_health.py, the issue-25 story, which keeps the findings)."""

import os
import subprocess
import time

from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import kernel_log
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from conftest import TESTS

DOUBLES = os.path.join(TESTS, "doubles")
NOW = hosts.SEED_CAPTURED_AT


def _health(tmp_path, messages, boot_offset=86400, window=7):
    """host_health facts of a tree whose stored kernel log holds ``[(age_s, message)]``."""
    root = nvhealth.stored_kernel_log(tmp_path, messages, NOW, boot_offset, window)
    outputs = cmdout.CommandOutputs(root)
    return kernel_log.health_facts(root, outputs, window, boot_time=kernel_log.boot_time(root))


def test_each_class_counted_over_the_window_only(tmp_path):
    old = 8 * 86400  # outside the 7-day window
    messages = [(old, kernmsg.SOFT_LOCKUP), (old, kernmsg.OOPS), (3600, kernmsg.SOFT_LOCKUP),
                (3000, kernmsg.HUNG_TASK), (2000, kernmsg.NVME_TIMEOUT),
                (1999, kernmsg.NVME_RESET), (1000, kernmsg.EXT4_RO)]
    messages += [(500, text) for text in kernmsg.ghes("corrected")]
    facts = _health(tmp_path, messages)
    events = facts["events"]
    assert events["lockup"]["count"] == 2
    assert events["oops"]["count"] == 0
    assert events["nvme"]["subjects"] == {"nvme1": {"count": 2, "tasks": []}}
    assert events["fs_readonly"]["subjects"]["sdb1"]["count"] == 1
    assert events["hardware_error"]["count"] == 1
    assert events["hardware_error"]["severities"] == ["corrected"]
    assert events["lockup"]["last"] == "2025-12-31T23:10:00Z"


def test_oom_kill_names_the_container_in_both_cgroup_forms(tmp_path):
    messages = [(900, t) for t in kernmsg.oom(pid=1)]
    messages += [(800, t) for t in kernmsg.oom(pid=2, memcg="/lxc.payload.130/init.scope",
                                               oom_memcg="/lxc.payload.130")]
    messages += [(700, t) for t in kernmsg.oom(pid=3, task="kvm", memcg="/qemu.slice/101.scope",
                                               oom_memcg="(null)", cgroup_oom=False)]
    subjects = _health(tmp_path, messages)["events"]["oom"]["subjects"]
    assert subjects == {"lxc/129": {"count": 1, "tasks": ["python3"]},
                        "lxc/130": {"count": 1, "tasks": ["python3"]},
                        "host": {"count": 1, "tasks": ["kvm"]}}


def test_live_journal_keeps_only_the_health_lines(tmp_path, monkeypatch):
    now = time.time()
    journal = tmp_path / "journal.txt"
    wanted = [kernmsg.line(now - 60, kernmsg.EXT4_RO), kernmsg.line(now - 50, kernmsg.OOPS)]
    noise = [kernmsg.line(now - 40, kernmsg.NVME_QUEUES),
             kernmsg.line(now - 30, "usb 1-1: new high-speed USB device number 2")]
    journal.write_text("\n".join(wanted + noise) + "\n")
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("GPUHOST_JOURNAL_TEXT", str(journal))
    monkeypatch.setenv("GPUHOST_JOURNAL_RC", "0")
    outputs = cmdout.CommandOutputs("/", Runner(processes=subprocess))
    facts = kernel_log.health_facts(str(tmp_path / "none"), outputs, 7)
    assert facts["events"]["oops"]["count"] == 1
    stored = outputs.captured()["/.gpuhost-capture/kernel-log.txt"].decode()
    assert stored.splitlines()[1:] == wanted


# ---- issue 36: bounded numbers, cut lines, one byte budget over the rotations -------------


def test_a_huge_code_is_no_event_and_the_line_after_it_still_is():
    huge = kernmsg.line(time.time(), "NVRM: Xid (PCI:0000:01:00): %s, x" % ("7" * 5000))
    assert kernel_log.parse_line(huge) is None
    event = kernel_log.parse_line(kernmsg.line(time.time(), "NVRM: Xid (PCI:0000:01:00): 79, "
                                               "pid=1, GPU has fallen off the bus."))
    assert (event["code"], event["message"]) == (79, "pid=1, GPU has fallen off the bus.")


def test_keep_cuts_each_kept_line():
    line = kernmsg.line(time.time(), kernmsg.NVME_TIMEOUT) + " x" * 50000
    kept = kernel_log.keep(["", "short", line])
    assert [len(k) for k in kept] == [kernel_log.host_health.LINE_CHARS]


def test_the_stored_lines_are_read_one_at_a_time():
    text = "# header\n\n\nshort\n%s\r\n%s" % ("a" * 20, "b" * 5000)
    assert list(kernel_log._lines(text, True)) == ["a" * 20, "b" * kernel_log.host_health.LINE_CHARS]  # noqa: E501
    assert list(kernel_log._lines("# header only", True)) == []


def test_kern_log_is_read_newest_first_within_one_budget(tmp_path, monkeypatch):
    """LOG_LIMIT bytes over every rotation: the newest file first; an older one past the
    budget is not read, and the audit's errors say so."""
    monkeypatch.setattr(kernel_log, "LOG_LIMIT", 4096)
    now = time.time()
    old = nvhealth.xid_line(now - 7200, "0000:01:00.0", 79)
    new = nvhealth.xid_line(now - 60, "0000:02:00.0", 79)
    nvhealth.write_kern_log(str(tmp_path), [old], name="kern.log.1", mtime=now - 3600,
                            noise=False)
    nvhealth.write_kern_log(str(tmp_path), ["\n" * 5000 + new], mtime=now - 30, noise=False)
    lines, files = kernel_log.read_kern_log(str(tmp_path), now - 86400)
    assert lines == [new] and files == ["/var/log/kern.log"]
    monkeypatch.setattr(kernel_log, "LOG_LIMIT", 1 << 20)
    lines, files = kernel_log.read_kern_log(str(tmp_path), now - 86400)
    assert lines == [old, new] and files == ["/var/log/kern.log.1", "/var/log/kern.log"]


def test_the_journal_is_read_bounded_to_its_newest_messages(monkeypatch):
    """``-n JOURNAL_LINES``: the journal's output is held whole, so it is bounded in lines;
    a window holding more is named in the audit's errors."""
    calls = []

    class FakeRunner(object):
        def which(self, name):
            return "/usr/bin/" + name

        def run(self, args, check=True, timeout=None):
            calls.append(args)
            return 0, "\n".join([kernmsg.line(time.time(), kernmsg.OOPS)] * 3) + "\n", ""

    monkeypatch.setattr(kernel_log, "JOURNAL_LINES", 3)
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
    with hostfs.session() as errors:
        lines, error = kernel_log._journal(FakeRunner(), 7)
    assert error is None and len(lines) == 3
    assert calls[0][calls[0].index("-n") + 1] == "3"
    assert any("only its newest 3 kernel messages" in m for _s, m in errors.problems)
