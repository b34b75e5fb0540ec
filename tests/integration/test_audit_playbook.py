"""The audit and capture playbooks run for real (ansible-playbook, local connection) over
three host trees: the seed host, the tuned host and an H200 VM; the HTML report opened in
headless Chromium."""

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import install_collection, tree_snapshot
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit.facts import WANTED_KEYS

# One pytest-xdist worker runs this whole file (--dist loadgroup):
# its tests share the module's fleet and first run.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("audit_playbook")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv/bin/python")
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")
OUTPUT = os.path.join(REPO, "tests/output")
NAMES = ("seed", "tuned", "vm")
BUILDERS = {"seed": hosts.seed_health_host, "tuned": hosts.tuned_host, "vm": hosts.vm_host}


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


def _inventory(path, roots):
    lines = ["[gpuhosts]"]
    for name, root in roots.items():
        lines.append("%s gpuhost_root=%s" % (name, root))
    lines += ["", "[all:vars]", "ansible_connection=local",
              "ansible_python_interpreter=%s" % VENV_PY]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def run_playbook(name, inventory, *args, cwd=None):
    cmd = [PLAYBOOK, "-i", inventory, "gpuhost.tuning.%s" % name] + list(args)
    proc = subprocess.run(cmd, cwd=cwd or REPO, env=_env(), capture_output=True, text=True,
                          check=False, timeout=600)
    return proc


def recap(output):
    """``{host: {ok, changed, failed, ...}}`` from the PLAY RECAP."""
    out = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
        if match:
            out[match.group(1)] = dict((k, int(v)) for k, v in
                                       re.findall(r"(\w+)=(\d+)", match.group(2)))
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    install_collection(_env())
    base = tmp_path_factory.mktemp("fleet")
    roots = {}
    for name in NAMES:
        root = base / name
        root.mkdir()
        BUILDERS[name](root)
        roots[name] = str(root)
    inventory = _inventory(str(base / "inventory.ini"), roots)
    return {"base": base, "roots": roots, "inventory": inventory}


@pytest.fixture(scope="module")
def first_run(fleet):
    before = dict((n, tree_snapshot(r)) for n, r in fleet["roots"].items())
    reports = fleet["base"] / "reports"
    proc = run_playbook("audit", fleet["inventory"], "-e",
                        "gpuhost_audit_report_dir=%s" % reports)
    return {"proc": proc, "reports": reports, "before": before}


def test_audit_writes_reports_for_every_host(fleet, first_run):
    proc = first_run["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reports = first_run["reports"]
    assert sorted(os.listdir(reports)) == ["gpuhost.prom", "index.html", "seed.html",
                                           "seed.json", "summary.md", "tuned.html",
                                           "tuned.json", "vm.html", "vm.json"]
    seed = json.loads((reports / "seed.json").read_text())
    assert seed["schema"] == 1 and seed["host"] == "seed" and seed["collected_at"]
    assert seed["findings"][0]["id"] == "dkms_missing_for_kernel"
    assert len([f for f in seed["findings"] if f["id"] == "pcie_mrrs"]) == 16
    mrrs = [f for f in seed["findings"] if f["id"] == "pcie_mrrs"]
    assert "-l seed" in mrrs[0]["remedy"]
    # GPU health from the stored nvidia-smi log and kernel-log lines of the seed tree
    assert seed["findings"][1]["id"] == "gpu_xid_events"
    assert seed["findings"][1]["current"].startswith("4 XID events in 7 days: XID 79 x4")
    assert "gpu_row_remap_pending" in [f["id"] for f in seed["findings"]]
    tuned = json.loads((reports / "tuned.json").read_text())
    assert not [f for f in tuned["findings"] if f["severity"] in ("critical", "high")]
    vm = json.loads((reports / "vm.json").read_text())
    assert vm["facts"]["gpus"][0]["upstream"] == [] and vm["facts"]["errors"] == []
    summary = (reports / "summary.md").read_text()
    for name in NAMES:
        assert re.search(r"^\| %s \| " % name, summary, re.M)
    # ranked findings printed per host, MRRS collapsed to one line
    assert "seed: worst critical: 2 critical, " in proc.stdout
    assert re.search(r"HIGH +pcie_mrrs x16", proc.stdout)
    counts = recap(proc.stdout)
    for name in NAMES:
        assert counts[name]["changed"] == 0 and counts[name]["failed"] == 0
    # the audit read the trees and wrote nothing into them
    for name, root in fleet["roots"].items():
        assert tree_snapshot(root) == first_run["before"][name], name


def test_second_run_and_check_mode_change_nothing(fleet, first_run):
    assert first_run["proc"].returncode == 0
    reports = first_run["reports"]
    for extra in ([], ["--check", "--diff"]):
        proc = run_playbook("audit", fleet["inventory"], "-e",
                            "gpuhost_audit_report_dir=%s" % reports, *extra)
        assert proc.returncode == 0, proc.stdout[-3000:]
        counts = recap(proc.stdout)
        assert [counts[n]["changed"] for n in NAMES] == [0, 0, 0], extra
    for name, root in fleet["roots"].items():
        assert tree_snapshot(root) == first_run["before"][name], name
    # check mode still wrote the reports (output on the controller, not host state)
    assert (reports / "index.html").stat().st_size > 10000


def test_fail_on_high_fails_the_seed_host_only(fleet):
    proc = run_playbook("audit", fleet["inventory"], "-e",
                        "gpuhost_audit_report_dir=%s" % (fleet["base"] / "gate"),
                        "-e", "gpuhost_audit_fail_on=high")
    assert proc.returncode == 2, proc.stdout[-3000:]
    counts = recap(proc.stdout)
    assert counts["seed"]["failed"] == 1
    assert counts["tuned"]["failed"] == 0 and counts["vm"]["failed"] == 0
    assert "seed has findings at or above high: dkms_missing_for_kernel" in proc.stdout
    # the reports were written before the gate
    assert (fleet["base"] / "gate" / "index.html").exists()


def test_capture_then_audit_elsewhere_gives_the_same_findings(fleet, first_run):
    assert first_run["proc"].returncode == 0
    out = fleet["base"] / "capture"
    proc = run_playbook("capture", fleet["inventory"], "-l", "seed", "-e",
                        "gpuhost_audit_report_dir=%s" % out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    tarball = out / "seed-capture.tar.gz"
    assert tarball.exists()
    assert tree_snapshot(fleet["roots"]["seed"]) == first_run["before"]["seed"]
    # the documented offline path: the tarball audited as it is (never tar -x)
    inventory = _inventory(str(fleet["base"] / "elsewhere.ini"), {"seed": "/"})
    proc = run_playbook("audit", inventory, "-e",
                        "gpuhost_audit_report_dir=%s" % (fleet["base"] / "elsewhere-reports"),
                        "-e", "gpuhost_audit_capture=%s" % tarball)
    assert proc.returncode == 0, proc.stdout[-3000:]
    original = json.loads((first_run["reports"] / "seed.json").read_text())
    again = json.loads((fleet["base"] / "elsewhere-reports" / "seed.json").read_text())
    # the same findings; whether each is new depends on what the folder held before (the
    # first run's folder has seen later runs of this file), so that mark is left out

    def judged(doc):
        return [dict((k, v) for k, v in f.items() if k != "new") for f in doc["findings"]]
    assert judged(again) == judged(original)
    assert again["facts"] == original["facts"]


def _promtool():
    path = shutil.which("promtool")
    if path is None:
        subprocess.run([os.path.join(REPO, "scripts/apt-ensure.sh"), "prometheus"], check=True,
                       timeout=900)
        path = shutil.which("promtool")
    assert path, "promtool is not installed (Debian package prometheus)"
    return path


def promtool_check(text):
    """``promtool check metrics`` on ``text``: (return code, its output: problems only)."""
    proc = subprocess.run([_promtool(), "check", "metrics"], input=text, capture_output=True,
                          text=True, check=False, timeout=60)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def test_run_metrics_pass_promtool_and_match_the_findings(first_run):
    assert first_run["proc"].returncode == 0
    text = (first_run["reports"] / "gpuhost.prom").read_text()
    assert promtool_check(text) == (0, "")
    seed = json.loads((first_run["reports"] / "seed.json").read_text())
    lines = text.splitlines()
    assert len([x for x in lines if x.startswith('gpuhost_finding{host="seed",')]) == len(
        seed["findings"])
    assert 'gpuhost_finding{host="seed",id="pcie_mrrs",severity="high",' \
           'subject="0000:81:00.0"} 1' in lines
    critical = len([f for f in seed["findings"] if f["severity"] == "critical"])
    assert critical >= 1  # the seed host's DKMS gap at least
    assert 'gpuhost_findings{host="seed",severity="critical"} %d' % critical in lines
    assert 'gpuhost_findings{host="tuned",severity="critical"} 0' in lines
    assert 'gpuhost_check_status{host="seed",column="dkms"} 5' in lines
    assert 'gpuhost_check_status{host="vm",column="cpuidle"} -1' in lines
    for host in NAMES:
        assert any(x.startswith('gpuhost_audit_timestamp_seconds{host="%s"} 1' % host)
                   for x in lines)
        assert any(x.startswith('gpuhost_audit_duration_seconds{host="%s"} ' % host)
                   for x in lines)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(url, deadline):
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode("utf-8")
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def test_textfile_per_host_served_by_node_exporter(tmp_path):
    exporter = shutil.which("prometheus-node-exporter")
    if exporter is None:
        subprocess.run([os.path.join(REPO, "scripts/apt-ensure.sh"),
                        "prometheus-node-exporter"], check=True, timeout=900)
        exporter = shutil.which("prometheus-node-exporter")
    assert exporter, "prometheus-node-exporter is not installed"
    textdir = "/var/lib/prometheus/node-exporter"
    roots = {}
    for name in ("seed", "tuned"):
        root = tmp_path / name
        BUILDERS[name](root)
        (root / textdir.lstrip("/")).mkdir(parents=True)
        roots[name] = str(root)
    inventory = _inventory(str(tmp_path / "inventory.ini"), roots)
    before = dict((n, tree_snapshot(r)) for n, r in roots.items())
    opts = ["-e", "gpuhost_audit_write_reports=false", "-e",
            "gpuhost_audit_textfile_dir=%s" % textdir, "-e", "gpuhost_audit_timer=true"]
    check = run_playbook("audit", inventory, *opts, "--check")
    assert check.returncode == 0, check.stdout[-3000:]
    assert dict((n, tree_snapshot(r)) for n, r in roots.items()) == before  # check mode
    proc = run_playbook("audit", inventory, *opts)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # the metrics file is a fresh reading, not a change; the timer's first install is one
    assert [recap(proc.stdout)[n]["changed"] for n in roots] == [1, 1]
    for root in roots.values():
        with open(os.path.join(root, "etc/gpuhost-audit/audit.json")) as handle:
            config = json.load(handle)
        assert config["textfile"] == textdir + "/gpuhost_audit.prom"
        # the scheduled audit judges every wanted value the playbook's audit judged (role
        # common's __gpuhost_wanted, whole; gpu_count is unset in this inventory)
        assert set(config["wanted"]) == set(WANTED_KEYS) - {"gpu_count"}
        assert os.path.islink(os.path.join(
            root, "etc/systemd/system/timers.target.wants/gpuhost-audit.timer"))
    files = {}
    for name, root in roots.items():
        folder = os.path.join(root, textdir.lstrip("/"))
        assert os.listdir(folder) == ["gpuhost_audit.prom"]  # no temp file left behind
        path = os.path.join(folder, "gpuhost_audit.prom")
        assert os.stat(path).st_mode & 0o777 == 0o644
        with open(path) as handle:
            files[name] = handle.read()
        assert promtool_check(files[name]) == (0, ""), name
        other = "tuned" if name == "seed" else "seed"
        assert 'host="%s"' % other not in files[name]
    assert not (tmp_path / "reports").exists()
    # Debian's node_exporter on a local port, only its textfile collector, serves the file
    port = _free_port()
    server = subprocess.Popen(
        [exporter, "--web.listen-address=127.0.0.1:%d" % port, "--collector.disable-defaults",
         "--collector.textfile",
         "--collector.textfile.directory=%s" % os.path.join(roots["seed"],
                                                            textdir.lstrip("/"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        body = _scrape("http://127.0.0.1:%d/metrics" % port, time.time() + 30)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    served = body.splitlines()
    assert any(x.startswith('gpuhost_findings{host="seed",severity="critical"} ')
               and not x.endswith(" 0") for x in served)
    assert 'gpuhost_check_status{column="pcie_mrrs",host="seed"} 4' in served
    assert len([x for x in served if x.startswith("gpuhost_finding{")]) == len(
        [x for x in files["seed"].splitlines() if x.startswith("gpuhost_finding{")])
    assert "node_textfile_scrape_error 0" in served
    assert any(x.startswith("node_textfile_mtime_seconds{") and "gpuhost_audit.prom" in x
               for x in served)


def _chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium_args(tmp_path):
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--user-data-dir=%s" % (tmp_path / "profile"), "--window-size=1400,2000"]


def test_html_report_in_headless_chromium(fleet, first_run, tmp_path):
    assert first_run["proc"].returncode == 0
    browser = _chromium()
    if browser is None:
        subprocess.run([os.path.join(REPO, "scripts/apt-ensure.sh"), "chromium"], check=True,
                       timeout=900)
        browser = _chromium()
    assert browser, "chromium is not installed (scripts/apt-ensure.sh chromium)"
    index = first_run["reports"] / "index.html"
    os.makedirs(OUTPUT, exist_ok=True)
    shot = os.path.join(OUTPUT, "audit-report.png")
    if os.path.exists(shot):
        os.unlink(shot)
    proc = subprocess.run([browser] + _chromium_args(tmp_path) +
                          ["--screenshot=%s" % shot, "file://%s" % index],
                          capture_output=True, text=True, check=False, timeout=180)
    assert os.path.exists(shot), proc.stderr[-2000:]
    with open(shot, "rb") as handle:
        png = handle.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1400, 2000)
    assert len(png) > 60000  # a rendered page, not a blank one
    dom = subprocess.run([browser] + _chromium_args(tmp_path) +
                         ["--dump-dom", "file://%s" % index],
                         capture_output=True, text=True, check=False, timeout=180)
    # the fleet view's host list links each host's own page
    body = dom.stdout.split('<table class="hosts" id="hosts">')[1].split("</table>")[0]
    rows = re.findall(r'<td><a href="([^"]+)\.html">', body)
    assert sorted(rows) == sorted(NAMES)
    # the seed host's GPUs and bridges at MRRS 512 are grouped rows (the JSON keeps one
    # entry per subject), each collapsed to "N subjects" with the addresses on demand
    with open(first_run["reports"] / "seed.json") as handle:
        seed = json.load(handle)["findings"]
    mrrs = [f for f in seed if f["id"] == "pcie_mrrs"]
    assert len(mrrs) == 16  # 8 GPUs and the 8 bridges above them
    host = subprocess.run([browser] + _chromium_args(tmp_path) +
                          ["--dump-dom", "file://%s" % (first_run["reports"] / "seed.html")],
                          capture_output=True, text=True, check=False, timeout=180).stdout
    groups = re.findall(r'<code>pcie_mrrs</code>(?:(?!</section>).)*?<details class="subjects">'
                        r'<summary>(\d+) subjects</summary>(.*?)</details>', host, re.S)
    assert host.count("<code>pcie_mrrs</code>") == len(groups) < len(mrrs)
    shown = [a for group in groups
             for a in re.findall(r'<div>(?:<span class="nw">)?([0-9a-f:.]+)', group[1])]
    assert sorted(shown) == sorted(f["subject"] for f in mrrs)
    assert sum(int(group[0]) for group in groups) == len(mrrs)
    rows = re.search(r"Findings \((\d+) in (\d+) rows[,)]", host)  # ", N new since" after
    assert rows and int(rows.group(1)) == len(seed) and int(rows.group(2)) < len(seed)
    # widths at 800-1,920 px are measured in test_report_screens.py


def test_host_page_groups_checks_by_subject(fleet, first_run):
    """A host's page lists its checks under one heading per subject, in the report's order."""
    page = (first_run["reports"] / "seed.html").read_text(encoding="utf-8")
    assert re.findall(r'<h3>([^<]+)</h3>\n<div class="checks">', page) == [
        "GPU", "PCIe", "CPU", "Kernel and boot", "Containers and VMs", "Fleet"]
