"""Module audit_timer and the scheduled host-side audit it installs (module_utils/audittimer)."""

import os
import shutil
import subprocess
import sys

import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import unitinstall
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import (
    audit_timer as audittimer,
)
from ansible_collections.gpuhost.tuning.plugins.modules import audit_timer

TEXTDIR = "/var/lib/prometheus/node-exporter"
TEXTFILE = TEXTDIR + "/gpuhost_audit.prom"


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    os.makedirs(root + TEXTDIR)
    return root


def args(root, **extra):
    out = {"root": root, "host": "gpu01", "textfile": TEXTFILE,
           "wanted": dict((k, v) for k, v in hosts.common_wanted().items() if k != "host")}
    out.update(extra)
    return out


def run_installed(root, tmp_path):
    """The service's command, against the tree: only the installed library importable (no
    site-packages: a host has no Ansible)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": root + audittimer.LIB_DIR,
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-S", "-B", "-m", audittimer.MODULE,
                           "--config", root + audittimer.CONFIG_PATH, "--root", root],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          check=False, timeout=120)


def test_installs_units_config_and_library_then_the_service_writes_the_metrics(
        seed, tmp_path, snapshot_tree):
    before = snapshot_tree(seed)
    planned = run_module(audit_timer, args(seed), check_mode=True)
    assert planned["changed"] is True and snapshot_tree(seed) == before
    first = run_module(audit_timer, args(seed, schedule="*-*-* 00/4:00:00"))
    assert first["changed"] is True and "failed" not in first, first.get("msg")
    with open(seed + audittimer.TIMER_PATH) as handle:
        timer = handle.read()
    assert "OnCalendar=*-*-* 00/4:00:00\n" in timer and "Persistent=true" in timer
    with open(seed + audittimer.SERVICE_PATH) as handle:
        assert "ExecStart=/usr/bin/python3 -m %s --config %s" % (
            audittimer.MODULE, audittimer.CONFIG_PATH) in handle.read()
    assert os.readlink(seed + audittimer.WANTS_LINK) == audittimer.TIMER_PATH
    assert [c["status"] for c in first["commands"]] == ["skipped", "skipped"]
    lib = seed + audittimer.LIB_DIR + "/" + unitinstall.PACKAGES[-1]
    shipped = sorted(os.path.relpath(os.path.join(folder, name), lib)
                     for folder, _dirs, names in os.walk(lib) for name in names)
    repo_utils = os.path.dirname(unitinstall.__file__)
    while os.path.basename(repo_utils) != "module_utils":
        repo_utils = os.path.dirname(repo_utils)
    for module in (audit, audit_program, hostfs, metrics):
        assert os.path.relpath(module.__file__, repo_utils) in shipped
    for name in shipped:
        if name.endswith(".py") and not name.endswith("__init__.py"):
            with open(os.path.join(lib, name), "rb") as a, \
                    open(os.path.join(repo_utils, name), "rb") as b:
                assert a.read() == b.read(), name  # byte for byte
    again = run_module(audit_timer, args(seed, schedule="*-*-* 00/4:00:00"))
    assert again["changed"] is False and again["commands"] == []

    # what the timer starts: the installed copy alone, against the tree
    proc = run_installed(seed, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("gpuhost-audit: worst critical")
    with open(seed + TEXTFILE) as handle:
        text = handle.read()
    assert 'gpuhost_findings{host="gpu01",severity="critical"} 1\n' in text
    assert 'gpuhost_check_status{host="gpu01",column="pcie_mrrs"} 4\n' in text
    assert len([x for x in text.splitlines() if x.startswith("gpuhost_finding{")]) > 30
    assert os.listdir(seed + TEXTDIR) == ["gpuhost_audit.prom"]

    gone = run_module(audit_timer, {"root": seed, "state": "absent"})
    assert gone["changed"] is True
    for path in (audittimer.TIMER_PATH, audittimer.SERVICE_PATH, audittimer.CONFIG_PATH,
                 audittimer.LIB_DIR, audittimer.WANTS_LINK):
        assert not os.path.lexists(seed + path), path
    assert run_module(audit_timer, {"root": seed, "state": "absent"})["changed"] is False


DOUBLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "doubles")


def test_the_installed_program_runs_the_live_host_s_commands_through_its_entry_point(
        seed, tmp_path):
    """On the live host the scheduled audit runs nvidia-smi and journalctl: the runner gets
    its process launcher from the program's own ``__main__`` (module code has none). The
    tree stands in for ``/`` (cmdout.is_live forced), the doubles for the tools."""
    from fixtures import nvhealth
    assert run_module(audit_timer, args(seed))["changed"] is True
    log = tmp_path / "calls.jsonl"
    journal = tmp_path / "journal.txt"
    journal.write_text("")
    env = {"PATH": DOUBLES + ":/usr/bin:/bin", "PYTHONPATH": seed + audittimer.LIB_DIR,
           "PYTHONDONTWRITEBYTECODE": "1", "GPUHOST_NVSMI_XML": nvhealth.B200_580,
           "GPUHOST_JOURNAL_TEXT": str(journal), "GPUHOST_DOUBLES_LOG": str(log)}
    entry = ("import runpy, sys; import "
             "ansible_collections.gpuhost.tuning.plugins.module_utils.platform.cmdout as cmdout; "
             "cmdout.is_live = lambda root: True; runpy.run_module(%r, run_name='__main__')"
             % audittimer.MODULE)
    proc = subprocess.run([sys.executable, "-S", "-B", "-c", entry, "--config",
                           seed + audittimer.CONFIG_PATH, "--root", seed],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    tools = [line.split('"')[3] for line in log.read_text().splitlines()]
    assert tools == ["nvidia-smi", "journalctl"]
    with open(seed + TEXTFILE) as handle:
        assert 'gpuhost_findings{host="gpu01"' in handle.read()


def test_service_names_a_missing_textfile_folder(seed, tmp_path):
    shutil.rmtree(seed + TEXTDIR)
    assert run_module(audit_timer, args(seed))["changed"] is True
    proc = run_installed(seed, tmp_path)
    assert proc.returncode == 2
    assert "textfile folder %s does not exist" % TEXTDIR in proc.stderr


def test_bad_input_fails_before_writing(seed, snapshot_tree):
    before = snapshot_tree(seed)
    result = run_module(audit_timer, args(seed, textfile=TEXTDIR + "/gpuhost.txt"))
    assert result["failed"] is True and "ending in .prom" in result["msg"]
    result = run_module(audit_timer, args(seed, schedule="hourly; rm -rf /"))
    assert result["failed"] is True and "OnCalendar" in result["msg"]
    result = run_module(audit_timer, {"root": seed, "host": "gpu01"})
    assert result["failed"] is True and "textfile" in result["msg"]
    assert snapshot_tree(seed) == before


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_units_pass_systemd_analyze_verify(tmp_path):
    service = tmp_path / audittimer.SERVICE_NAME
    timer = tmp_path / audittimer.TIMER_NAME
    service.write_text(audittimer.render_service(python=sys.executable))
    timer.write_text(audittimer.render_timer("hourly", 300))
    proc = subprocess.run(["systemd-analyze", "verify", str(service), str(timer)],
                          capture_output=True, text=True, check=False, timeout=60)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if "gpuhost-audit" in line]
    assert proc.returncode == 0 and problems == [], proc.stdout + proc.stderr
    bad = tmp_path / "bad" / audittimer.TIMER_NAME
    bad.parent.mkdir()
    bad.write_text(audittimer.render_timer("not-a-calendar-spec", 300))
    (tmp_path / "bad" / audittimer.SERVICE_NAME).write_text(service.read_text())
    proc = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode != 0 and "Failed to parse calendar" in proc.stderr  # can fail


@pytest.mark.parametrize("schedule,why", [
    ("*-*-* 25:00", "hour 25 is outside 0..23"),
    ("2026-13-01", "month 13 is outside 1..12"),
    ("Sat *-*-32", "day 32 is outside 1..31"),
    ("*:0/0", "minute step 0 is not positive"),
    ("Sun..Sat 1:00", "weekday range 'sun..sat' runs backwards"),
    ("0 * * * *", "'0' is no weekday, date"),
    ("every hour", "'every' is no weekday"),
    ("hourly\nExecStart=/bin/sh", "control character"),
    ("daily Nowhere/Atlantis", "time zone 'Nowhere/Atlantis' is not in"),
    ("1969-01-01", "year 1969 is before 1970"),
    ("", "it is empty"),
])
def test_a_calendar_systemd_cannot_parse_is_refused_before_writing(seed, snapshot_tree,
                                                                   schedule, why):
    before = snapshot_tree(seed)
    result = run_module(audit_timer, args(seed, schedule=schedule))
    assert result["failed"] is True, result
    assert "schedule %r: %s" % (schedule, why) in result["msg"] or (
        why in result["msg"] and "schedule %r" % schedule in result["msg"]), result["msg"]
    assert "the timer would never fire" in result["msg"] and "Mon..Fri 06:00" in result["msg"]
    assert snapshot_tree(seed) == before


def test_named_time_zones_are_looked_up_in_the_root(seed):
    assert audittimer.calendar_problem("daily Europe/Berlin", seed) is not None
    os.makedirs(seed + "/usr/share/zoneinfo/Europe")
    with open(seed + "/usr/share/zoneinfo/Europe/Berlin", "wb") as handle:
        handle.write(b"TZif2")
    assert audittimer.calendar_problem("daily Europe/Berlin", seed) is None
    assert audittimer.calendar_problem("daily UTC", seed) is None
