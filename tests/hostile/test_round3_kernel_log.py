"""Issue 36, the kernel-log and node-check part, as a hostile operator, tenant and broken host
would have it: the node check honouring the operator's acknowledgements and policy, a
process's crash that is no kernel oops, numbers of thousands of digits and lines built to
make each pattern slow in the kernel log and in nvidia-smi's NVLink text, malformed
node-check configs, a ``--json`` folder linked out of the root, NaN in the policy, a CUDA
result that saw none of the tree's GPUs, and the done-when: the audit of a tree whose
kernel log is 1 GiB of the worst lines stays under 60 s and 200 MB, its real XID 79
still found."""

import gzip
import json
import os
import resource
import subprocess
import sys
import time

import pytest
from fixtures import cudaprobe, hosts, kernmsg, nvhealth

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import host_health
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import kernel_log
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import nvlink

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKS = os.path.join(TESTS, "output", "pathlink")  # tests/conftest.py's importable link
TEXTFILE = "/var/lib/prometheus/node-exporter/gpuhost_audit.prom"
JSON = "/run/gpuhost-audit/last.json"
NOW = time.time()
# The done-when's limits: Slurm kills a HealthCheckProgram after 60 s; 200 MB of memory.
SECONDS = 60
MEMORY = 200 << 20


def _health_tree(tmp_path, kern_lines=None):
    """The seed host with its GPU health inputs (8 GPUs in nvidia-smi, XID 79 on one); its
    kern.log replaced by ``kern_lines`` when given. ``(root, health)``."""
    root = str(tmp_path / "host")
    os.makedirs(root)
    built = hosts.seed_host(root)
    health = nvhealth.seed_health(root, built["gpus"], stored=False)
    if kern_lines is not None:
        nvhealth.write_kern_log(root, kern_lines, mtime=NOW - 60, noise=False)
    os.makedirs(root + os.path.dirname(JSON))
    os.makedirs(root + os.path.dirname(TEXTFILE))
    return root, health


def _config(tmp_path, wanted, name="audit.json"):
    path = str(tmp_path / name)
    with open(path, "w") as handle:
        handle.write(json.dumps({"host": "gpu01", "textfile": TEXTFILE, "wanted": wanted})
                     if not isinstance(wanted, str) or not wanted.startswith("RAW:")
                     else wanted[4:])
    return path


def _node_check(capsys, root, config, *extra):
    status = audit_program.main(["--root", root, "--config", config, "--check", "high"]
                                + list(extra))
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1, out
    return status, out.strip()


def _all_but(*ids):
    """``acknowledged`` naming every finding id of the audit but ``ids``."""
    return [{"id": fid} for fid in audit.FINDING_ORDER if fid not in ids]


def _line(message, when=None):
    return kernmsg.line(NOW - 120 if when is None else when, message)


# ---- item 2: the node check honours the operator's acknowledgements and policy ---------


def test_node_check_leaves_out_what_the_operator_acknowledged(tmp_path, capsys):
    root, _health = _health_tree(tmp_path)
    found = audit.audit(root)["findings"]
    gating = [f for f in found if audit.severity_at_least(f["severity"], "high")]
    assert gating and gating[0]["id"] == "dkms_missing_for_kernel"
    acked = [{"id": f["id"], "subject": f["subject"]} for f in gating]
    status, line = _node_check(capsys, root, _config(tmp_path, {"acknowledged": acked}))
    assert status == audit_program.CHECK_OK, line
    assert "%d acknowledged" % len(acked) in line
    # one left unacknowledged: named, exit 1
    status, line = _node_check(capsys, root, _config(tmp_path, {"acknowledged": acked[1:]}))
    assert status == audit_program.CHECK_FOUND
    assert line.startswith("gpuhost-audit: %s %s " % (gating[0]["severity"], gating[0]["id"]))


def test_node_check_judges_xids_with_the_operators_xid_policy(tmp_path, capsys):
    """The same policy as the role's audit: fewer than 5 XID 79 events are no finding (the
    seed logged 4), every other finding acknowledged."""
    root, _health = _health_tree(tmp_path)
    wanted = {"acknowledged": _all_but("gpu_xid_events")}
    status, line = _node_check(capsys, root, _config(tmp_path, wanted))
    assert status == audit_program.CHECK_FOUND and " gpu_xid_events " in line, line
    wanted["xid_policy"] = [{"xid": 79, "min_count": 5}]
    status, line = _node_check(capsys, root, _config(tmp_path, wanted))
    assert status == audit_program.CHECK_OK, line


def test_gating_is_the_one_rule_of_both_gates():
    marked = policy.mark_acknowledged(
        [{"id": "a", "subject": "x"}, {"id": "a", "subject": "y"}, {"id": "b", "subject": "x"}],
        [{"id": "a", "subject": "x"}, {"id": "b"}])
    assert policy.gating(marked) == [{"id": "a", "subject": "y"}]


# ---- low: a malformed config is exit 2 with a clear message, never a traceback ---------


@pytest.mark.parametrize("wanted, says", [
    ("a string", "wanted: expected a JSON object"),
    ("RAW:" + "[" * 100000 + "]" * 100000, "nested 100000 deep"),
    ("RAW:{\"host\": \"gpu01\", \"textfile\": \"%s\", \"wanted\": {\"xid_policy\": "
     "[{\"xid\": 13, \"window_hours\": NaN}]}}" % TEXTFILE, "NaN is not a number"),
    ({"xid_policy": [{"xid": 13, "window_hours": 1e400}]}, "Infinity is not a number"),
    ({"xid_policy": [{"xid": 13, "window_hours": 0}]}, "window_hours must be a number"),
    ({"acknowledged": [{"id": "no_such_finding"}]}, "is no finding id of the audit"),
    ({"acknowledged": "dkms_missing_for_kernel"}, "option 'acknowledged'"),
    ({"copy_rate_marks": [{"model": "H100", "host_gbs": "fast"}]}, "host_gbs must be"),
])
def test_a_malformed_config_exits_2_naming_it(tmp_path, capsys, wanted, says):
    root, _health = _health_tree(tmp_path)
    status, line = _node_check(capsys, root, _config(tmp_path, wanted))
    assert status == audit_program.CHECK_ERROR, line
    assert line.startswith("gpuhost-audit: ERROR: the audit could not run: ")
    assert says in line and "Traceback" not in line


def test_the_scheduled_run_refuses_a_malformed_config_too(tmp_path, capsys):
    root, _health = _health_tree(tmp_path)
    config = _config(tmp_path, {"xid_policy": [{"xid": 13, "window_hours": 0}]})
    assert audit_program.main(["--root", root, "--config", config]) == 2
    assert "window_hours must be a number" in capsys.readouterr().err
    assert not os.path.exists(root + TEXTFILE)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), True])
def test_policy_numbers_must_be_finite(value):
    with pytest.raises(ValueError, match="window_hours"):
        policy.check_xid_policy([{"xid": 13, "window_hours": value}])
    with pytest.raises(ValueError, match="host_gbs"):
        policy.check_copy_rate_marks([{"model": "H100", "host_gbs": value}])


def test_json_folder_linked_out_of_the_root_is_refused(tmp_path, capsys):
    root, _health = _health_tree(tmp_path)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    folder = root + os.path.dirname(JSON)
    os.rmdir(folder)
    os.symlink(str(decoy), folder)
    status, line = _node_check(capsys, root, _config(tmp_path, {}), "--json", JSON)
    assert status == audit_program.CHECK_ERROR, line
    assert "the folder of %s" % root in line
    assert os.listdir(str(decoy)) == []


def test_textfile_folder_linked_out_of_the_root_is_refused(tmp_path, capsys):
    root, _health = _health_tree(tmp_path)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    folder = root + os.path.dirname(TEXTFILE)
    os.rmdir(folder)
    os.symlink(str(decoy), folder)
    assert audit_program.main(["--root", root, "--config", _config(tmp_path, {})]) == 2
    assert os.listdir(str(decoy)) == []


# ---- item 3: a process's crash is no kernel oops; the kernel's own oopses still are -----


@pytest.mark.parametrize("message", [
    kernmsg.USER_GPF, kernmsg.USER_TRAP, kernmsg.USER_SEGFAULT,
    # a tenant naming its process like an oops header
    kernmsg.user_segfault("kernel BUG at "), kernmsg.user_segfault("Oops: 0002 [#1"),
    kernmsg.USER_GPF.replace("python3", "Oops: 0002 [#1]"),
    kernmsg.oom(task="kernel BUG at ")[1],
])
def test_a_process_fault_is_no_oops(message):
    assert host_health.classify(_line(message))[0] in (None, "oom")


@pytest.mark.parametrize("message", [
    kernmsg.OOPS, kernmsg.KERNEL_GPF_OLD, kernmsg.KERNEL_GPF, kernmsg.KERNEL_GPF_610,
    kernmsg.PAGE_FAULT, kernmsg.PANIC, "kernel BUG at mm/slub.c:4318!",
])
def test_the_kernels_own_oops_still_is(message):
    assert host_health.classify(_line(message))[0] == "oops"
    # in every log format the audit reads: dmesg -T and the kernel's uptime stamp
    assert host_health.classify("[Sun Feb 23 16:24:18 2025] " + message)[0] == "oops"
    assert host_health.classify(_line("[  812.345678] " + message))[0] == "oops"


def test_the_audit_of_a_crashing_program_finds_no_oops(tmp_path):
    root, _health = _health_tree(tmp_path, [_line(kernmsg.USER_GPF), _line(kernmsg.USER_TRAP),
                                            _line(kernmsg.user_segfault("kernel BUG at "))])
    ids = [f["id"] for f in audit.audit(root)["findings"]]
    assert "host_kernel_oops" not in ids
    root2, _health = _health_tree(tmp_path / "oops", [_line(kernmsg.KERNEL_GPF_610)])
    ids = [f["id"] for f in audit.audit(root2)["findings"]]
    assert "host_kernel_oops" in ids


# ---- item 11: a number of thousands of digits fails only its own line --------------------

HUGE = "9" * 5000


@pytest.mark.parametrize("bad", [
    "INFO: task python3:4242 blocked for more than %s seconds." % HUGE,
    "watchdog: BUG: soft lockup - CPU#%s stuck for 23s! [python3:4242]" % HUGE,
    "Out of memory: Killed process %s (python3) total-vm:1kB" % HUGE,
    "NVRM: Xid (PCI:0000:01:00): %s, pid=1, name=x, GPU error" % HUGE,
    "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): %s, Non-fatal, Link 32" % HUGE,
], ids=["hung_task", "soft_lockup", "oom_kill", "xid", "sxid"])
def test_a_huge_number_beside_a_real_xid_79(tmp_path, capsys, bad):
    """Every other finding acknowledged: the node check fails exactly when the real XID 79
    is read (it used to be lost with the whole section, and the check exited 0)."""
    root, health = _health_tree(tmp_path / "a")
    lines = [_line(bad), nvhealth.xid_line(NOW - 300, health["xid79"], 79), _line(bad)]
    nvhealth.write_kern_log(root, lines, mtime=NOW - 60, noise=False)
    with open(root + "/proc/stat", "a") as handle:
        handle.write("btime %s\n" % HUGE)
    status, line = _node_check(capsys, root, _config(
        tmp_path, {"acknowledged": _all_but("gpu_xid_events")}), "--json", JSON)
    assert status == audit_program.CHECK_FOUND and " gpu_xid_events %s" % health["xid79"] \
        in line, line
    with open(root + JSON) as handle:
        doc = json.load(handle)
    assert not [e for e in doc.get("errors") or [] if "4300" in str(e) or "digits" in str(e)]


def test_nvlink_a_huge_number_fails_only_its_line():
    status = "\n".join(["GPU %s: NVIDIA H200 (UUID: GPU-x)" % HUGE, "\t Link 0: 26.562 GB/s",
                        "GPU 1: NVIDIA H200 (UUID: GPU-1)", "\t Link %s: 26.562 GB/s" % HUGE,
                        "\t Link 1: 26.562 GB/s"])
    gpus = nvlink.parse_status(status)
    assert [(g["index"], g["uuid"], [ln["link"] for ln in g["links"]]) for g in gpus] == [
        (1, "GPU-1", [1])]
    errors = "\n".join(["GPU 1: NVIDIA H200 (UUID: GPU-1)", "\t Link 0: Replay Errors: %s" % HUGE,
                        "\t Link 0: CRC Errors: 3"])
    assert nvlink.parse_errors(errors) == [{"index": 1, "uuid": "GPU-1",
                                            "counters": {0: {"CRC Errors": 3}}}]


# ---- item 12: every pattern over host text is linear in the line --------------------------

_P = "2026-11-30T12:00:01.418223+00:00 pve kernel: "


def _fill(unit, size, head="", tail=""):
    return _P + head + (unit * (size // len(unit) + 1))[:size] + tail


# The worst line of each pattern: many places where it starts to match, none where it
# does (each took the old patterns from 0.1 to 2.7 s per 63 KB line, and grew with the
# square of the length; figures in changelogs/fragments/kernel-log-hostile-round3.yml).
WORST = {
    "nvme": ("nvme0: x ", "timeout ", ""),
    "hung_task": ("INFO: task a:1 ", "blocked for more than ", ""),
    "oom_context": ("oom-kill:constraint=X,", "", ""),
    "oom_kill": ("Out of memory: Killed process 1 (a", "", ""),
    "btrfs": ("BTRFS (device a) ", "read-only ", ""),
    "xfs": ("XFS (a): x ", "", "read-only"),
    "gpu_off_bus": ("NVRM: GPU 0000:01:00.0 ", "", "timeout"),
    "hardware_error": ("[Hardware Error]: CPU 1", "", ""),
    "xid": ("NVRM: Xid (PCI:0000:01:00): 79, ", "", ""),
    "sxid": ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 1, Non-fatal, ", "", ""),
    "xid154": ("recovery action changed from ", "NVRM: Xid (PCI:0000:01:00): 154, ", ""),
    "blanks": (" ", "", "timeout"),
    "user_fault": ("traps: a[1] x", "general protection ", ""),
    "iso_stamp": ("1", "", ""),
}


def _worst(name, size):
    unit, head, tail = WORST[name]
    if name == "iso_stamp":
        return "2026-11-30T12:00:01." + "1" * size + " pve kernel: Oops: x"
    return _fill(unit, size, head, tail)


def _timed(line):
    started = time.perf_counter()
    host_health.classify(line)
    kernel_log.parse_line(line)
    kernel_log.line_time(line)
    return time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(WORST))
def test_each_pattern_is_linear_in_the_line(monkeypatch, name):
    """With the line cut lifted (LINE_CHARS), the worst line of 63 KB and of 630 KB: a
    linear pattern takes well under a second for both (a quadratic one took 2.7 s for
    63 KB, so 270 s for 630 KB: the 63 KB line is timed first)."""
    monkeypatch.setattr(host_health, "LINE_CHARS", 1 << 30, raising=False)
    assert _timed(_worst(name, 63 << 10)) < 0.25
    assert _timed(_worst(name, 630 << 10)) < 1.0


@pytest.mark.parametrize("name", sorted(WORST))
def test_a_line_is_cut_before_any_pattern(name):
    """As the audit runs: a 64 KiB line is read as its first LINE_CHARS characters."""
    assert _timed(_worst(name, 64 << 10)) < 0.05  # 0.1 ms measured; room for a shared core


def test_nvlink_patterns_are_linear():
    for text in ("GPU 0: " + " " * (630 << 10) + "x",
                 "GPU 0: H200 (UUID: GPU-1)\n\t Link 0: " + "a:" * (315 << 10) + "1x",
                 "GPU 0: H200 (UUID: GPU-1)\n\t Link 0: " + " " * (630 << 10) + "x"):
        started = time.perf_counter()
        nvlink.parse_errors(text)
        nvlink.parse_status(text)
        assert time.perf_counter() - started < 1.0


# ---- the done-when: any kernel log, under 60 s and 200 MB --------------------------------


def _hostile_log(health):
    """The worst lines of each pattern (63 KB each, 16 of each kind), 8 MiB of empty
    lines (the most lines per byte), 4 MiB of short lines that pass the cheap filter and are
    kept, and real XID 79 lines among them, the newest at the end."""
    xid = nvhealth.xid_line(NOW - 300, health["xid79"], 79)
    parts = [b"\n" * (8 << 20)]
    short = (_line("nvme nvme0: I/O 1 QID 1 timeout, aborting") + "\n").encode()
    parts.append(short * ((4 << 20) // len(short)))
    for name in sorted(WORST):  # 1 MB of each: the old nvme pattern alone took 45 s of it
        parts.append(((_worst(name, 63 << 10) + "\n") * 16).encode())
    parts.append((_line("INFO: task a:1 blocked for more than %s seconds." % HUGE) + "\n"
                  ).encode())
    parts.insert(1, (xid + "\n").encode())
    parts.append((xid + "\n").encode())
    return b"".join(parts)


def _wait_child(root, config):
    """The node check as Slurm runs it, in a child under RLIMIT_AS MEMORY (the enforced
    limit: RSS never exceeds the address space), killed after SECONDS. ``(exit status,
    output, seconds, peak RSS bytes)``. The peak is the child's VmHWM, polled: Linux keeps
    ru_maxrss across execve, so rusage would report the forking pytest worker's own RSS
    (230 MB under xdist) instead of the audit's."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    env = dict(os.environ, PYTHONPATH=LINKS)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", audit_program.MODULE, "--root", root,
                             "--config", config, "--check", "high", "--json", JSON],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=limit)
    out = b""
    peak = 0
    while True:
        peak = max(peak, _hwm(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > SECONDS:
            proc.kill()
            os.wait4(proc.pid, 0)
            pytest.fail("the audit did not finish in %d s" % SECONDS)
        time.sleep(0.02)
    took = time.monotonic() - started
    out = proc.stdout.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out.decode("utf-8", "replace"), took, peak


def _hwm(pid):
    """The process's peak resident set (VmHWM) in bytes, 0 once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _assert_bounded(tmp_path, root, health, what):
    config = _config(tmp_path, {"acknowledged": _all_but("gpu_xid_events")})
    status, out, took, peak = _wait_child(root, config)
    print("%s: %.1f s, peak RSS %d MB" % (what, took, peak >> 20))
    # the worst lines of the XID patterns are XIDs too (of 0000:01:00.0): the line names
    # the worst finding, the report has the real XID 79
    assert status == audit_program.CHECK_FOUND and " gpu_xid_events " in out, out[-3000:]
    assert took < SECONDS and peak < MEMORY
    with open(root + JSON) as handle:
        doc = json.load(handle)
    assert [f for f in doc["findings"] if f["id"] == "gpu_xid_events"
            and f["subject"] == health["xid79"]]
    return took, peak


def test_a_1_gib_kern_log_of_the_worst_lines_stays_under_60_s_and_200_mb(tmp_path):
    root, health = _health_tree(tmp_path)
    log = os.path.join(root, "var/log/kern.log")
    body = _hostile_log(health)
    with open(log, "wb") as handle:  # sparse: a hole, then the hostile lines at its end
        handle.truncate((1 << 30) - len(body))
        handle.seek((1 << 30) - len(body))
        handle.write(body)
    os.utime(log, (NOW - 60, NOW - 60))
    assert os.path.getsize(log) == 1 << 30
    # older rotations: a gzip of 256 MiB of empty lines, and 40 more (only 32 are read)
    with gzip.open(log + ".1.gz", "wb", compresslevel=1) as handle:
        for _count in range(16):
            handle.write(b"\n" * (16 << 20))
    for number in range(2, 42):
        with open("%s.%d" % (log, number), "wb") as handle:
            handle.write(b"\n" * 1024)
    _assert_bounded(tmp_path, root, health, "1 GiB kern.log")


def test_a_stored_kernel_log_of_the_worst_lines_stays_under_60_s_and_200_mb(tmp_path):
    """A capture's stored kernel log (read whole, up to its 16 MiB cap) of the same lines."""
    root, health = _health_tree(tmp_path)
    body = _hostile_log(health).decode()
    nvhealth.write_stored_log(root, [body[:(15 << 20)] + "\n" + nvhealth.xid_line(
        NOW - 300, health["xid79"], 79)], NOW)
    _assert_bounded(tmp_path, root, health, "stored kernel log")


# ---- low: a CUDA result that saw none of the tree's GPUs -----------------------------------


def test_a_cuda_result_with_no_device_on_an_8_gpu_tree_is_a_finding(tmp_path):
    root, _health = _health_tree(tmp_path)
    blind = cudaprobe.probe_ok("0000:01:00.0")
    blind["devices"] = []
    result = audit.audit(root, cuda=[blind])
    found = [f for f in result["findings"] if f["id"] == "cuda_init_failed"]
    assert [(f["subject"], f["current"]) for f in found] == [
        ("host", "cuInit 0 but CUDA sees 0 of the 8 GPUs the driver lists")]
    # a container probed for its GPUs that sees none
    blind["vmid"] = 129
    found = [f for f in audit.audit(root, cuda=[blind])["findings"]
             if f["id"] == "cuda_init_failed"]
    assert [f["subject"] for f in found] == ["lxc 129"]
    # one that saw its GPU: nothing
    ok = cudaprobe.probe_ok("0000:01:00.0")
    assert not [f for f in audit.audit(root, cuda=[ok])["findings"]
                if f["id"] == "cuda_init_failed"]
