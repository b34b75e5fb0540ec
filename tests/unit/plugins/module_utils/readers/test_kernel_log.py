"""kernlog: the host health facts from the kernel log (classes counted over the window,
the OOM kill naming its container in both cgroup forms, the live journal read keeping only
the health lines), on stored kernel logs in their real formats (tests/fixtures/kernmsg.py;
moved from test_host_health.py, the issue-25 story, which keeps the findings)."""

import os
import subprocess
import time

from fixtures import hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.core import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.readers import kernel_log as kernlog
from ansible_collections.gpuhost.tuning.plugins.module_utils.core.runner import Runner
from conftest import TESTS

DOUBLES = os.path.join(TESTS, "doubles")
NOW = hosts.SEED_CAPTURED_AT


def _health(tmp_path, messages, boot_offset=86400, window=7):
    """host_health facts of a tree whose stored kernel log holds ``[(age_s, message)]``."""
    root = nvhealth.stored_kernel_log(tmp_path, messages, NOW, boot_offset, window)
    outputs = cmdout.CommandOutputs(root)
    return kernlog.health_facts(root, outputs, window, boot_time=kernlog.boot_time(root))


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
    facts = kernlog.health_facts(str(tmp_path / "none"), outputs, 7)
    assert facts["events"]["oops"]["count"] == 1
    stored = outputs.captured()["/.gpuhost-capture/kernel-log.txt"].decode()
    assert stored.splitlines()[1:] == wanted
