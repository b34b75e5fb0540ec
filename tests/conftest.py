"""Shared pytest set-up.

Makes ``ansible_collections.gpuhost.tuning`` importable from this checkout (a link under
``tests/output``), so unit tests always exercise the live source, and puts ``tests/`` on
``sys.path`` for the fixture builders (``fixtures.*``) and the module runner (``modrun``).
"""

import fcntl
import os
import re
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
LINKS = os.path.join(TESTS, "output", "pathlink")
_link = os.path.join(LINKS, "ansible_collections", "gpuhost", "tuning")
if not os.path.islink(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    try:
        os.symlink(REPO, _link)
    except FileExistsError:
        pass
for _path in (LINKS, TESTS):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def _fast_temproot(path="/dev/shm", need=4 << 30, need_inodes=1500000):
    """``path`` when it is a writable tmpfs with ``need`` bytes free, else None.

    The tiers build hundreds of host trees (the unit tier about 550,000 files, 370 MB).
    On these machines' disk, creating them took 43 s and pytest's removal of an old run's
    trees 73 s for one golden test file, against 25 s and 1.4 s on tmpfs (measured side by
    side): the removal happens at the exit of a later pytest run, so every tier paid for the
    one before it.
    """
    try:
        with open("/proc/mounts") as handle:
            mounts = [line.split() for line in handle]
        if not any(m[1] == path and m[2] == "tmpfs" for m in mounts if len(m) > 2):
            return None
        stat = os.statvfs(path)
        if stat.f_bavail * stat.f_frsize < need or not os.access(path, os.W_OK):
            return None
        # a tmpfs has as many inodes as half its pages: the unit tier's trees alone take
        # about 600,000, and trees older runs left there can use up the rest (seen here:
        # "could not create numbered dir" at 98 % of 3 M inodes)
        if stat.f_files and stat.f_favail < need_inodes:
            return None
    except OSError:
        return None
    return path


# pytest's own temporary folders (tmp_path, tmp_path_factory) on tmpfs when there is one;
# GPUHOST_TEST_TMP=disk (or PYTEST_DEBUG_TEMPROOT / --basetemp) keeps them where you say.
if os.environ.get("GPUHOST_TEST_TMP") != "disk" and "PYTEST_DEBUG_TEMPROOT" not in os.environ:
    _root = _fast_temproot()
    if _root:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = _root


# The modules' bytecode cache on a host (platform/codecache.py) is this checkout's test
# output folder for every module a test runs through Ansible on this machine, never the
# tester's ~/.ansible; a test of the cache itself names its own folder.
os.environ.setdefault("GPUHOST_TUNING_CODE_CACHE", os.path.join(TESTS, "output", "pycache"))


def install_collection(env):
    """``make collection`` (the checkout into ./collections) once per test run: every
    pytest-xdist worker of one run shares it, and no worker reinstalls it while another's
    playbook reads it (``ansible-galaxy collection install --force`` removes it first)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or "pid-%d" % os.getpid()
    output = os.path.join(TESTS, "output")
    os.makedirs(output, exist_ok=True)
    stamp = os.path.join(output, "collection.run")
    with open(os.path.join(output, "collection.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as handle:
                if handle.read() == run_id:
                    return
        except OSError:
            pass
        subprocess.run(["make", "-s", "-C", REPO, "collection"], check=True, env=env,
                       capture_output=True, timeout=300)
        with open(stamp, "w") as handle:
            handle.write(run_id)


def tree_snapshot(root):
    """Every path under ``root`` with its bytes (or link target): for byte-identical checks."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    out[rel] = ("file", handle.read(), os.stat(path).st_mode & 0o7777)
            else:
                out[rel] = ("dir",)
    return out


@pytest.fixture
def snapshot_tree():
    return tree_snapshot


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/unit/golden from the current code (an intended "
                          "change of the audit's output; review the diff)")


# What differs between two audit runs of the same trees: the times (reports, metrics).
# a time in the HTML pages is two words kept whole (<span class="nw">), date then time
REPORT_TIMES = [(re.compile(r'\d{4}-\d\d-\d\d(?:[T ]|</span> <span class="nw">)\d\d:\d\d:\d\dZ'),
                 "<time>"),
                (re.compile(r'"duration_s": [0-9.]+'), '"duration_s": <s>'),
                (re.compile(r"^((?:gpuhost_audit_(?:timestamp|duration)_seconds"
                            r"|gpuhost_last_good_audit_age_seconds)\{[^}]*\}) \S+$",
                            re.M), r"\1 <n>")]


def reports_without_times(folder):
    """``{file name: text}`` of a report folder with the run's times masked."""
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            text = handle.read()
        for pattern, repl in REPORT_TIMES:
            text = pattern.sub(repl, text)
        out[name] = text
    return out


# The platform switch of the real-tool tests (Debian 12 here, Debian 13 in its test image).
# pylint: disable-next=unused-import
from platforms import pytest_collection_modifyitems, suite  # noqa: E402,F401
