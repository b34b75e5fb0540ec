"""The audit program as a node check (audit_program --check): NHC's and Slurm
HealthCheckProgram's conventions, run as the host runs them - the library audit_timer ships,
no site-packages (no Ansible), and the two wrappers under extensions/nodecheck - on
temporary host trees."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import REPO
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_timer

WRAPPERS = os.path.join(REPO, "extensions", "nodecheck")
JSON = "/run/gpuhost-audit/last.json"


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """What audit_timer installs under /usr/local/lib/gpuhost-audit, in a folder."""
    folder = tmp_path_factory.mktemp("lib")
    for rel, data in audit_timer.library_files().items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return str(folder)


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed")
    hosts.seed_host(root)
    os.makedirs(str(root) + os.path.dirname(JSON))
    return str(root)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("tuned")
    hosts.tuned_host(root)
    return str(root)


def _env(lib, **extra):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": lib, "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(extra)
    return env


def check(lib, root, *args):
    return subprocess.run([sys.executable, "-S", "-B", "-m", audit_program.MODULE, "--root", root]
                          + list(args), env=_env(lib), capture_output=True, text=True,
                          check=False, timeout=120)


def test_a_finding_at_or_above_the_severity_exits_1_naming_the_worst_and_writes_the_json(
        lib, seed):
    started = time.monotonic()
    proc = check(lib, seed, "--check", "high", "--json", JSON)
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= audit_program.REASON_MAX
    assert lines[0].startswith("gpuhost-audit: critical dkms_missing_for_kernel ")
    assert "more at or above high" in lines[0]
    assert took < 30  # Slurm kills a HealthCheckProgram after 60 s (0.3 s measured)
    with open(seed + JSON) as handle:
        doc = json.load(handle)
    assert report.is_host_document(doc) and doc["findings"][0]["id"] == "dkms_missing_for_kernel"
    # without a config the host is named by its own host name; report_merge reads the file
    assert doc["host"] == os.uname()[1].split(".")[0]


def test_nothing_at_or_above_the_severity_exits_0(lib, tuned):
    proc = check(lib, tuned, "--check", "high")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("gpuhost-audit: ok: nothing at or above high")
    # the same host with a lower bar fails
    assert check(lib, tuned, "--check", "info").returncode == 1


def test_an_audit_that_cannot_run_exits_2_with_one_line(lib, seed, tmp_path):
    proc = check(lib, seed, "--check", "high", "--config", str(tmp_path / "none.json"))
    assert proc.returncode == 2
    assert proc.stdout.startswith("gpuhost-audit: ERROR: the audit could not run: cannot read ")
    assert len(proc.stdout.splitlines()) == 1
    proc = check(lib, seed, "--check", "high", "--json", "/nonexistent/dir/x.json")
    assert proc.returncode == 2 and "/nonexistent/dir" in proc.stdout
    assert not os.path.exists(seed + "/nonexistent")
    bad = check(lib, seed, "--check", "severe")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def _nhc(lib, root, severity, **extra):
    script = ('die() { echo "DIE $1 $2"; return 1; }; . %s/gpuhost.nhc; '
              'check_gpuhost_audit %s; echo "RC $?"' % (WRAPPERS, severity))
    env = _env("", GPUHOST_AUDIT_PYTHON=sys.executable, GPUHOST_AUDIT_LIB=lib,
               GPUHOST_AUDIT_ROOT=root)
    env.update(extra)
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          check=False, timeout=120).stdout


def test_nhc_check_function_dies_with_the_reason_or_passes(lib, seed, tuned):
    out = _nhc(lib, seed, "high")
    assert out.startswith("DIE 1 gpuhost-audit: critical dkms_missing_for_kernel ")
    assert out.rstrip().endswith("RC 1")
    assert _nhc(lib, tuned, "high").strip() == "RC 0"
    # the JSON folder is made under the root (the tuned tree had none)
    assert os.path.isfile(tuned + JSON)


def test_nhc_check_names_its_time_limit(lib, seed, tmp_path):
    slow = tmp_path / "python3"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    out = _nhc(lib, seed, "high", GPUHOST_AUDIT_PYTHON=str(slow), GPUHOST_AUDIT_TIMEOUT="1")
    assert "DIE 1 gpuhost-audit: did not finish in 1 s" in out


def _slurm(lib, root, tmp_path, **extra):
    log = tmp_path / "scontrol.log"
    stub = tmp_path / "scontrol"
    stub.write_text('#!/bin/sh\nprintf "%%s\\n" "$@" >> %s\n' % log)
    stub.chmod(0o755)
    env = _env("", GPUHOST_AUDIT_PYTHON=sys.executable, GPUHOST_AUDIT_LIB=lib,
               GPUHOST_AUDIT_ROOT=root, SCONTROL=str(stub), SLURMD_NODENAME="gpu01")
    env.update(extra)
    proc = subprocess.run([os.path.join(WRAPPERS, "gpuhost-healthcheck")], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    return proc, (log.read_text().splitlines() if log.exists() else [])


def test_slurm_health_check_drains_the_node_with_the_reason(lib, seed, tmp_path):
    proc, calls = _slurm(lib, seed, tmp_path)
    assert proc.returncode == 1
    assert calls[:3] == ["update", "NodeName=gpu01", "State=DRAIN"]
    assert calls[3].startswith("Reason=gpuhost-audit: critical dkms_missing_for_kernel ")
    assert proc.stdout.startswith("gpuhost-audit: critical")


def test_slurm_health_check_leaves_a_healthy_node_alone(lib, tuned, tmp_path):
    proc, calls = _slurm(lib, tuned, tmp_path, GPUHOST_AUDIT_SEVERITY="high")
    assert proc.returncode == 0 and calls == []


def test_check_line_leaves_out_acknowledged_findings():
    """The node check gates as role audit's gpuhost_audit_fail_on does (issue 36)."""
    acked = {"id": "dkms_missing_for_kernel", "severity": "critical", "subject": "6.8",
             "acknowledged": True}
    low = {"id": "x", "severity": "low", "subject": "y"}
    status, line = audit_program.check_line([acked, low], "high")
    assert status == audit_program.CHECK_OK
    assert line == "gpuhost-audit: ok: nothing at or above high (1 finding(s) below, " \
                   "1 acknowledged)"
    status, line = audit_program.check_line([dict(acked, acknowledged=False), low], "high")
    assert status == audit_program.CHECK_FOUND and "dkms_missing_for_kernel" in line


@pytest.mark.parametrize("text, says", [
    ('{"host": "h", "textfile": "/x/a.prom", "wanted": "a string"}', "wanted: expected a JSON"),
    ("[" * 100000 + "]" * 100000, "nested 100000 deep"),
    ('{"host": "h", "textfile": "/x/a.prom", "wanted": {"xid_policy": [{"xid": 13, '
     '"window_hours": NaN}]}}', "NaN"),
    ('{"host": "h", "textfile": "/x/a.prom", "wanted": {"acknowledged": [{"id": "nope"}]}}',
     "is no finding id"),
])
def test_a_malformed_config_is_a_config_error(tmp_path, text, says):
    path = tmp_path / "audit.json"
    path.write_text(text)
    with pytest.raises(audit_program.ConfigError, match=says):
        audit_program.load_config(str(path))
