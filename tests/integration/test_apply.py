"""Applying a saved plan exactly (playbooks/apply.yml), for real (ansible-playbook, local
connection) over seed trees: plan, then a host changed by hand after the plan is refused
naming the value while the others are applied exactly as planned, and a re-plan shows
nothing left to do on them; a plan edited by hand (digest mismatch), a plan older than
gpuhost_plan_max_age and a run without gpuhost_plan are refused before any host.

The fleet: inventory hosts gpu1..gpu5 with ``ansible_connection: local``, each with its own
host tree (``gpuhost_root``); gpu1, gpu2, gpu3 and gpu5 are planned with gpuhost_serial
[1, 2] (batches gpu1 | gpu2, gpu3 | gpu5), gpu5 is left out by its group's name
(gpuhost_plan_skip), gpu4 is in the inventory only (not in the plan: never touched).
Durations are printed at the end of the module."""

import json
import os
import re
import subprocess
import time

import pytest
import yaml
from conftest import tree_snapshot
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("apply")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
# the live checkout through the link tests/conftest.py keeps
COLLECTIONS = os.path.join(REPO, "tests", "output", "pathlink")
PLANNED = ["gpu1", "gpu2", "gpu3", "gpu5"]
FLEET = PLANNED + ["gpu4"]
SKIPPED = "gpu5"  # in group rack2, left out by gpuhost_plan_skip
MOVED = "gpu2"  # its kernel.numa_balancing set to 0 by hand after the plan
MANAGED = ("pcie_mrrs", "numa_balancing", "cpuidle_deep_state", "sysctl")
DURATIONS = {}

with open(os.path.join(REPO, "roles/common/defaults/main.yml")) as _handle:
    COMMON = yaml.safe_load(_handle)
WANTED = {"gpu_vendor": COMMON["gpuhost_gpu_vendor"], "gpu_classes": COMMON["gpuhost_gpu_classes"],
          "mrrs_size": COMMON["gpuhost_mrrs_size"],
          "cpuidle_deeper_than": COMMON["gpuhost_cpuidle_deeper_than"],
          "sysctl": COMMON["gpuhost_sysctl"]}


def _env():
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
                "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


def playbook(fleet, name, extra, label, inventory="inventory"):
    variables = {"gpuhost_report_dir": fleet["reports"], "gpuhost_plan_dir": fleet["plans"]}
    variables.update(extra)
    started = time.time()
    proc = subprocess.run([PLAYBOOK, "-i", fleet[inventory], "gpuhost.tuning.%s" % name,
                           "-e", json.dumps(variables)],
                          cwd=fleet["base"], env=_env(), capture_output=True, text=True,
                          check=False, timeout=600)
    DURATIONS[label] = round(time.time() - started, 1)
    return proc


def recap(output):
    out = {}
    for host, line in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output.split("PLAY RECAP")[-1],
                                 re.M):
        out[host] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", line))
    return out


def managed_findings(root):
    return sorted(f["id"] for f in audit.audit(root, WANTED)["findings"] if f["id"] in MANAGED)


def _inventory(base, names, roots):
    inventory = {"all": {"hosts": {}, "vars": {"ansible_connection": "local",
                                               "ansible_python_interpreter": VENV_PY},
                         "children": {"rack2": {"hosts": {}}}}}
    for name in names:
        group = inventory["all"]["children"]["rack2"] if name == SKIPPED else inventory["all"]
        group["hosts"][name] = {"gpuhost_root": roots[name]}
    path = os.path.join(base, "inventory-%d.yml" % len(names))
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


@pytest.fixture(scope="module", autouse=True)
def durations():
    yield
    print("\napply playbook durations (s): %s" % json.dumps(DURATIONS, sort_keys=True))


def _plan_of(fleet, proc):
    found = sorted(n for n in os.listdir(fleet["plans"])
                   if re.match(r"^plan-[0-9a-f]{12}\.json$", n))
    assert len(found) == 1, (found, proc.stdout[-3000:])
    return os.path.join(fleet["plans"], found[0])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Five seed trees; the plan made over the planned four (inventory ``planned``) in
    batches [1, 2], then gpu2's kernel.numa_balancing set to 0 by hand; the apply runs over
    all five (``inventory``)."""
    base = str(tmp_path_factory.mktemp("apply"))
    roots = {}
    for name in FLEET:
        roots[name] = os.path.join(base, name)
        hosts.seed_host(roots[name])
    fleet = {"base": base, "roots": roots, "reports": os.path.join(base, "reports"),
             "plans": os.path.join(base, "plans"),
             "planned": _inventory(base, PLANNED, roots),
             "inventory": _inventory(base, FLEET, roots)}
    proc = playbook(fleet, "plan", {"gpuhost_serial": [1, 2]}, "plan (4 seed hosts)",
                    inventory="planned")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    fleet["plan"] = _plan_of(fleet, proc)
    fleet["doc"] = planfile.load(fleet["plan"])
    assert sorted(fleet["doc"]["hosts"]) == PLANNED
    assert fleet["doc"]["batches"] == [["gpu1"], ["gpu2", "gpu3"], ["gpu5"]]
    for name in PLANNED:
        changes = fleet["doc"]["hosts"][name]["changes"]
        assert ("sysctl", "kernel.numa_balancing", "1", "0") in [
            (c["part"], c["item"], c["before"], c["after"]) for c in changes], changes
    with open(os.path.join(roots[MOVED], "proc/sys/kernel/numa_balancing"), "w") as handle:
        handle.write("0\n")
    fleet["before"] = dict((name, tree_snapshot(roots[name])) for name in FLEET)
    return fleet


def _write_plan(fleet, name, doc, redigest=True):
    if redigest:
        doc["digest"] = planfile.digest(doc)
    path = os.path.join(fleet["base"], name)
    with open(path, "w") as handle:
        json.dump(doc, handle, indent=1, sort_keys=True)
    return path


def _untouched(fleet):
    for name in FLEET:
        assert tree_snapshot(fleet["roots"][name]) == fleet["before"][name], name


def test_no_plan_given_is_refused_naming_gpuhost_plan(fleet):
    proc = playbook(fleet, "apply", {}, "apply without gpuhost_plan")
    assert proc.returncode != 0
    assert "gpuhost_plan is required: the path of the plan file to apply" in proc.stdout
    _untouched(fleet)


def test_a_plan_edited_by_hand_is_refused_before_any_host(fleet):
    doc = json.loads(json.dumps(fleet["doc"]))
    for change in doc["hosts"]["gpu1"]["changes"]:
        if change["item"] == "kernel.numa_balancing":
            change["after"] = "2"
    path = _write_plan(fleet, "edited.json", doc, redigest=False)
    proc = playbook(fleet, "apply", {"gpuhost_plan": path}, "apply of an edited plan")
    assert proc.returncode != 0
    assert "the plan was edited after it was made" in proc.stdout, proc.stdout[-3000:]
    assert "no host was touched" in proc.stdout
    assert set(recap(proc.stdout)) == {"localhost"}  # no play reached a host
    _untouched(fleet)


def test_a_plan_older_than_the_max_age_is_refused_before_any_host(fleet):
    doc = json.loads(json.dumps(fleet["doc"]))
    made = time.time() - 26 * 3600 - 60
    doc["created_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(made))
    path = _write_plan(fleet, "old.json", doc)
    proc = playbook(fleet, "apply", {"gpuhost_plan": path}, "apply of a 26 h old plan")
    assert proc.returncode != 0
    assert "the plan is 26 h old, gpuhost_plan_max_age is 24 h" in proc.stdout, proc.stdout[-3000:]
    assert set(recap(proc.stdout)) == {"localhost"}
    _untouched(fleet)


def test_apply_changes_exactly_the_planned_hosts_and_refuses_the_moved_one(fleet):
    roots = fleet["roots"]
    proc = playbook(fleet, "apply", {"gpuhost_plan": fleet["plan"], "gpuhost_plan_skip": ["rack2"]},
                    "apply (4 planned, 1 moved, 1 skipped)")
    out = proc.stdout
    assert proc.returncode == 2, out[-4000:] + proc.stderr[-2000:]  # the refused host fails
    counts = recap(out)
    assert counts[MOVED]["failed"] == 1 and counts["gpu1"]["failed"] == 0, counts
    assert counts["gpu3"]["failed"] == 0, counts
    assert "gpu4" not in counts and SKIPPED not in counts  # never in the apply play
    # the plan's batches less the skipped host: gpu1, then gpu2 and gpu3
    assert out.count("PLAY [Apply the plan") == 2, out[-4000:]
    assert "kernel.numa_balancing is now 0 (planned 1 -> 0)" in out

    # the planned hosts are tuned; the moved one and the one not in the plan untouched
    for name in ("gpu1", "gpu3"):
        assert managed_findings(roots[name]) == [], name
    for name in (MOVED, "gpu4", SKIPPED):
        assert tree_snapshot(roots[name]) == fleet["before"][name], name

    # the apply report: planned vs done per host
    digest12 = fleet["doc"]["digest"][:12]
    with open(os.path.join(fleet["reports"], "apply-%s.json" % digest12)) as handle:
        report = json.load(handle)
    status = dict((h, r["status"]) for h, r in report["hosts"].items())
    assert status == {"gpu1": "applied", MOVED: "refused", "gpu3": "applied",
                      "gpu4": "not in the plan", SKIPPED: "skipped"}, report["counts"]
    assert report["finished"] is True
    for name in ("gpu1", "gpu3"):
        row = report["hosts"][name]
        assert row["done"] == row["planned"] == fleet["doc"]["hosts"][name]["changes"]
        assert row["moved"] == []
    assert "kernel.numa_balancing is now 0 (planned 1 -> 0)" in report["hosts"][MOVED]["reason"]
    with open(os.path.join(fleet["reports"], "apply-%s.md" % digest12)) as handle:
        markdown = handle.read()
    assert markdown.startswith("# Apply of plan %s\n" % fleet["doc"]["digest"])
    assert "| gpu2 | refused |" in markdown and "| gpu1 | applied |" in markdown

    # the same apply again (as after an interrupted run): the applied hosts have nothing
    # left to do and are left as they are, the moved one is refused again
    tuned = dict((name, tree_snapshot(roots[name])) for name in ("gpu1", "gpu3"))
    rerun = playbook(fleet, "apply", {"gpuhost_plan": fleet["plan"],
                                      "gpuhost_plan_skip": ["rack2"]}, "apply again")
    assert rerun.returncode == 2, rerun.stdout[-4000:]
    with open(os.path.join(fleet["reports"], "apply-%s.json" % digest12)) as handle:
        again = json.load(handle)
    assert dict((h, r["status"]) for h, r in again["hosts"].items() if h in PLANNED) == {
        "gpu1": "nothing to do", MOVED: "refused", "gpu3": "nothing to do", SKIPPED: "skipped"}
    for name in ("gpu1", "gpu3"):
        assert tree_snapshot(roots[name]) == tuned[name], name

    # a re-plan: nothing left to do on the applied hosts, the moved one still to tune
    again = playbook(fleet, "plan", {"gpuhost_plan_dir": os.path.join(fleet["base"], "replan")},
                     "re-plan (4 seed hosts)", inventory="planned")
    assert again.returncode == 0, again.stdout[-3000:]
    fleet2 = dict(fleet, plans=os.path.join(fleet["base"], "replan"))
    replan = planfile.load(_plan_of(fleet2, again))
    assert replan["hosts"]["gpu1"]["changes"] == [] and replan["hosts"]["gpu3"]["changes"] == []
    assert replan["hosts"][SKIPPED]["changes"] == fleet["doc"]["hosts"][SKIPPED]["changes"]
    moved = [c["item"] for c in replan["hosts"][MOVED]["changes"]]
    assert moved and "kernel.numa_balancing" not in moved
