"""Fast checks of the cgroup guest (lab/cgroup-real.sh; the guest itself is `make lab-cgroup`).

The verdict is judged on a console the guest really wrote (tests/lab/cgroup-console.log,
recorded from a passing run) and on copies of it with one result changed the way a broken
run would show it; the guest's init must parse with busybox's sh; the stand-in driver
must build against installed headers and register nvidia-uvm with a dynamic major.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CGROUP = os.path.join(REPO, "lab", "cgroup")
CONSOLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cgroup-console.log")
sys.path.insert(0, CGROUP)
import verdict  # noqa: E402


def _judge(tmp_path, edit=None):
    text = open(CONSOLE, encoding="utf-8").read()
    if edit:
        old, new = edit
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "console.log"
    path.write_text(text, encoding="utf-8")
    result = subprocess.run([sys.executable, os.path.join(CGROUP, "verdict.py"), str(path)],
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stderr


def test_the_recorded_run_passes(tmp_path):
    lines = verdict.read_console(CONSOLE)
    assert lines["major"] == "246" and lines["stale"] == "508"
    assert _judge(tmp_path) == (0, "")


@pytest.mark.parametrize("edit, named", [
    # the controller not in force (a hybrid host): the stale rule did not refuse
    (("GPUHOST before /bin/sh: can't open /dev/nvidia-uvm: Operation not permitted",
      "GPUHOST before ok"), "was not refused (EPERM)"),
    # the repaired container still refused
    (("GPUHOST after ok", "GPUHOST after /bin/sh: can't open /dev/nvidia-uvm: Operation not "
      "permitted"), "open after the repair"),
    # a module that kept the stale rule
    (('"removed": ["c 508:* rwm"]', '"removed": []'), "removed: []"),
    # a second run that changed the file again (not idempotent)
    (('GPUHOST again {"changed": false', 'GPUHOST again {"changed": true'), "second run"),
    # the guest stopped early
    (("GPUHOST end done", "GPUHOST end insmod-failed"), "did not reach the end"),
])
def test_a_broken_run_fails_naming_what_broke(tmp_path, edit, named):
    rc, err = _judge(tmp_path, edit)
    assert rc == 1 and named in err, err


@pytest.mark.skipif(not shutil.which("busybox"), reason="busybox not installed")
def test_guest_init_parses_with_busybox_sh():
    result = subprocess.run(["busybox", "sh", "-n", os.path.join(CGROUP, "init")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def _headers():
    return sorted(d for d in glob.glob("/lib/modules/*/build") if os.path.isdir(d))


@pytest.mark.skipif(not _headers(), reason="no kernel headers (/lib/modules/*/build)")
def test_uvmstub_builds_with_a_dynamic_nvidia_uvm_major(tmp_path):
    build = tmp_path / "uvmstub"
    shutil.copytree(CGROUP, build, ignore=shutil.ignore_patterns("init", "*.py"))
    result = subprocess.run(["make", "-C", _headers()[-1], "M=%s" % build, "modules"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (build / "uvmstub.ko").is_file()
    source = (build / "uvmstub.c").read_text(encoding="utf-8")
    assert re.search(r'register_chrdev\(0, "nvidia-uvm"', source)
