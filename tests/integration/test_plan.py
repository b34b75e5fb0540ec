"""Playbook gpuhost.tuning.plan run for real (ansible-playbook, local connection) over 20
seed trees: gpu01-gpu20 the seed host, gpu07 changed by hand before the plan (its
numa_balancing already 0, its swappiness 30: a change set of its own), gpu13 an H200 VM
(host_tune refuses a guest), plus gpu21 unreachable (ssh to a closed port) when an ssh
client is there. The plan's files, its digest in the file name and on plan.md's first line,
the groups (the odd host first, the 18 alike last), nothing changed on any tree, and a
re-plan giving the same groups and fingerprints; two plans over the two halves (a sliced
job) merged by report_merge into the one plan's groups and fingerprints, which apply
--check takes. Durations are printed
(GPUHOST_PLAN_HOSTS=200 times a bigger fleet of seed trees by hand)."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest
from conftest import install_collection, tree_snapshot
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("plan_playbook")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv/bin/python")
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")
COUNT = int(os.environ.get("GPUHOST_PLAN_HOSTS") or 20)
ODD, GUEST, DEAD = "gpu07", "gpu13", "gpu%02d" % (COUNT + 1)
COLLECTIONS = {"path": os.path.join(REPO, "collections")}
DURATIONS = {}


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS["path"]
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


def _closed_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write(root, rel, text):
    with open(os.path.join(root, rel), "w") as handle:
        handle.write(text)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    install_collection(_env())
    private = str(tmp_path_factory.mktemp("collections"))
    subprocess.run([os.path.join(REPO, ".venv/bin/ansible-galaxy"), "collection", "install",
                    "--force", "-p", private, REPO], check=True, env=_env(),
                   capture_output=True, timeout=300)
    COLLECTIONS["path"] = private
    base = tmp_path_factory.mktemp("fleet")
    started = time.time()
    lines = ["[gpuhosts]"]
    roots = {}
    for index in range(1, COUNT + 1):
        name = "gpu%02d" % index
        root = roots[name] = str(base / name)
        if name == GUEST:
            hosts.vm_host(root)
        else:
            hosts.seed_host(root)
        lines.append("%s gpuhost_root=%s ansible_connection=local" % (name, root))
    _write(roots[ODD], "proc/sys/kernel/numa_balancing", "0\n")
    _write(roots[ODD], "proc/sys/vm/swappiness", "30\n")
    if shutil.which("ssh"):
        lines.append("%s ansible_connection=ssh ansible_host=127.0.0.1 ansible_port=%d "
                     "ansible_timeout=3 ansible_user=nobody" % (DEAD, _closed_port()))
    lines += ["", "[all:vars]", "ansible_python_interpreter=%s" % VENV_PY]
    inventory = str(base / "inventory.ini")
    _write(str(base), "inventory.ini", "\n".join(lines) + "\n")
    DURATIONS["seed trees (%d)" % COUNT] = round(time.time() - started, 1)
    yield {"roots": roots, "inventory": inventory, "base": base, "dead": len(lines) > COUNT + 4}
    print("\nplan playbook durations (s): %s" % json.dumps(DURATIONS, sort_keys=True))


def plan(fleet, dest, label):
    cmd = [PLAYBOOK, "gpuhost.tuning.plan", "-i", fleet["inventory"], "-f", "10",
           "-e", "gpuhost_plan_dir=%s" % dest]
    started = time.time()
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=900, check=False)
    DURATIONS[label] = round(time.time() - started, 1)
    return proc


@pytest.fixture(scope="module")
def first(fleet):
    before = tree_snapshot(fleet["roots"]["gpu01"])
    dest = str(fleet["base"] / "plans")
    proc = plan(fleet, dest, "plan (%d hosts)" % COUNT)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert tree_snapshot(fleet["roots"]["gpu01"]) == before  # check mode: nothing changed
    if os.environ.get("GPUHOST_PLAN_KEEP"):  # a copy of the plan files, for a look
        shutil.copytree(dest, os.environ["GPUHOST_PLAN_KEEP"], dirs_exist_ok=True)
    return dest, proc


def test_the_plan_files_name_its_digest(first):
    dest, proc = first
    names = sorted(os.listdir(dest))
    assert len(names) == 4 and names[1:] == ["plan.html", "plan.json", "plan.md"], names
    doc = planfile.load(os.path.join(dest, names[0]))
    assert names[0] == "plan-%s.json" % doc["digest"][:12]
    assert planfile.load(os.path.join(dest, "plan.json")) == doc
    with open(os.path.join(dest, "plan.md")) as handle:
        markdown = handle.read()
    assert markdown.splitlines()[0] == "# Plan %s" % doc["digest"]
    assert doc["digest"] == planfile.digest(doc) and doc["schema"] == planfile.SCHEMA
    assert doc["collection_version"] and "@" in doc["created_by"]
    assert doc["created_at"].endswith("Z") and "T" in doc["created_at"]
    assert "pcie" in doc["options"]["parts"] and len(doc["options"]["wanted_digest"]) == 64
    assert doc["batches"] == [list(doc["hosts"])] or sum(map(len, doc["batches"])) == len(
        doc["hosts"])
    assert "plan-%s.json" % doc["digest"][:12] in proc.stdout
    with open(os.path.join(dest, "plan.html")) as handle:
        page = handle.read()
    assert page.count("<section") == len(doc["groups"]) and "<details>" in page
    assert "http" not in page.replace('content="width=device-width', "")  # no external asset


def test_groups_put_the_odd_host_first_and_refuse_the_guest(first, fleet):
    dest = first[0]
    doc = planfile.load(os.path.join(dest, "plan.json"))
    groups = doc["groups"]
    assert groups[0]["hosts"] == [ODD] and not groups[0]["refused"]
    assert "kernel.numa_balancing 1 -> 0" not in groups[0]["summary"]
    assert "vm.swappiness 30 -> 10" in groups[0]["summary"]
    assert groups[0]["versus"]["only_here"] == ["vm.swappiness 30 -> 10"]
    assert groups[0]["versus"]["not_here"] == ["kernel.numa_balancing 1 -> 0",
                                               "vm.swappiness 60 -> 10"]
    alike = [h for h in fleet["roots"] if h not in (ODD, GUEST)]  # in inventory order
    assert groups[-1]["hosts"] == alike and len(alike) == COUNT - 2
    assert groups[-1]["summary"][:2] == ["/etc/sysctl.d/99-gpuhost-tuning.conf written",
                                         "kernel.nmi_watchdog 1 -> 0"]
    assert "MRRS 512 -> 4096 on 16 devices" in groups[-1]["summary"]
    assert "C2 disabled on 128 CPUs" in groups[-1]["summary"]
    guest = doc["hosts"][GUEST]
    assert guest["status"] == "refused" and "guest" in guest["refused"]
    refused = [g["hosts"] for g in groups if g["refused"]]
    assert [GUEST] in refused
    if fleet["dead"]:
        assert doc["hosts"][DEAD]["status"] == "unreachable"
        assert doc["hosts"][DEAD]["refused"].startswith("unreachable: ")
        assert [DEAD] in refused
    # every alike host: the same group, its own fingerprint (the same before-values here)
    entries = [doc["hosts"][h] for h in alike]
    assert len(set(e["group"] for e in entries)) == 1
    assert entries[0]["fingerprint"] == changeset.fingerprint(entries[0]["changes"])
    with open(os.path.join(dest, "plan.md")) as handle:
        markdown = handle.read()
    assert "### Group 1: 1 host, " in markdown
    assert "### Group %d: %d hosts, 28 changes, 0 reboots" % (len(groups), COUNT - 2) in markdown


@pytest.mark.skipif(not os.environ.get("GPUHOST_PLAN_AUDIT"),
                    reason="the audit's time beside the plan's: GPUHOST_PLAN_AUDIT=1")
def test_the_audit_over_the_same_trees_for_its_time(first, fleet):
    cmd = [PLAYBOOK, "gpuhost.tuning.audit", "-i", fleet["inventory"], "-f", "10",
           "-e", "gpuhost_audit_report_dir=%s" % (fleet["base"] / "audit")]
    started = time.time()
    subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900,
                   check=False)
    DURATIONS["audit (%d hosts)" % COUNT] = round(time.time() - started, 1)


def test_a_replan_gives_the_same_groups_and_fingerprints(first, fleet):
    dest = str(fleet["base"] / "again")
    proc = plan(fleet, dest, "re-plan (%d hosts)" % COUNT)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    one = planfile.load(os.path.join(first[0], "plan.json"))
    two = planfile.load(os.path.join(dest, "plan.json"))
    assert [g["hosts"] for g in one["groups"]] == [g["hosts"] for g in two["groups"]]
    assert [g["key"] for g in one["groups"]] == [g["key"] for g in two["groups"]]
    strip = ("refused",)  # an unreachable host's ssh message may differ between runs
    assert dict((h, dict((k, v) for k, v in e.items() if k not in strip))
                for h, e in one["hosts"].items()) == dict(
        (h, dict((k, v) for k, v in e.items() if k not in strip))
        for h, e in two["hosts"].items())


def _playbook(fleet, args, label):
    started = time.time()
    proc = subprocess.run([PLAYBOOK] + args, cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=900, check=False)
    DURATIONS[label] = round(time.time() - started, 1)
    return proc


def test_two_half_plans_merged_equal_the_one_plan_and_apply_takes_it(first, fleet):
    """A sliced plan job: the plan play over each half of the inventory (``--limit``, the
    unreachable host in the second), report_merge of the two folders into one plan equal
    in groups and per-host fingerprints to the plan over all hosts, and apply in check
    mode accepting the merged plan (its digest, version and age) for every planned host."""
    names = list(fleet["roots"]) + ([DEAD] if fleet["dead"] else [])
    halves = [names[:COUNT // 2], names[COUNT // 2:]]
    folders = []
    for index, half in enumerate(halves, 1):
        folder = str(fleet["base"] / ("slice-%d" % index))
        proc = _playbook(fleet, ["gpuhost.tuning.plan", "-i", fleet["inventory"], "-f", "10",
                                 "--limit", ",".join(half), "-e",
                                 "gpuhost_plan_dir=%s" % folder],
                         "plan of slice %d (%d hosts)" % (index, len(half)))
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        folders.append(folder)
    dest = str(fleet["base"] / "merged")
    proc = _playbook(fleet, ["gpuhost.tuning.report_merge", "-e", json.dumps(
        {"gpuhost_merge_folders": folders, "gpuhost_merge_dest": dest})],
        "report_merge of the 2 slice plans")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    names_out = sorted(os.listdir(dest))
    assert names_out[1:] == ["plan.html", "plan.json", "plan.md"], names_out
    merged = planfile.load(os.path.join(dest, names_out[0]))
    whole = planfile.load(os.path.join(first[0], "plan.json"))
    slices = [planfile.load(os.path.join(f, "plan.json")) for f in folders]
    assert names_out[0] == planfile.file_name(merged)
    assert "plan %s:" % os.path.join(dest, names_out[0]) in proc.stdout, proc.stdout[-3000:]
    assert "0 host(s) merged" not in proc.stdout  # no audit report: no fleet report line
    assert [g["hosts"] for g in merged["groups"]] == [g["hosts"] for g in whole["groups"]]
    assert [g["key"] for g in merged["groups"]] == [g["key"] for g in whole["groups"]]
    assert [g["summary"] for g in merged["groups"]] == [g["summary"] for g in whole["groups"]]
    assert dict((h, (e["status"], e["fingerprint"], e["group"]))
                for h, e in merged["hosts"].items()) == dict(
        (h, (e["status"], e["fingerprint"], e["group"])) for h, e in whole["hosts"].items())
    assert merged["batches"] == whole["batches"] and merged["options"] == whole["options"]
    assert merged["created_at"] == min(s["created_at"] for s in slices)
    assert [(m["file"], m["digest"]) for m in merged["merged_from"]] == [
        (planfile.file_name(s), s["digest"]) for s in slices]
    with open(os.path.join(dest, "plan.md")) as handle:
        assert handle.readline() == "# Plan %s\n" % merged["digest"]

    # apply --check over one host of each slice and the odd one (the others skipped by
    # name: a check-mode apply of all 20 takes 30 s and proves no more)
    reports = str(fleet["base"] / "apply-reports")
    applied = ["gpu01", ODD, names[-2], GUEST]
    before = tree_snapshot(fleet["roots"]["gpu01"])
    proc = _playbook(fleet, ["gpuhost.tuning.apply", "-i", fleet["inventory"], "--check",
                             "-e", json.dumps({"gpuhost_plan": os.path.join(dest, names_out[0]),
                                               "gpuhost_report_dir": reports,
                                               "gpuhost_plan_skip": [
                                                   h for h in names if h not in applied],
                                               "gpuhost_max_fail_percentage": 100})],
                     "apply --check of the merged plan (%d hosts)" % len(applied))
    out = proc.stdout
    assert "the plan was edited" not in out and "make a new plan" not in out, out[-4000:]
    with open(os.path.join(reports, "apply-%s.json" % merged["digest"][:12])) as handle:
        rep = json.load(handle)
    assert rep["plan_digest"] == merged["digest"] and rep["check_mode"], rep
    statuses = dict((h, rep["hosts"][h]["status"]) for h in applied)
    assert statuses == {"gpu01": "applied", ODD: "applied", names[-2]: "applied",
                        GUEST: "refused"}, dict((h, rep["hosts"][h]) for h in applied)
    assert set(r["status"] for h, r in rep["hosts"].items() if h not in applied) == {
        "skipped"}
    assert tree_snapshot(fleet["roots"]["gpu01"]) == before  # check mode: nothing changed
