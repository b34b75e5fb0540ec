"""The scheduled audit's host-side program for real, on each platform's own Python and
systemd: the audit playbook (gpuhost_audit_timer) installs gpuhost-audit.timer into a
systemd container of the suite's test image (Debian 12: Python 3.11, systemd 252; Debian 13:
Python 3.13, systemd 257) over the podman connection; then systemd itself starts
gpuhost-audit.service, whose ExecStart runs ``/usr/bin/python3 -m ...audittimer`` outside
Ansible from the copied module_utils, and the metrics file must come back from that run.
The node-check mode (``--check``) of the same program runs there too.

The boot-time program (bootapply) has its live test in test_tune_playbook.py."""

import json
import os
import re
import subprocess
import time

import platforms
import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_program
from conftest import install_collection

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("audit_timer_live")]
# drives a container of the suite's image from here (tests/platforms.py)
DRIVES_IMAGE = True

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")
PYTHONS = {"bookworm": "3.11", "trixie": "3.13"}
TEXTDIR = "/var/lib/prometheus/node-exporter"
PROM = TEXTDIR + "/gpuhost_audit.prom"
# the program the timer runs (what the unit's ExecStart names)
MODULE = audit_program.MODULE
COLLECTIONS = {"path": os.path.join(REPO, "collections")}


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS["path"]
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["CONTAINERS_CONF"] = platforms.CONTAINERS_CONF
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


@pytest.fixture(scope="module", autouse=True)
def collection(tmp_path_factory):
    # a private copy: another test module's `collection install --force` must not pull
    # files from under this module's playbook
    install_collection(_env())
    private = str(tmp_path_factory.mktemp("collections"))
    subprocess.run([os.path.join(REPO, ".venv/bin/ansible-galaxy"), "collection", "install",
                    "--force", "-p", private, REPO], check=True, env=_env(),
                   capture_output=True, timeout=300)
    COLLECTIONS["path"] = private


def sh(name, command, timeout=120):
    proc = platforms.podman("exec", name, "sh", "-c", command, timeout=timeout)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


@pytest.fixture
def host(suite):
    # under make test (GPUHOST_TEST_STRICT) a missing image is a failure, never a skip
    platforms.require_image(suite)
    name = "gpuhost-audittimer-%s-%d" % (suite, os.getpid())
    platforms.podman("rm", "-f", name)
    platforms.podman("run", "-d", "--name", name, "--hostname", name, "--systemd=always",
                     "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
                     platforms.image(suite), "/sbin/init", check=True)
    try:
        for _attempt in range(60):
            state = sh(name, "systemctl is-system-running --wait")[1]
            if state in ("running", "degraded"):
                break
            time.sleep(1)
        else:
            raise AssertionError("systemd did not come up in %s: %s" % (name, state))
        yield name
    finally:
        platforms.podman("rm", "-f", name)


def audit(name, reports, *args):
    cmd = [PLAYBOOK, "gpuhost.tuning.audit", "-c", "containers.podman.podman",
           "-i", "%s," % name, "-e", "ansible_python_interpreter=/usr/bin/python3",
           "-e", "gpuhost_report_dir=%s" % reports, "-e", "gpuhost_audit_write_reports=false",
           "-e", "gpuhost_audit_textfile_dir=%s" % TEXTDIR, "-e", "gpuhost_audit_timer=true",
           "-e", "gpuhost_audit_fail_on=none"] + list(args)
    return subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=900, check=False)


def test_scheduled_audit_program_runs_under_systemd_on_the_hosts_python(suite, host, tmp_path):
    name = host
    # the program runs on the host's own /usr/bin/python3, the one its unit names
    assert sh(name, "/usr/bin/python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'"
              ) == (0, PYTHONS[suite])
    assert sh(name, "mkdir -p %s" % TEXTDIR)[0] == 0
    proc = audit(name, str(tmp_path / "reports"))
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    # audit_timer enabled and started the timer through the container's systemctl
    assert sh(name, "systemctl is-enabled gpuhost-audit.timer") == (0, "enabled")
    assert sh(name, "systemctl is-active gpuhost-audit.timer") == (0, "active")
    unit = sh(name, "systemctl cat gpuhost-audit.service")[1]
    assert "ExecStart=/usr/bin/python3 -m %s --config /etc/gpuhost-audit/audit.json" % MODULE \
        in unit
    config = json.loads(sh(name, "cat /etc/gpuhost-audit/audit.json")[1])
    assert config["textfile"] == PROM

    # the playbook wrote the file; take it away so only the program can bring it back
    assert sh(name, "rm %s" % PROM)[0] == 0
    # what the timer fires: systemd runs the oneshot unit (start waits for it to end)
    rc, out = sh(name, "systemctl start gpuhost-audit.service", timeout=300)
    journal = sh(name, "journalctl -u gpuhost-audit.service -o cat --no-pager")[1]
    assert rc == 0, out + "\n" + journal
    assert sh(name, "systemctl show -p Result --value gpuhost-audit.service") == (0, "success")
    # the program's own line: "gpuhost-audit: <headline>; <metrics file>"
    assert re.search(r"^gpuhost-audit: .*; %s$" % re.escape(PROM), journal, re.M), journal
    assert "Traceback" not in journal and "Warning" not in journal, journal
    rc, prom = sh(name, "cat %s" % PROM)
    assert rc == 0, prom
    assert 'gpuhost_findings{host="%s",severity="critical"} ' % name in prom, prom[:2000]
    assert sh(name, "stat -c %%a %s" % PROM) == (0, "644")
    assert sh(name, "ls -A %s" % TEXTDIR) == (0, "gpuhost_audit.prom")  # no temp file left
    # PYTHONDONTWRITEBYTECODE: the copied module_utils stay as audit_timer wrote them
    assert sh(name, "find /usr/local/lib/gpuhost-audit -name __pycache__") == (0, "")

    # the node-check mode of the same program (NHC, Slurm HealthCheckProgram) on that Python:
    # exit 0 or 1 with one line, never 2 (the audit could not run)
    rc, line = sh(name, "PYTHONPATH=/usr/local/lib/gpuhost-audit PYTHONDONTWRITEBYTECODE=1 "
                        "/usr/bin/python3 -m %s --check critical" % MODULE)
    assert rc in (0, 1) and len(line.splitlines()) == 1 and line.startswith("gpuhost-audit"), \
        (rc, line)

    # a second playbook run changes nothing (the metrics file is a reading, not a change)
    again = audit(name, str(tmp_path / "reports"))
    assert again.returncode == 0, again.stdout[-5000:]
    recap = again.stdout.split("PLAY RECAP")[-1]
    assert re.search(r"changed=0\b", recap), recap
