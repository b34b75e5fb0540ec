"""Every inventory host is in every report: the audit playbook run for real over three hosts,
one audited (the seed tree, local connection), one unreachable (ssh to a closed port on
127.0.0.1) and one whose audit fails (a root that does not exist). Each appears in
<host>.json (status, error, last_seen, groups), summary.md, gpuhost.prom (gpuhost_host_up,
promtool-valid) and the console; the run exits 2. A second run with the audited host
unreachable too keeps its last good audit's time. Then the scheduled audit's options
(checked before the audit; its own metrics folder made). About 40 s in all on a loaded
2-core machine (7 playbook runs), no test over 20 s."""

import json
import os
import shutil
import socket
import subprocess

import pytest
from conftest import install_collection
from fixtures import hosts

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("unreachable")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv/bin/python")
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


def _closed_port():
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _inventory(path, seed_root, missing_root, port, good_reachable=True):
    dead = ("ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=%d ansible_timeout=3 "
            "ansible_user=nobody" % port)
    good = "ansible_connection=local" if good_reachable else dead
    lines = ["[gpuhosts]",
             "good gpuhost_root=%s %s" % (seed_root, good),
             "dead %s" % dead,
             "bad gpuhost_root=%s ansible_connection=local" % missing_root,
             "", "[rack1]", "good", "dead",
             "", "[all:vars]", "ansible_python_interpreter=%s" % VENV_PY]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def _run(inventory, reports, *extra):
    cmd = [PLAYBOOK, "-i", inventory, "gpuhost.tuning.audit",
           "-e", "gpuhost_audit_report_dir=%s" % reports] + list(extra)
    return subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          check=False, timeout=300)


def _promtool_ok(text):
    path = shutil.which("promtool")
    if path is None:   # Debian package prometheus; the audit playbook tests install it
        return True
    proc = subprocess.run([path, "check", "metrics"], input=text, capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return True


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client: the unreachable host is an ssh connection to a closed port")
    install_collection(_env())
    base = tmp_path_factory.mktemp("unreachable")
    seed = base / "seed"
    seed.mkdir()
    hosts.seed_host(seed)
    port = _closed_port()
    reports = base / "reports"
    inventory = _inventory(str(base / "inventory.ini"), seed, base / "missing", port)
    first = _run(inventory, reports, "-e", "gpuhost_audit_console=summary")
    docs = dict((name, json.loads((reports / ("%s.json" % name)).read_text()))
                for name in ("good", "dead", "bad"))
    again = _inventory(str(base / "again.ini"), seed, base / "missing", port,
                       good_reachable=False)
    second = _run(again, reports)
    return {"first": first, "docs": docs, "second": second, "reports": reports}


def test_every_host_is_in_every_report(played):
    proc = played["first"]
    # the audited host's reports are written; the run still fails (exit 2: failed hosts)
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-2000:]
    docs = played["docs"]
    assert docs["good"]["status"] == "ok" and docs["good"]["error"] == ""
    assert docs["good"]["last_seen"] == docs["good"]["collected_at"]
    assert docs["good"]["groups"] == ["gpuhosts", "rack1"] and docs["good"]["findings"]
    assert docs["dead"]["status"] == "unreachable"
    assert "Connection refused" in docs["dead"]["error"] and docs["dead"]["last_seen"] is None
    assert docs["dead"]["findings"] == [] and docs["dead"]["groups"] == ["gpuhosts", "rack1"]
    assert docs["bad"]["status"] == "failed" and "does not exist" in docs["bad"]["error"]


def test_console_summary_names_the_hosts_not_audited(played):
    out = played["first"].stdout
    assert "3 host(s): 1 audited, 2 not audited" in out
    assert "good: worst critical" in out
    assert "dead: unreachable:" in out and "bad: failed: host_audit: root:" in out
    # the summary mode prints no finding lines
    assert "pcie_mrrs x16" not in out
    assert "dead was not audited (unreachable:" in out
    assert "bad was not audited (failed: host_audit: root:" in out


def test_second_run_keeps_the_last_good_audit(played):
    proc = played["second"]
    assert proc.returncode == 2, proc.stdout[-4000:]
    reports = played["reports"]
    good = json.loads((reports / "good.json").read_text())
    assert good["status"] == "unreachable"
    assert good["last_seen"] == played["docs"]["good"]["collected_at"]
    summary = (reports / "summary.md").read_text()
    assert "## Hosts not audited" in summary
    for row in ("| good | unreachable | %s |" % good["last_seen"], "| dead | unreachable | never |",
                "| bad | failed | never |"):
        assert row in summary
    # the full console (the default) names each host not audited
    assert "good: NOT AUDITED, unreachable:" in proc.stdout
    prom = (reports / "gpuhost.prom").read_text()
    for name in ("good", "dead", "bad"):
        assert 'gpuhost_host_up{host="%s"} 0' % name in prom
    assert 'gpuhost_last_good_audit_age_seconds{host="good"}' in prom
    assert 'gpuhost_last_good_audit_age_seconds{host="dead"}' not in prom
    assert _promtool_ok(prom)
    # index.html holds every host (how it shows them is the page's)
    page = (reports / "index.html").read_text()
    assert all(name in page for name in ("good", "dead", "bad"))
    assert "Connection refused" in (reports / "dead.html").read_text()


# --- the scheduled audit's options, checked before the audit; its folder made


def _local(path, root):
    with open(path, "w") as handle:
        handle.write("[gpuhosts]\ngood gpuhost_root=%s ansible_connection=local "
                     "ansible_python_interpreter=%s\n" % (root, VENV_PY))
    return path


def test_timer_options_are_checked_before_the_audit(tmp_path):
    install_collection(_env())
    root = tmp_path / "seed"
    root.mkdir()
    hosts.seed_host(root)
    reports = tmp_path / "reports"
    proc = _run(_local(str(tmp_path / "inv.ini"), root), reports,
                "-e", "gpuhost_audit_timer=true", "-e", "gpuhost_audit_textfile_name=audit.txt",
                "-e", "gpuhost_audit_textfile_dir=var/lib/node")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "good: gpuhost_audit_textfile_name audit.txt must be a file name ending in .prom" \
        in proc.stdout
    assert "gpuhost_audit_textfile_dir var/lib/node is not an absolute path" in proc.stdout
    # nothing audited, nothing written
    assert "TASK [gpuhost.tuning.audit : Audit the host read-only" not in proc.stdout
    assert not reports.exists()


def _seed_inventory(tmp_path):
    install_collection(_env())
    root = tmp_path / "seed"
    root.mkdir()
    hosts.seed_host(root)
    return root, _local(str(tmp_path / "inv.ini"), root)


def test_timer_in_check_mode_makes_no_folder(tmp_path):
    root, inventory = _seed_inventory(tmp_path)
    check = _run(inventory, tmp_path / "reports", "-e", "gpuhost_audit_timer=true", "--check")
    assert check.returncode == 0, check.stdout[-3000:]
    assert not (root / "var/lib/gpuhost-audit").exists()


def test_timer_without_a_textfile_folder_makes_its_own(tmp_path):
    root, inventory = _seed_inventory(tmp_path)
    metrics = root / "var/lib/gpuhost-audit/gpuhost_audit.prom"
    first = _run(inventory, tmp_path / "reports", "-e", "gpuhost_audit_timer=true")
    assert first.returncode == 0, first.stdout[-3000:]
    assert 'gpuhost_host_up{host="good"} 1' in metrics.read_text()
    config = json.loads((root / "etc/gpuhost-audit/audit.json").read_text())
    assert "/var/lib/gpuhost-audit/gpuhost_audit.prom" in json.dumps(config)
    second = _run(inventory, tmp_path / "reports", "-e", "gpuhost_audit_timer=true")
    assert second.returncode == 0 and "changed=0" in second.stdout.split("PLAY RECAP")[-1]
