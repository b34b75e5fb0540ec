"""Rollouts across a fleet of five hosts on this machine: real ansible-playbook runs whose
serial batches and max_fail_percentage are Ansible's own.

The fleet: five inventory hosts (gpu1..gpu5) with ``ansible_connection: local``, each with
its own host tree (``gpuhost_root``) and its own interpreter, a small wrapper that points
the ``proxmox-boot-tool``/``pct`` test doubles (tests/doubles) at that host's tree before
running the venv's Python. Everything a host's modules read or run stays in its tree.

How the reboot is stood in for: with a ``gpuhost_root`` other than ``/`` the role skips
``ansible.builtin.reboot`` (its report says "skipped: root <tree>") and verifies the tree
as it is, so "done" here means every gate passed, the trial kernel was set up and the
boot configuration written and proven in the tree. The real reboot is the VM lab's
(``make lab-collection``).

Durations of every playbook run are printed at the end of the module.
"""

import hashlib
import json
import os
import re
import stat
import subprocess
import time

import pytest
import yaml
from fixtures import bootloader as fx
from fixtures import dkms, hosts

pytestmark = [pytest.mark.integration, pytest.mark.rollout]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
DOUBLES = os.path.join(REPO, "tests", "doubles")
# the live checkout through the link tests/conftest.py keeps
COLLECTIONS = os.path.join(REPO, "tests", "output", "pathlink")
ESP_DIR = "/var/lib/gpuhost-doubles/esp"
UUIDS = ("9B2E-4F1C", "9B2E-A7D3")
OLD, NEW = hosts.SEED_RUNNING, hosts.SEED_NEW
FLEET = ["gpu1", "gpu2", "gpu3", "gpu4", "gpu5"]
DURATIONS = {}
UPGRADE = {
    "gpuhost_reboot_verify_kernel_upgrade": True, "gpuhost_kernel_version": NEW,
    "gpuhost_trial_boot": True, "gpuhost_reboot_verify_reboot": True,
    "gpuhost_tree_commands": ["proxmox-boot-tool", "pct"],
    "gpuhost_esp_dirs": [ESP_DIR],
    # the seed hosts are untuned: only the checks a reboot would settle (pending here)
    "gpuhost_reboot_verify_checks": ["kernel", "cmdline", "module_params"],
}


@pytest.fixture(scope="module", autouse=True)
def durations():
    yield
    print("\nrollout playbook durations (s): %s" % json.dumps(DURATIONS, sort_keys=True))


def digest(root):
    """One hash over every path under ``root``: its kind, mode, bytes or link target."""
    sha = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            info = os.lstat(path)
            sha.update(os.path.relpath(path, root).encode() + b"\0")
            sha.update(("%o" % info.st_mode).encode() + b"\0")
            if stat.S_ISLNK(info.st_mode):
                sha.update(os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    sha.update(handle.read())
            sha.update(b"\0")
    return sha.hexdigest()


def ready(root):
    """The seed host once headers and the DKMS build for the new kernel are there."""
    dkms.kernel_tree(root, NEW, headers=True)
    dkms.dkms_tree(root, "nvidia", hosts.SEED_NVIDIA, installed=[OLD, NEW])


def interpreter(base, name, root, path_prefix=()):
    """A per-host Python: the doubles act on this host's tree, log outside it."""
    wrapper = os.path.join(base, name + "-python")
    path = ":".join(list(path_prefix) + [DOUBLES])
    with open(wrapper, "w") as handle:
        handle.write("#!/bin/sh\n"
                     "GPUHOST_DOUBLES_ROOT='%s' GPUHOST_DOUBLES_LOG='%s' "
                     "GPUHOST_DOUBLES_RUNNING_KERNEL='%s' PATH='%s':\"$PATH\" "
                     "exec '%s' \"$@\"\n" % (root, os.path.join(base, name + "-calls.jsonl"),
                                             OLD, path, VENV_PY))
    os.chmod(wrapper, 0o755)
    return wrapper


def make_fleet(base, headers_missing=("gpu2",)):
    """Five seed hosts, each in its own tree, ready for the upgrade except ``headers_missing``
    (the next kernel's headers and DKMS build absent: the gate must stop there)."""
    base = str(base)
    inventory = {"all": {"hosts": {}, "vars": {"ansible_connection": "local"}}}
    roots = {}
    for name in FLEET:
        root = os.path.join(base, name)
        hosts.seed_host(root)
        for uuid in UUIDS:
            fx.pbt_esp(root, ESP_DIR, uuid, [OLD, NEW], hosts.PVE_CMDLINE)
        if name not in headers_missing:
            ready(root)
        roots[name] = root
        inventory["all"]["hosts"][name] = {
            "gpuhost_root": root,
            "ansible_python_interpreter": interpreter(base, name, root)}
    path = os.path.join(base, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return {"base": base, "roots": roots, "inventory": path,
            "reports": os.path.join(base, "reports")}


def playbook(fleet, name, extra, label):
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
                "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    variables = {"gpuhost_report_dir": fleet["reports"]}
    variables.update(extra)
    started = time.time()
    proc = subprocess.run([PLAYBOOK, "-i", fleet["inventory"], "gpuhost.tuning.%s" % name,
                           "-e", json.dumps(variables)],
                          cwd=fleet["base"], env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    DURATIONS[label] = round(time.time() - started, 1)
    print("%s: %.1f s" % (label, DURATIONS[label]))
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


def rollout(fleet):
    with open(os.path.join(fleet["reports"], "rollout.json")) as handle:
        doc = json.load(handle)
    with open(os.path.join(fleet["reports"], "rollout.md")) as handle:
        return doc, handle.read()


def statuses(doc):
    return [(row["host"], row["status"]) for row in doc["hosts"]]


def test_host2_stops_the_rollout_then_the_same_command_resumes(tmp_path):
    fleet = make_fleet(tmp_path)
    roots = fleet["roots"]
    before = dict((name, digest(root)) for name, root in roots.items())
    proc = playbook(fleet, "reboot_verify", UPGRADE, "serial 1, host 2 stops")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    counts = recap(proc.stdout)
    # host 1 done, host 2 stopped by the headers gate, hosts 3-5 never started
    assert sorted(counts) == ["gpu1", "gpu2"]
    assert counts["gpu1"]["failed"] == 0 and counts["gpu1"]["changed"] > 0
    assert counts["gpu2"]["failed"] == 1
    gate = "headers for kernel %s not found" % NEW
    assert gate in out and "install proxmox-headers-%s" % NEW in out
    for name in ("gpu3", "gpu4", "gpu5"):
        assert digest(roots[name]) == before[name], name
        assert not os.path.exists(os.path.join(fleet["base"], name + "-calls.jsonl"))
    assert digest(roots["gpu1"]) != before["gpu1"]
    # host 1 carries the trial boot, host 2 was stopped before any pin or refresh
    with open(os.path.join(fleet["base"], "gpu1-calls.jsonl")) as handle:
        calls = [json.loads(line)["argv"] for line in handle if line.strip()]
    assert ["proxmox-boot-tool", "kernel", "pin", NEW, "--next-boot"] in calls
    with open(os.path.join(fleet["base"], "gpu2-calls.jsonl")) as handle:
        calls2 = [json.loads(line)["argv"] for line in handle if line.strip()]
    assert not any(c[:2] in (["proxmox-boot-tool", "kernel"], ["proxmox-boot-tool", "refresh"])
                   for c in calls2), calls2
    # the summary: console and rollout.md/json
    doc, md = rollout(fleet)
    assert statuses(doc) == [("gpu1", "done"), ("gpu2", "stopped"), ("gpu3", "not reached"),
                             ("gpu4", "not reached"), ("gpu5", "not reached")]
    assert gate in doc["hosts"][1]["reason"] and doc["finished"] is False
    assert "# reboot_verify: 1 done, 1 stopped, 3 not reached" in md
    assert re.search(r"^\| gpu2 \| stopped \| .*%s" % re.escape(gate), md, re.M)
    assert "| gpu4 | not reached |  |" in md
    # the console callback may fold long lines: compare with whitespace collapsed
    console = re.sub(r"\s+", " ", out.split("Show the rollout summary")[-1])
    assert "reboot_verify: 1 done, 1 stopped, 3 not reached" in console
    assert re.search(r"gpu2 +stopped: .*%s" % re.escape(gate), console)
    assert re.search(r"gpu5 +not reached", console)
    with open(os.path.join(fleet["reports"], "gpu2-reboot.json")) as handle:
        assert json.load(handle)["reboot"]["rebooted"] is False

    # host 2 fixed (headers and the DKMS build for the new kernel): the same command
    ready(roots["gpu2"])
    gpu1 = digest(roots["gpu1"])
    again = playbook(fleet, "reboot_verify", UPGRADE, "serial 1, resume")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    counts = recap(again.stdout)
    assert sorted(counts) == FLEET
    assert counts["gpu1"]["changed"] == 0, [x for x in out.splitlines() if "changed:" in x]
    assert digest(roots["gpu1"]) == gpu1
    for name in FLEET[1:]:
        assert counts[name]["failed"] == 0 and counts[name]["changed"] > 0, name
        with open(os.path.join(fleet["reports"], name + "-reboot.json")) as handle:
            report = json.load(handle)
        assert report["result"] == "passed", name
        assert report["reboot"]["note"].startswith("skipped: root "), report["reboot"]
    doc, md = rollout(fleet)
    assert statuses(doc) == [(name, "done") for name in FLEET] and doc["finished"] is True
    assert "# reboot_verify: 5 done, 0 stopped, 0 not reached" in md
    assert "reboot_verify: 5 done, 0 stopped, 0 not reached" in out


def test_serial_list_canary_then_batches(tmp_path):
    """gpuhost_serial [1, "50%"]: gpu1 alone, then gpu2+gpu3, then gpu4+gpu5. gpu2 fails
    its gate: its batch mate gpu3 still finishes, the next batch never starts."""
    fleet = make_fleet(tmp_path)
    before = dict((name, digest(root)) for name, root in fleet["roots"].items())
    proc = playbook(fleet, "reboot_verify", dict(UPGRADE, gpuhost_serial=[1, "50%"]),
                    "serial [1, 50%], host 2 stops")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    # one PLAY banner per batch: three batches would print three, this run stopped at two
    assert out.count("PLAY [Gated kernel upgrade") == 2
    counts = recap(proc.stdout)
    assert sorted(counts) == ["gpu1", "gpu2", "gpu3"]
    assert counts["gpu2"]["failed"] == 1 and counts["gpu3"]["failed"] == 0
    doc, _md = rollout(fleet)
    assert statuses(doc) == [("gpu1", "done"), ("gpu2", "stopped"), ("gpu3", "done"),
                             ("gpu4", "not reached"), ("gpu5", "not reached")]
    for name in ("gpu4", "gpu5"):
        assert digest(fleet["roots"][name]) == before[name], name


SETPCI_IGNORED = """#!/bin/sh
# setpci on a device that drops the write: exits 0 without a word, as the real one does
# when the device ignores it (the read-back shows the old value).
echo "$*" >> "$(dirname "$0")/setpci-calls.txt"
exit 0
"""


def test_tune_across_the_fleet_names_the_host_whose_mrrs_write_did_not_take(tmp_path):
    base = str(tmp_path)
    inventory = {"all": {"hosts": {}, "vars": {"ansible_connection": "local"}}}
    bad = "gpu3"
    tools = os.path.join(base, "ignoring-setpci")
    os.makedirs(tools)
    with open(os.path.join(tools, "setpci"), "w") as handle:
        handle.write(SETPCI_IGNORED)
    os.chmod(os.path.join(tools, "setpci"), 0o755)
    roots = {}
    for name in FLEET:
        root = os.path.join(base, name)
        hosts.seed_host(root)
        roots[name] = root
        entry = {"gpuhost_root": root}
        if name == bad:
            entry["gpuhost_tune_mrrs_method"] = "setpci"
            entry["ansible_python_interpreter"] = interpreter(base, name, root, [tools])
        else:
            entry["ansible_python_interpreter"] = VENV_PY
        inventory["all"]["hosts"][name] = entry
    path = os.path.join(base, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    fleet = {"base": base, "inventory": path, "reports": os.path.join(base, "reports")}
    proc = playbook(fleet, "tune", {}, "tune, 5 hosts, one ignores MRRS")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    counts = recap(proc.stdout)
    assert [counts[n]["failed"] for n in FLEET] == [0, 0, 1, 0, 0]
    with open(os.path.join(tools, "setpci-calls.txt")) as handle:
        assert len(handle.read().splitlines()) == 16  # 8 GPUs + 8 root ports, all tried
    failure = out.split("Fail the host")[-1]
    assert re.search(r"gpu3: pcie: Max Read Request Size not set on 16 of 16 devices", failure)
    for name in FLEET:
        with open(os.path.join(fleet["reports"], name + "-tune.json")) as handle:
            report = json.load(handle)
        mrrs = [r for r in report["rows"] if r["part"] == "pcie" and r["item"].endswith("MRRS")
                and r["item"] != "MRRS"]
        assert len(mrrs) == 16, name
        if name == bad:
            assert report["failures"] and all(r["status"] == "failed" for r in mrrs)
            assert all(r["after"] == 512 for r in mrrs)
        else:
            assert report["failures"] == [] and report["verified"] is True, name
            assert all(r["after"] == 4096 for r in mrrs), name
