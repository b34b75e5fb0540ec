"""The audit as AWX/AAP job slicing runs it: four slice jobs through ansible-runner (the
engine AWX and AAP execute jobs with: a private data dir with env/extravars, env/envvars,
inventory/ and project/, and its artifacts), each with its shrunk inventory (slice k of n
takes the hosts k, k+n, ... in inventory order, as AWX's get_sliced_hosts does), then the
report_merge playbook: the merged report is the one-run report byte for byte apart from
times. An empty slice succeeds and writes nothing; a slice with a failing host still
writes its other host, and the merge shows the failed host's older result as stale."""

import json
import os
import re
import subprocess

import pytest
import yaml
from conftest import install_collection, reports_without_times
from fixtures import hosts

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("slices")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, ".venv/bin")
VENV_PY = os.path.join(BIN, "python")
RUNNER = os.path.join(BIN, "ansible-runner")
BUILDERS = (hosts.seed_host, hosts.seed_host, hosts.tuned_host, hosts.vm_host,
            hosts.seed_host, hosts.tuned_host, hosts.seed_host)
NAMES = ["gpu%02d" % (i + 1) for i in range(len(BUILDERS))]
N = 4


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


def sliced(names, n):
    """AWX's job slicing: slice k (1-based) of n gets names[k-1::n]."""
    return [names[k::n] for k in range(n)]


def _inventory(roots, names, broken=()):
    lines = ["[gpuhosts]"]
    for name in names:
        python = "/nonexistent/python3" if name in broken else VENV_PY
        lines.append("%s gpuhost_root=%s ansible_python_interpreter=%s"
                     % (name, roots[name], python))
    return "\n".join(lines + ["", "[all:vars]", "ansible_connection=local", ""])


def run_job(base, ident, inventory, extravars, playbook="gpuhost.tuning.audit"):
    """One job as AWX hands it to ansible-runner: returns the artifacts folder."""
    data = base / ident
    for sub in ("env", "inventory", "project"):
        (data / sub).mkdir(parents=True)
    (data / "inventory" / "hosts").write_text(inventory)
    (data / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    (data / "project" / "site.yml").write_text(
        "---\n- name: The collection's playbook, as a project's job template runs it\n"
        "  ansible.builtin.import_playbook: %s\n" % playbook)
    proc = subprocess.run([RUNNER, "run", str(data), "-p", "site.yml", "--ident", ident],
                          env=_env(), capture_output=True, text=True, timeout=600, check=False)
    artifacts = data / "artifacts" / ident
    assert (artifacts / "rc").exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return artifacts


def _rc(artifacts):
    return int((artifacts / "rc").read_text()), (artifacts / "status").read_text()


def _stdout(artifacts):
    """The job's stdout with its line wrapping undone (the callback folds long values)."""
    return " ".join((artifacts / "stdout").read_text().split())


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    install_collection(_env())
    base = tmp_path_factory.mktemp("slices")
    roots = {}
    for name, build in zip(NAMES, BUILDERS, strict=True):
        root = base / "hosts" / name
        root.mkdir(parents=True)
        build(root)
        roots[name] = str(root)
    return {"base": base, "roots": roots}


@pytest.fixture(scope="module")
def jobs(fleet):
    base, roots = fleet["base"], fleet["roots"]
    one = run_job(base, "one-run", _inventory(roots, NAMES),
                  {"gpuhost_audit_report_dir": str(base / "one")})
    slices = []
    for k, part in enumerate(sliced(NAMES, N)):
        slices.append(run_job(base, "slice-%d" % (k + 1), _inventory(roots, part),
                              {"gpuhost_audit_report_dir": str(base / "shared"),
                               "gpuhost_audit_report_slice": True}))
    merge = run_job(base, "merge", "[gpuhosts]\n",
                    {"gpuhost_merge_folders": [str(base / "shared")],
                     "gpuhost_merge_dest": str(base / "fleet")},
                    playbook="gpuhost.tuning.report_merge")
    return {"one": one, "slices": slices, "merge": merge}


def test_slices_are_assigned_as_awx_slices_them():
    assert sliced(NAMES, N) == [["gpu01", "gpu05"], ["gpu02", "gpu06"], ["gpu03", "gpu07"],
                                ["gpu04"]]


def test_four_slices_merged_are_the_one_run_report(fleet, jobs):
    base = fleet["base"]
    for artifacts in [jobs["one"], jobs["merge"]] + jobs["slices"]:
        assert _rc(artifacts) == (0, "successful"), _stdout(artifacts)[-3000:]
    # the slices wrote only per-host JSON into their shared folder: nothing overwritten
    assert sorted(os.listdir(base / "shared")) == sorted("%s.json" % n for n in NAMES)
    one, merged = reports_without_times(base / "one"), reports_without_times(base / "fleet")
    assert sorted(merged) == sorted(one)
    for name in sorted(one):
        assert merged[name] == one[name], name
    # the fleet check judged the union: gpu04 (the VM) drifts against the six others,
    # though its own slice held it alone
    gpu04 = json.loads((base / "fleet" / "gpu04.json").read_text())
    assert "driver" in [f["subject"] for f in gpu04["findings"] if f["id"] == "fleet_drift"]
    assert "7 host(s) merged" in _stdout(jobs["merge"])
    # ansible-runner's events name every host of each slice
    events = os.listdir(jobs["slices"][0] / "job_events")
    hosts_seen = set()
    for name in events:
        data = json.loads((jobs["slices"][0] / "job_events" / name).read_text())
        if data.get("event") == "runner_on_ok":
            hosts_seen.add(data["event_data"]["host"])
    assert {"gpu01", "gpu05"} <= hosts_seen


def test_an_empty_slice_succeeds_and_writes_nothing(fleet, jobs):
    base = fleet["base"]
    artifacts = run_job(base, "slice-empty", "[gpuhosts]\n",
                        {"gpuhost_audit_report_dir": str(base / "empty"),
                         "gpuhost_audit_report_slice": True})
    assert _rc(artifacts) == (0, "successful"), _stdout(artifacts)[-3000:]
    assert not (base / "empty").exists()
    merge = run_job(base, "merge-empty", "[gpuhosts]\n",
                    {"gpuhost_merge_folders": [str(base / "shared"), str(base / "empty-made")],
                     "gpuhost_merge_dest": str(base / "fleet-empty")},
                    playbook="gpuhost.tuning.report_merge")
    # a folder that does not exist is named (a typo is not an empty slice)
    assert _rc(merge)[0] != 0 and str(base / "empty-made") in _stdout(merge)
    (base / "empty-made").mkdir()
    merge = run_job(base, "merge-empty-2", "[gpuhosts]\n",
                    {"gpuhost_merge_folders": [str(base / "empty-made")],
                     "gpuhost_merge_dest": str(base / "fleet-empty")},
                    playbook="gpuhost.tuning.report_merge")
    assert _rc(merge) == (0, "successful")
    assert "nothing to merge, nothing written" in _stdout(merge)
    assert not (base / "fleet-empty").exists()


def test_a_slice_failing_on_a_host_writes_the_other_and_the_merge_marks_the_old_one_stale(
        fleet, jobs):
    base, roots = fleet["base"], fleet["roots"]
    # yesterday's one-run report is the older folder; gpu02's result in it made 2 days old
    old = json.loads((base / "one" / "gpu02.json").read_text())
    old["collected_at"] = "2020-01-01T00:00:00Z"
    yesterday = base / "yesterday"
    yesterday.mkdir()
    (yesterday / "gpu02.json").write_text(json.dumps(old))
    artifacts = run_job(base, "slice-2-failing", _inventory(roots, ["gpu02", "gpu06"],
                                                            broken=("gpu02",)),
                        {"gpuhost_audit_report_dir": str(base / "today"),
                         "gpuhost_audit_report_slice": True})
    rc, status = _rc(artifacts)
    assert rc != 0 and status == "failed"
    assert "gpu02" in _stdout(artifacts) and "/nonexistent/python3" in _stdout(artifacts)
    # the failed host is in the slice's report too, with its status and no findings
    assert sorted(os.listdir(base / "today")) == ["gpu02.json", "gpu06.json"]
    assert json.loads((base / "today" / "gpu02.json").read_text())["status"] == "failed"
    merge = run_job(base, "merge-failing", "[gpuhosts]\n",
                    {"gpuhost_merge_folders": [str(yesterday), str(base / "today")],
                     "gpuhost_merge_dest": str(base / "fleet-failing")},
                    playbook="gpuhost.tuning.report_merge")
    assert _rc(merge) == (0, "successful"), _stdout(merge)[-3000:]
    assert "stale: gpu02" in _stdout(merge)
    summary = (base / "fleet-failing" / "summary.md").read_text()
    assert re.search(r"^\| gpu02 \| 2020-01-01T00:00:00Z \| \d+d \d+h \| %s \|$"
                     % re.escape(str(yesterday)), summary, re.M)
    assert sorted(n for n in os.listdir(base / "fleet-failing") if n.endswith(".json")) == \
        ["gpu02.json", "gpu06.json"]
