"""Hostile batch sizes and outputs: a batch size Ansible would read as "every host at once"
stops the run before any host is touched; what the collection writes (metrics, report
files, timers, container configs) stays valid and its own whatever names, previous files
and links it meets."""

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import audit_report, tune_report

# tests/conftest.py keeps the live checkout importable through LINKS (the hostile
# conftest.py shadows that module's name here)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINKS = os.path.join(REPO, "tests", "output", "pathlink")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
FLEET = ["gpu1", "gpu2", "gpu3", "gpu4"]


# ---------------------------------------------------------------------------------------
# batch sizes: checked when Ansible templates the play's keywords, before any batch runs


def _fleet(base):
    """Four inventory hosts whose interpreter only leaves a mark and fails: any module task
    that reached a host shows as ``<host>.touched`` (and never runs on this machine)."""
    inventory = {"all": {"hosts": {}, "vars": {"ansible_connection": "local"}}}
    for name in FLEET:
        marker = os.path.join(base, name + ".touched")
        python = os.path.join(base, name + "-python")
        with open(python, "w") as handle:
            handle.write("#!/bin/sh\ntouch '%s'\nexit 1\n" % marker)
        os.chmod(python, 0o755)
        inventory["all"]["hosts"][name] = {
            "ansible_python_interpreter": python,
            "gpuhost_root": os.path.join(base, name)}
    path = os.path.join(base, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


def _play(base, playbook, *extra):
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": LINKS,
                "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    argv = [PLAYBOOK, "-i", _fleet(base), playbook,
            "-e", "gpuhost_report_dir=%s" % os.path.join(base, "reports")]
    for item in extra:
        argv += ["-e", item]
    proc = subprocess.run(argv, cwd=base, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    return proc, re.sub(r"\s+", " ", proc.stdout + proc.stderr)


# one per class of bad value: zero, negative, empty list, a zero inside a list, a
# percentage over 100 or of 0, text, a dict, a bool, an empty string from -e
BAD_SERIAL = [
    ('{"gpuhost_serial": 0}', "gpuhost_serial: 0 is not a batch size"),
    ('{"gpuhost_serial": -2}', "gpuhost_serial: -2 is not"),
    ('{"gpuhost_serial": []}', "gpuhost_serial: [] is not"),
    ('{"gpuhost_serial": [0]}', "0 (position 1 of [0]) is not"),
    ('{"gpuhost_serial": [1, "25%", 0]}', "0 (position 3 of [1, '25%', 0]) is not"),
    ('{"gpuhost_serial": "150%"}', "'150%' is not"),
    ('{"gpuhost_serial": "0%"}', "'0%' is not"),
    ("gpuhost_serial=abc", "'abc' is not"),
    ("gpuhost_serial=", "'' is not"),
    ('{"gpuhost_serial": {"first": 1}}', "{'first': 1} is not"),
    ('{"gpuhost_serial": true}', "True is not"),
    ('{"gpuhost_max_fail_percentage": 150}',
     "gpuhost_max_fail_percentage: 150 is not a failure percentage"),
    ('{"gpuhost_max_fail_percentage": -1}', "-1 is not a failure percentage"),
    ("gpuhost_max_fail_percentage=abc", "'abc' is not a failure percentage"),
    ('{"gpuhost_max_fail_percentage": [0]}', "[0] is not a failure percentage"),
    ('{"gpuhost_max_fail_percentage": false}', "False is not a failure percentage"),
]


@pytest.mark.parametrize("extra,expect", BAD_SERIAL, ids=[b[0] for b in BAD_SERIAL])
def test_a_bad_batch_size_stops_reboot_verify_before_any_host(tmp_path, extra, expect):
    base = str(tmp_path)
    proc, out = _play(base, "gpuhost.tuning.reboot_verify", extra,
                      "gpuhost_reboot_verify_reboot=true")
    assert proc.returncode != 0, out[-3000:]
    assert expect in out, out[-3000:]
    forms = ("a positive integer" if "serial" in extra else "a number from 0 to 100")
    assert forms in out
    # no task started after the localhost check that the pattern matches hosts, no host
    # reached, no report written
    assert "TASK [" not in out.split("ok: [localhost]")[-1]
    assert not re.search(r"(ok|changed|fatal|skipping): \[gpu", out)
    assert [n for n in FLEET if os.path.exists(os.path.join(base, n + ".touched"))] == []
    assert not os.path.exists(os.path.join(base, "reports"))


def _keywords():
    with open(os.path.join(REPO, "playbooks", "reboot_verify.yml")) as handle:
        # the play that reboots (the first one only checks that the pattern matches hosts)
        play = [p for p in yaml.safe_load(handle) if "serial" in p][0]
    return play["serial"], play["max_fail_percentage"]


def _batches(base, *extra):
    """The batches (host lists, in order) a play with reboot_verify's own ``serial`` and
    ``max_fail_percentage`` keywords makes of the four hosts."""
    serial, max_fail = _keywords()
    path = os.path.join(base, "batches.yml")
    with open(path, "w") as handle:
        yaml.safe_dump([{"name": "batches", "hosts": "all", "gather_facts": False,
                         "serial": serial, "max_fail_percentage": max_fail,
                         "tasks": [{"name": "in this batch",
                                    "ansible.builtin.debug": {"msg": "here"}}]}], handle)
    proc, out = _play(base, path, *extra)
    assert proc.returncode == 0, out[-3000:]
    plays = (proc.stdout).split("PLAY [batches]")[1:]
    # within a batch the hosts report in the order their forks finish: sorted
    return [sorted(re.findall(r"^ok: \[(\w+)\]", chunk, re.M)) for chunk in plays]


def test_good_batch_sizes_batch_as_given(tmp_path):
    base = str(tmp_path)
    assert _batches(base) == [["gpu1"], ["gpu2"], ["gpu3"], ["gpu4"]]
    # digits from -e key=value arrive as text: still a batch size
    assert _batches(base, "gpuhost_serial=2") == [["gpu1", "gpu2"], ["gpu3", "gpu4"]]
    assert _batches(base, '{"gpuhost_serial": [1, "50%"]}',
                    "gpuhost_max_fail_percentage=25") == [["gpu1"], ["gpu2", "gpu3"], ["gpu4"]]
    assert _batches(base, "gpuhost_serial=100%") == [FLEET]


# ---------------------------------------------------------------------------------------
# gpuhost.prom: whatever a host name or finding subject holds, the file parses


def _promtool():
    path = shutil.which("promtool")
    if path is None:
        subprocess.run([os.path.join(REPO, "scripts", "apt-ensure.sh"), "prometheus"],
                       check=True, timeout=900)
        path = shutil.which("promtool")
    assert path, "promtool is not installed (Debian package prometheus)"
    return path


def _finding(subject):
    return {"id": "audit_error", "severity": "low", "subject": subject, "current": "x",
            "expected": "y", "remedy": "z"}


# every kind of character a text format or a line-splitting reader chokes on
ODD = ["\r", "\r\n", "\n", "\x00", "\t", "\x0b", "\x0c", "\x1b[31m", "\x7f", "\x85",
       "\u2028", "\u2029", "\udcff", "\\", '"', "\\n", "}", "{a=\"b\"}", " 1\nfake 2"]


def test_odd_host_names_and_subjects_leave_gpuhost_prom_valid(tmp_path):
    dest = str(tmp_path / "reports")
    audits = dict(("gpu%02d%s" % (n, odd), {
        "findings": [_finding("dev%s0" % odd)], "checks": {},
        "collected_at": "2026-12-01T03:47:48Z"}) for n, odd in enumerate(ODD))
    result = run_module(audit_report, {"audits": audits, "dest": dest})
    assert not result.get("failed"), result.get("msg")
    with open(os.path.join(dest, "gpuhost.prom"), "rb") as handle:
        data = handle.read()
    text = data.decode("utf-8")  # strict
    proc = subprocess.run([_promtool(), "check", "metrics"], input=data, capture_output=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # one sample per host and finding, whatever splits lines: no sample was forged or cut
    lines = text.splitlines()
    assert lines == text.split("\n")[:-1]
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert len([s for s in samples if s.startswith("gpuhost_finding{")]) == len(ODD)
    assert len([s for s in samples if s.startswith("gpuhost_audit_timestamp_seconds{")]) \
        == len(ODD)
    assert all(re.match(r'^gpuhost_\w+\{host="', s) for s in samples), samples
    assert not any(s.startswith("fake") for s in samples)


# ---------------------------------------------------------------------------------------
# report file names: two hosts never write one file


def test_host_names_that_map_to_one_file_keep_their_own_reports(tmp_path):
    dest = tmp_path / "reports"
    names = ["a/b", "a_b", "a\\b", "a\x00b", "a\rb", ".a_b", "..a_b"]
    audits = dict((name, {"findings": [_finding("dev-%d" % n)], "checks": {}})
                  for n, name in enumerate(names))
    result = run_module(audit_report, {"audits": audits, "dest": str(dest),
                                       "generated_at": "fixed"})
    assert not result.get("failed"), result.get("msg")
    docs = [json.loads((dest / f).read_text()) for f in os.listdir(str(dest))
            if f.endswith(".json")]
    assert sorted(d["host"] for d in docs) == sorted(names)
    for doc in docs:  # each host's file holds its own findings
        assert doc["findings"][0]["subject"] == "dev-%d" % names.index(doc["host"])
    assert "a_b.json" in os.listdir(str(dest))  # a safe name keeps its file name
    again = run_module(audit_report, {"audits": audits, "dest": str(dest),
                                      "generated_at": "fixed"})
    assert again["changed"] is False


@pytest.mark.parametrize("module,key", [(audit_report, "audits"), (tune_report, "results")])
def test_a_host_named_like_another_hosts_file_is_refused_naming_both(tmp_path, module, key):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
    dest = tmp_path / "reports"
    twin = report.safe_name("a/b")  # a (hostile) host named like that host's file
    value = {"findings": [], "checks": {}} if key == "audits" else {"rows": []}
    result = run_module(module, {key: {"a/b": value, twin: value}, "dest": str(dest)})
    assert result.get("failed"), result
    assert "hosts 'a/b' and '%s' would both write" % twin in result["msg"] or \
        "hosts '%s' and 'a/b' would both write" % twin in result["msg"], result["msg"]
    assert not dest.exists()


# ---------------------------------------------------------------------------------------
# a previous <host>.json that is not a report: ignored for the AER comparison, with a
# warning naming it; every host's report is still written


@pytest.fixture(scope="module")
def aer_fleet(tmp_path_factory):
    """Two hosts' audits, each a day apart: ``first`` and ``later`` (two more correctable
    errors on one GPU)."""
    from fixtures import health, hosts

    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
    wanted = hosts.common_wanted()
    out = {"first": {}, "later": {}}
    for name in ("pve-gpu03", "pve-gpu04"):
        root = tmp_path_factory.mktemp(name)
        health.health_host(str(root))
        out["first"][name] = dict(audit.audit(str(root), dict(wanted, host=name)),
                                  collected_at="2026-12-01T06:00:00Z")
        health.aer_files(str(root), "0000:83:00.0", correctable={"BadTLP": 5},
                         fatal={"CmpltTO": 1})
        out["later"][name] = dict(audit.audit(str(root), dict(wanted, host=name)),
                                  collected_at="2026-12-02T06:00:00Z")
    return out


def _bad_json(path):
    with open(path, "w") as handle:
        handle.write('{"host": "pve-gpu04", "facts": {')


def _not_utf8(path):
    with open(path, "wb") as handle:
        handle.write(b'{"host": "pve-gpu04\xff", "facts": {}}')


def _shape(doc):
    def write(path):
        with open(path, "w") as handle:
            json.dump(doc, handle)
    return write


def _fifo(path):
    os.mkfifo(path)


def _folder(path):
    os.mkdir(path)


def _warnings(result):
    """The warning texts of a module result (ansible-core 2.19 returns each as a summary
    mapping with the text under event.msg)."""
    out = []
    for item in result.get("warnings") or []:
        if isinstance(item, dict):
            item = (item.get("event") or item).get("msg")
        out.append(str(item))
    return out


MALFORMED = [
    (_bad_json, "is not a readable JSON report"),
    (_not_utf8, "is not a readable JSON report"),
    (_shape(["pve-gpu04"]), "is not a report document"),
    (_shape({"host": "pve-gpu04", "facts": "x"}), "is not a report document"),
    (_shape({"host": "pve-gpu04", "facts": {"pcie_aer": "lots"}}), "is malformed"),
    (_shape({"host": "pve-gpu04", "facts": {"pcie_aer": [1, 2]}}), "is malformed"),
    (_shape({"host": "pve-gpu04", "facts": {"pcie_aer": [{"available": True}]}}),
     "is malformed (KeyError"),
    (_shape({"host": "pve-gpu04", "facts": {"pcie_aer": [
        {"address": "0000:83:00.0", "available": True, "correctable": "many"}]}}),
     "is malformed"),
    (_fifo, "is not a regular file"),
    (_folder, "is not a regular file"),
]


@pytest.mark.parametrize("make,why", MALFORMED,
                         ids=[m[1] + str(n) for n, m in enumerate(MALFORMED)])
def test_a_malformed_previous_report_is_ignored_with_a_warning(tmp_path, aer_fleet, make, why):
    dest = tmp_path / "reports"
    args = {"dest": str(dest), "generated_at": "fixed"}
    first = run_module(audit_report, dict(args, audits=aer_fleet["first"]))
    assert not first.get("failed"), first.get("msg")
    path = str(dest / "pve-gpu04.json")
    os.remove(path)
    make(path)
    if os.path.isdir(path):
        expect_written = False
    else:
        expect_written = True
    result = run_module(audit_report, dict(args, audits=aer_fleet["later"]))
    if not expect_written:
        # a folder where the file belongs cannot be replaced: that is the write's failure
        # (naming the folder), never the audit's
        assert result.get("failed") and "cannot write reports in" in result["msg"], result
        assert "the audit of" not in result["msg"] and "Is a directory" in result["msg"]
        return
    assert not result.get("failed"), result.get("msg")
    warnings = [w for w in _warnings(result) if path in w]
    assert len(warnings) == 1 and why in warnings[0], _warnings(result)
    assert "ignored for the AER comparison" in warnings[0]
    # the host with the good previous report still gets its comparison
    good = json.loads((dest / "pve-gpu03.json").read_text())
    assert good["aer_change"]["devices"]["0000:83:00.0"] == "+2 correctable"
    # the malformed one is replaced by this run's report, without a comparison
    doc = json.loads((dest / "pve-gpu04.json").read_text())
    assert doc["host"] == "pve-gpu04" and "aer_change" not in doc
    assert doc["collected_at"] == "2026-12-02T06:00:00Z"


# ---------------------------------------------------------------------------------------
# the scheduled audit: an OnCalendar systemd cannot parse never reaches a timer

CALENDARS = [
    # accepted by both
    "hourly", "HOURLY", "daily UTC", "weekly", "quarterly", "semiannually", "annually",
    "@1700000000", "Mon..Fri 9:00", "mon-fri", "Mon,Wed *-*-1..7 4:00", "*-*-* 00/4:00:00",
    "*:0/15", "*-02~03", "*-*~1", "12-25", "99-01-01", "Fri 2026-*-* 1:0:0", "*:*:*",
    "*-*-* *:*:0/10.5", "*-*-* 00:00:00.5", "Mon *:00", "1,3,5:30", "0/2:00",
    "*-*-1/2 00:00", "2026-02-30",
    # refused by both
    "now", "today", "every hour", "0 * * * *", "*/15 * * * *", "hourly,daily", "weekly Mon",
    "Mond", "12-25 Mon", "2026-13-01", "25:00", "*-*-* 24:00", "*-*-* 00:60",
    "*-*-* 00:00:60", "Sat *-*-32", "*:0/0", "*-*-* 00:00:00/0", "Sun..Sat 23:59:59",
    "Fri-Mon 1:00", "1969-01-01", "*-*-* 6:00 Nowhere/Atlantis", "hourly\nExecStart=/bin/sh",
    "daily\r", "", "  ",
]


def _systemd_analyze():
    path = shutil.which("systemd-analyze")
    if path is None:
        subprocess.run([os.path.join(REPO, "scripts", "apt-ensure.sh"), "systemd"],
                       check=True, timeout=900)
        path = shutil.which("systemd-analyze")
    assert path, "systemd-analyze is not installed (Debian package systemd)"
    return path


def test_the_stdlib_calendar_check_never_accepts_what_systemd_refuses():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_timer
    tool = _systemd_analyze()
    verdicts = {}
    for expr in CALENDARS:
        proc = subprocess.run([tool, "calendar", "--", expr], capture_output=True,
                              check=False, timeout=30)
        verdicts[expr] = (audit_timer.calendar_problem(expr, "/") is None, proc.returncode == 0)
    false_accepts = [e for e, (mine, real) in verdicts.items() if mine and not real]
    assert false_accepts == []
    # and it is no stricter than systemd on any of these (the common forms)
    too_strict = [e for e, (mine, real) in verdicts.items() if real and not mine]
    assert too_strict == []
    assert len([e for e, (mine, real) in verdicts.items() if real]) == 26


def test_on_the_live_host_systemd_analyze_has_the_last_word(monkeypatch):
    """Where the stdlib check misses a form systemd refuses, the live host's own
    systemd-analyze (through the runner, read-only) still refuses it."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import runner
    from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_timer
    _systemd_analyze()
    run = runner.Runner(processes=subprocess)
    audit_timer.check_schedule("Mon..Fri 06:00", "/", run)
    assert [c[1:] for c in run.calls] == [["calendar", "--", "Mon..Fri 06:00"]]
    monkeypatch.setattr(audit_timer, "calendar_problem", lambda schedule, root="/": None)
    with pytest.raises(audit_timer.ConfigError) as err:
        audit_timer.check_schedule("Sun..Sat 1:00", "/", run)
    assert "schedule 'Sun..Sat 1:00': systemd-analyze calendar refuses it (" in str(err.value)
    assert "the timer would never fire" in str(err.value)
    # a tree is not the live host: its schedule is not sent to this machine's systemd
    tree = runner.Runner(processes=subprocess)
    audit_timer.check_schedule("Sun..Sat 1:00", "/nonexistent-tree", tree)
    assert tree.calls == []


# ---------------------------------------------------------------------------------------
# numa_pin's revert: never over a cpuset set after the tune

def _gpu_host(root):
    from fixtures import health, lxc
    health.gpu_host(root)
    lxc.write_config(root, 133, health.gpu_container_text(133, [7], cpuset="32-47", mems="1"))


def _conf_text(root, vmid):
    with open(os.path.join(root, "etc/pve/lxc/%d.conf" % vmid)) as handle:
        return handle.read()


def _operator_sets(root, vmid, old, new):
    from fixtures import lxc
    text = _conf_text(root, vmid)
    if old is None:  # a line added to the live section (before any [section])
        head, sep, tail = text.partition("\n[")
        lxc.write_config(root, vmid, head.rstrip("\n") + "\n" + new + (sep + tail if sep else ""))
        return
    assert old in text
    lxc.write_config(root, vmid, text.replace(old, new))


AFTER_TUNE = [
    # (container, what the tune left there, what the operator wrote after it)
    (132, "lxc.cgroup2.cpuset.cpus: 32-63,96-127\n", "lxc.cgroup2.cpuset.cpus: 40-47\n"),
    (132, "lxc.cgroup2.cpuset.mems: 1\n", "lxc.cgroup2.cpuset.mems: 0-1\n"),
    (129, None, "lxc.cgroup2.cpuset.cpus: 0-7\n"),        # pinned by hand, never tuned
    (133, "lxc.cgroup2.cpuset.cpus: 32-47\n", "lxc.cgroup2.cpuset.cpus: 32-39\n"),  # never tuned
]


@pytest.mark.parametrize("vmid,old,new", AFTER_TUNE, ids=["cpus", "mems", "added", "untuned"])
def test_the_numa_pin_revert_refuses_lines_changed_after_the_tune(tmp_path, vmid, old, new):
    from ansible_collections.gpuhost.tuning.plugins.modules import host_tune, tuning_snapshot
    root = str(tmp_path / "host")
    _gpu_host(root)
    tuned = run_module(host_tune, hosts.as_wanted({"root": root, "host": "gpu03",
                                                   "parts": ["snapshot", "numa_pin", "verify"]}))
    assert not tuned.get("failed"), tuned.get("msg")
    _operator_sets(root, vmid, old, new)
    theirs = _conf_text(root, vmid)
    for check_mode in (True, False):
        result = run_module(tuning_snapshot, {"root": root, "state": "restore"},
                            check_mode=check_mode)
        assert result["failed"] is True, result
        assert "lxc %d: not reverted: its cpuset lines" % vmid in result["msg"]
        assert "were changed after the tune" in result["msg"]
        assert _conf_text(root, vmid) == theirs
    rows = dict((r["vmid"], r) for r in result["placement"])
    assert rows[vmid]["status"] == "failed"
    assert [v for v, r in rows.items() if r["status"] == "failed"] == [vmid]
    # the revert is not done: applied.json stays, so the next revert checks again
    assert os.path.exists(os.path.join(root, "var/lib/gpuhost/applied.json"))


# ---------------------------------------------------------------------------------------
# a linked container config stays a link: every lxc config writer writes through it

# (link at etc/pve/lxc/<vmid>.conf or the folder, its target, where the file really is)
CONFIG_LINKS = [
    ("file", "../shared/%d.conf", "etc/pve/shared/%d.conf"),
    ("folder", "nodes/pve1/lxc", "etc/pve/nodes/pve1/lxc/%d.conf"),
]


def _link_config(root, vmid, kind, target, real):
    folder = os.path.join(root, "etc/pve/lxc")
    real = os.path.join(root, real % vmid)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    if kind == "file":
        os.rename(os.path.join(folder, "%d.conf" % vmid), real)
        os.symlink(target % vmid, os.path.join(folder, "%d.conf" % vmid))
        return os.path.join(folder, "%d.conf" % vmid), real
    os.rename(folder, os.path.dirname(real))
    os.symlink(target, folder)
    return folder, real


def _links(root):
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                out[os.path.relpath(path, root)] = os.readlink(path)
    return out


@pytest.mark.parametrize("kind,target,real", CONFIG_LINKS, ids=[k[0] for k in CONFIG_LINKS])
def test_lxc_cgroup_devices_writes_through_a_linked_config(tmp_path, kind, target, real):
    from fixtures import lxc

    from ansible_collections.gpuhost.tuning.plugins.modules import lxc_cgroup_devices
    root = str(tmp_path / "host")
    lxc.seed_host(root)
    _link, real = _link_config(root, 129, kind, target, real)
    links = _links(root)
    result = run_module(lxc_cgroup_devices, {"root": root, "vmid": 129})
    assert result["changed"] is True, result
    assert _links(root) == links                   # every link as it was
    with open(real) as handle:
        assert "lxc.cgroup2.devices.allow: c 509:* rwm" in handle.read()
    assert run_module(lxc_cgroup_devices, {"root": root, "vmid": 129})["changed"] is False


@pytest.mark.parametrize("kind,target,real", CONFIG_LINKS, ids=[k[0] for k in CONFIG_LINKS])
def test_numa_pin_and_its_revert_write_through_a_linked_config(tmp_path, kind, target, real):
    from ansible_collections.gpuhost.tuning.plugins.modules import host_tune, tuning_snapshot
    root = str(tmp_path / "host")
    _gpu_host(root)
    _link, real = _link_config(root, 132, kind, target, real)
    links = _links(root)
    with open(real, "rb") as handle:
        original = handle.read()
    tuned = run_module(host_tune, hosts.as_wanted({"root": root, "host": "gpu03",
                                                   "parts": ["snapshot", "numa_pin", "verify"]}))
    assert not tuned.get("failed"), tuned.get("msg")
    assert _links(root) == links
    with open(real, "rb") as handle:
        assert b"lxc.cgroup2.cpuset.mems: 1" in handle.read()
    restored = run_module(tuning_snapshot, {"root": root, "state": "restore"})
    assert not restored.get("failed"), restored.get("msg")
    assert _links(root) == links
    with open(real, "rb") as handle:
        assert handle.read() == original


def test_a_config_linked_out_of_the_root_is_refused_and_nothing_outside_changes(tmp_path):
    from fixtures import lxc

    from ansible_collections.gpuhost.tuning.plugins.modules import lxc_cgroup_devices
    root = str(tmp_path / "host")
    lxc.seed_host(root)
    conf = os.path.join(root, "etc/pve/lxc/129.conf")
    outside = str(tmp_path / "outside.conf")
    os.rename(conf, outside)
    # ../ beyond the root stops at the root: inside the tree this names /outside.conf,
    # which the tree does not hold; the kernel would follow it to the file outside
    os.symlink("../../../../outside.conf", conf)
    with open(outside, "rb") as handle:
        before = handle.read()
    result = run_module(lxc_cgroup_devices, {"root": root, "vmid": 129})
    assert result.get("failed"), result
    # the reader resolves the link inside the root too (hostfs), where it names a file the
    # tree does not hold: the container has no config here, and nothing is written
    assert "no config for container 129 at %s/etc/pve/lxc/129.conf" % root in result["msg"]
    with open(outside, "rb") as handle:
        assert handle.read() == before
    assert os.readlink(conf) == "../../../../outside.conf"
