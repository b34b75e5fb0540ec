"""Files that are not files, and links out of the root, for the whole class: every file the
audit reads on the seed host (listed by the capture's recorder, ``hostfs.recording``) is
replaced, one at a time, by a FIFO (the audit must not block and must name the path in its
errors) and by a link out of the tree (the outside file must not be read, its text not be in
the result). Then the memory cases: a kernel log that is a link to /dev/zero, or one 3 GB
line, with the audit held to 200 MB; and one bad kernel-log line next to a real XID.

The audits run in a child Python (this file run as a script) with a time limit per case,
so a read that blocks fails its case instead of hanging the tier.
"""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
LINKS = os.path.join(TESTS, "output", "pathlink")
for _path in (LINKS, TESTS):
    if _path not in sys.path:
        sys.path.insert(0, _path)

CASE_SECONDS = 20  # one audit of the seed tree takes about 0.1 s here
MEMORY_LIMIT = 200 << 20


def _audit(root):
    from fixtures import hosts

    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
    return audit.audit(root, hosts.common_wanted("seed"))


def _read_paths(root):
    """Host paths (``/proc/cmdline``) of the regular files one audit of ``root`` reads."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs

    class Recorder(object):
        def __init__(self):
            self.paths = set()

        def note(self, path, kind):
            if kind == "read":
                self.paths.add(path)

    recorder = Recorder()
    with hostfs.recording(recorder):
        _audit(root)
    return sorted("/" + os.path.relpath(p, root) for p in recorder.paths
                  if os.path.isfile(p) and not os.path.islink(p))


def _representatives(paths):
    """One path per shape (numbers folded: ``cpuN/cpuidle/stateN/latency``), each reader's
    every kind of file; ``GPUHOST_HOSTILE_EVERY_FILE=1`` takes every path instead."""
    if os.environ.get("GPUHOST_HOSTILE_EVERY_FILE") == "1":
        return list(paths)
    shapes = {}
    for path in paths:
        shapes.setdefault(re.sub(r"\d+", "N", path), path)
    return sorted(shapes.values())


# ---------------------------------------------------------------------------------------
# the child: run cases against a tree, report JSON


def _timeout(_sig, _frame):
    raise TimeoutError("blocked")


def _case(root, rel, how, outside):
    """Replace ``rel`` by a FIFO or a link out of the tree, audit, put it back."""
    full = os.path.join(root, rel.lstrip("/"))
    aside = os.path.join(outside, "aside")
    os.rename(full, aside)
    marker = None
    try:
        if how == "fifo":
            os.mkfifo(full)
        else:
            target = os.path.join(outside, "target")
            marker = "OUTSIDE-TEXT-%d" % os.getpid()
            with open(target, "w") as handle:
                handle.write("%s\n" % marker)
            os.utime(target, (1, 1))  # atime 1970: a read sets it (relatime, atime < mtime)
            if how == "link-relative":
                target = "../" * (full.count("/") + 2) + target.lstrip("/")
            os.symlink(target, full)
        started = time.time()
        signal.alarm(CASE_SECONDS)
        try:
            result = _audit(root)
            blocked = False
        except TimeoutError:
            result, blocked = {}, True
        finally:
            signal.alarm(0)
        out = {"rel": rel, "how": how, "blocked": blocked,
               "seconds": round(time.time() - started, 2),
               "errors": [e["error"] for e in result.get("errors") or []]}
        if marker:
            out["leaked"] = marker in json.dumps(result, default=str)
            out["outside_read"] = os.stat(os.path.join(outside, "target")).st_atime > 1
        return out
    finally:
        os.unlink(full)
        os.rename(aside, full)


def child_cases(root, outside, cases):
    signal.signal(signal.SIGALRM, _timeout)
    return [_case(root, rel, how, outside) for rel, how in cases]


def child_audit(root):
    result = _audit(root)
    return {"errors": [e["error"] for e in result.get("errors") or []],
            "findings": [(f["id"], f["subject"]) for f in result["findings"]],
            "kernel_log": result.get("kernel_log")}


def _run_child(args, seconds, memory=None):
    """Run this file as a child with ``args``; ``(report, max RSS bytes)``; the child is
    killed after ``seconds`` (the case then fails naming it)."""
    def limit():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([LINKS, TESTS]))
    out_path = "%s.%s.json" % (args[1].rstrip("/"), args[0])
    with open(out_path, "w") as out:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + args,
                                stdout=out, stderr=subprocess.PIPE, env=env,
                                preexec_fn=limit)
        deadline = time.time() + seconds
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.time() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                pytest.fail("the audit did not finish in %d s: %s" % (seconds, args))
            time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode("utf-8", "replace")
    assert proc.returncode == 0, err[-3000:]
    with open(out_path) as handle:
        return json.load(handle), usage.ru_maxrss * 1024


# ---------------------------------------------------------------------------------------
# the trees


@pytest.fixture
def trees(tmp_path_factory):
    """The seed host as a capture holds it (stored nvidia-smi and kernel log) and with its
    kernel log in /var/log/kern.log instead; ``cases``: every file either audit reads.
    Built for each test: a child killed in a case leaves that case's FIFO or link behind."""
    from fixtures import hosts, nvhealth
    base = str(tmp_path_factory.mktemp("files-not-files"))
    stored = os.path.join(base, "stored")
    os.mkdir(stored)
    hosts.seed_health_host(stored)
    kernlog = os.path.join(base, "kernlog")
    os.mkdir(kernlog)
    built = hosts.seed_host(kernlog)
    nvhealth.seed_health(kernlog, built["gpus"], stored=False)
    paths = {stored: _read_paths(stored)}
    paths[kernlog] = [p for p in _read_paths(kernlog) if p not in paths[stored]]
    assert "/proc/cmdline" in paths[stored] and "/var/log/kern.log" in paths[kernlog]
    yield {"base": base, "paths": paths}
    shutil.rmtree(base)


def _outside(trees, name):
    folder = os.path.join(trees["base"], name)
    os.makedirs(folder, exist_ok=True)
    return folder


def _run_cases(trees, how):
    reports = []
    for root, paths in sorted(trees["paths"].items()):
        cases = [(rel, how) for rel in _representatives(paths)]
        report, _rss = _run_child(["cases", root, _outside(trees, "outside-" + how),
                                   json.dumps(cases)],
                                  seconds=CASE_SECONDS * 3 + 2 * len(cases))
        reports += [dict(r, root=root) for r in report]
    return reports


def test_every_file_the_audit_reads_as_a_fifo_blocks_nothing_and_is_named(trees):
    reports = _run_cases(trees, "fifo")
    assert len(reports) >= 60  # every kind of file of every reader (68 on the seed trees)
    blocked = [r["rel"] for r in reports if r["blocked"]]
    assert blocked == []
    unnamed = [r["rel"] for r in reports
               if not any(r["root"] + r["rel"] in e and "a FIFO, not a regular file" in e
                          for e in r["errors"])]
    assert unnamed == []
    assert max(r["seconds"] for r in reports) < CASE_SECONDS


@pytest.mark.parametrize("how", ["link", "link-relative"])
def test_every_file_the_audit_reads_as_a_link_out_of_the_root_stays_inside(trees, how):
    """``/<outside>/target`` (absolute) or ``../../..`` climbing above the root: resolved
    inside the root as in a chroot, so the outside file is neither read nor shown."""
    reports = _run_cases(trees, how)
    assert len(reports) >= 60
    assert [r["rel"] for r in reports if r["blocked"]] == []
    assert [r["rel"] for r in reports if r["outside_read"]] == []
    assert [r["rel"] for r in reports if r["leaked"]] == []


# ---------------------------------------------------------------------------------------
# memory: endless and huge kernel logs


def _kern_log_tree(tmp_path):
    """The seed host with its kernel log in /var/log/kern.log (no stored capture log)."""
    from fixtures import hosts, nvhealth
    root = str(tmp_path / "host")
    os.mkdir(root)
    built = hosts.seed_host(root)
    health = nvhealth.seed_health(root, built["gpus"], stored=False)
    return root, health


def _memory_audit(root):
    report, rss = _run_child(["audit", root], seconds=120, memory=MEMORY_LIMIT)
    assert rss < MEMORY_LIMIT, "the audit took %d MB" % (rss >> 20)
    print("max RSS %d MB" % (rss >> 20))
    assert not [e for e in report["errors"] if "MemoryError" in e]
    return report


@pytest.mark.parametrize("log,target", [
    ("/.gpuhost-capture/kernel-log.txt", "/dev/zero"),
    ("/.gpuhost-capture/kernel-log.txt", "relative"),
    ("/.gpuhost-capture/kernel-log.txt", "node"),
    ("/var/log/kern.log", "node"),
])
def test_kernel_log_linked_to_an_endless_device_stays_small(tmp_path, log, target):
    """The kernel log a capture stores, or kern.log, as a link to /dev/zero (absolute, or
    climbing out with ``..``) or as /dev/zero's own node in the tree."""
    from fixtures import nvhealth
    root, _health = _kern_log_tree(tmp_path)
    if log.startswith("/.gpuhost-capture/"):
        nvhealth.write_stored_log(root, [], time.time())
        os.unlink(os.path.join(root, "var/log/kern.log"))
    log = os.path.join(root, log.lstrip("/"))
    os.unlink(log)
    if target == "node":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(log, 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's node, in the tree
    elif target == "relative":
        os.symlink("../" * (root.count("/") + 4) + "dev/zero", log)
    else:
        os.symlink(target, log)
    report = _memory_audit(root)
    # resolved inside the root (<root>/dev/zero: absent) or refused as a device: no log
    assert report["kernel_log"]["available"] is False
    if target == "node":
        assert any(log + ": a character device, not a regular file" in e
                   for e in report["errors"])


def test_a_3_gb_single_line_kernel_log_stays_small_and_its_newest_xid_counts(tmp_path):
    """What an unclean shutdown leaves: gigabytes of NULs and no newline. The audit reads
    the log's newest 32 MiB (the budget of all its rotations) in chunks, names the cut,
    and still finds the XID after it."""
    from fixtures import nvhealth
    root, health = _kern_log_tree(tmp_path)
    log = os.path.join(root, "var/log/kern.log")
    with open(log, "wb") as handle:
        handle.truncate(3 << 30)
        handle.seek(3 << 30)
        handle.write(("\n%s\n" % nvhealth.xid_line(time.time() - 600, health["xid79"], 79))
                     .encode())
    report = _memory_audit(root)
    assert ["gpu_xid_events", health["xid79"]] in report["findings"]
    assert any("/var/log/kern.log: read only its last 32 MiB (its cap)" in e
               for e in report["errors"])


def test_a_bad_date_line_is_skipped_and_counted_and_the_other_xid_still_found(tmp_path):
    from fixtures import hosts, nvhealth
    root = str(tmp_path / "host")
    os.mkdir(root)
    built = hosts.seed_host(root)
    gpus = built["gpus"]
    good = nvhealth.xid_line(time.time() - 600, gpus[1], 79)
    bad = nvhealth.xid_line(time.time() - 700, gpus[0], 79)
    bad = "2026-13-45T99:00:00+00:00" + bad[bad.index(" "):]
    nvhealth.write_kern_log(root, [bad, good])
    report = child_audit(root)
    assert ["gpu_xid_events", gpus[1]] in [list(f) for f in report["findings"]]
    assert report["kernel_log"]["available"] is True
    assert [e for e in report["errors"] if "kernel-log line" in e] == [
        "1 kernel-log line skipped (a time stamp or address that cannot be read), the "
        "first: " + bad[:200]]


if __name__ == "__main__":
    if sys.argv[1] == "cases":
        json.dump(child_cases(sys.argv[2], sys.argv[3], json.loads(sys.argv[4])), sys.stdout)
    else:
        json.dump(child_audit(sys.argv[2]), sys.stdout)
