"""The execution environment execution-environment.yml defines, run as AWX/AAP runs a job:
scripts/ee-run.sh audits two host trees (seed, vm) with `ansible-runner run
--process-isolation` in the EE image (podman, no network, only the collection and
ansible-core of the image). Its reports must be the reports an audit of the same trees on
this machine writes, apart from times.

Needs the image (scripts/ee-build.sh, `make ee`): skipped when it is not built, failed
instead under GPUHOST_EE_STRICT=1 (make ee sets it)."""

import json
import os
import shutil
import subprocess

import pytest
from conftest import install_collection, reports_without_times

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ee")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, ".venv/bin")
CONTAINERS_CONF = os.path.join(REPO, "molecule/shared/containers.conf")
REPORTS = ["gpuhost.prom", "index.html", "seed.html", "seed.json", "summary.md", "vm.html",
           "vm.json"]


def _image():
    if os.environ.get("GPUHOST_EE_IMAGE"):
        return os.environ["GPUHOST_EE_IMAGE"]
    tag = subprocess.run([os.path.join(REPO, "scripts/ee-def.sh"), "tag"], check=True,
                         capture_output=True, text=True, timeout=60).stdout.strip()
    return "localhost/" + tag


def _host_env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


@pytest.fixture(scope="module")
def ee_run(tmp_path_factory):
    missing = pytest.fail if os.environ.get("GPUHOST_EE_STRICT") else pytest.skip
    if shutil.which("podman") is None:
        missing("podman not installed (make ee installs it)")
    image = _image()
    env = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF)
    if subprocess.run(["podman", "image", "exists", image], env=env, check=False,
                      timeout=60).returncode != 0:
        missing("execution environment image %s not built (make ee)" % image)
    base = tmp_path_factory.mktemp("ee")
    proc = subprocess.run([os.path.join(REPO, "scripts/ee-run.sh"), str(base / "run")],
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    return {"dir": base / "run", "proc": proc, "image": image, "base": base}


def test_the_audit_runs_in_the_ee_and_writes_every_report(ee_run):
    run, proc = ee_run["dir"], ee_run["proc"]
    out = (run / "runner.out").read_text() if (run / "runner.out").exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + out[-3000:]
    artifacts = run / "runner" / "artifacts" / "ee-audit"
    assert (artifacts / "status").read_text() == "successful"
    assert (artifacts / "rc").read_text() == "0"
    # the job ran in a podman container of the image, with nothing of this machine's
    # Ansible mounted or passed: the collection and ansible-core are the image's
    command = json.loads((artifacts / "command").read_text())["command"]
    assert command[:2] == ["podman", "run"] and ee_run["image"] in command
    assert "--network=none" in command
    mounts = [command[i + 1] for i, arg in enumerate(command) if arg == "-v"]
    assert sorted(m.split(":")[0].rstrip("/") for m in mounts) == sorted(
        [str(run), str(run / "runner")])
    assert "ANSIBLE_COLLECTIONS_PATH" not in (artifacts / "env.list").read_text()
    assert "ansible-playbook" in command

    reports = run / "reports"
    assert sorted(os.listdir(reports)) == REPORTS
    seed = json.loads((reports / "seed.json").read_text())
    assert seed["host"] == "seed" and seed["findings"][0]["id"] == "dkms_missing_for_kernel"
    mrrs = [f for f in seed["findings"] if f["id"] == "pcie_mrrs"]
    assert len(mrrs) == 16 and "-l seed" in mrrs[0]["remedy"]
    vm = json.loads((reports / "vm.json").read_text())
    assert vm["facts"]["gpus"][0]["upstream"] == [] and vm["facts"]["errors"] == []
    stdout = (artifacts / "stdout").read_text()
    assert "seed: worst critical: 2 critical, " in stdout
    # ansible-runner's events: both hosts audited, none failed
    seen, failed = set(), set()
    for name in os.listdir(artifacts / "job_events"):
        event = json.loads((artifacts / "job_events" / name).read_text())
        if event.get("event") == "runner_on_ok":
            seen.add(event["event_data"]["host"])
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            failed.add(event["event_data"]["host"])
    assert seen == {"seed", "vm"} and not failed


def test_the_ee_reports_are_the_reports_of_a_run_on_this_machine(ee_run):
    run = ee_run["dir"]
    assert ee_run["proc"].returncode == 0, ee_run["proc"].stderr[-3000:]
    # the same trees and inventory, this checkout's collection and the venv's ansible-core
    inventory = (run / "runner" / "inventory" / "hosts").read_text().replace(
        "ansible_python_interpreter=/usr/bin/python3.11",
        "ansible_python_interpreter=%s" % os.path.join(BIN, "python"))
    host_inventory = ee_run["base"] / "host-inventory"
    host_inventory.write_text(inventory)
    host_reports = ee_run["base"] / "host-reports"
    env = _host_env()
    install_collection(env)
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(host_inventory),
                           "gpuhost.tuning.audit", "-e",
                           "gpuhost_audit_report_dir=%s" % host_reports],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    in_ee, here = reports_without_times(run / "reports"), reports_without_times(host_reports)
    assert sorted(in_ee) == sorted(here) == REPORTS
    for name in REPORTS:
        # an image older than this checkout differs here: rebuild it (make ee)
        assert in_ee[name] == here[name], "%s differs (image older than the checkout?)" % name
