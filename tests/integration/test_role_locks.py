"""Roles boot_config and kernel_upgrade run on their own hold the run lock (ansible-playbook
against a fixture tree, the proxmox-boot-tool double on PATH): refused naming the holder
while another run holds it, the tree left as it was; otherwise the lock is held, with the
run's token, while the boot loader is refreshed, and gone afterwards. Included by
reboot_verify they join its lock (test_reboot_verify.py's full path)."""

import json
import os
import subprocess

from digest import changed, digest
from fixtures import bootloader as fx
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
DOUBLES = os.path.join(REPO, "tests", "doubles")
COLLECTIONS = os.path.join(REPO, "tests", "output", "pathlink")
ESP_DIR = "/var/lib/gpuhost-doubles/esp"
LOCK = "run/gpuhost-tuning.run.lock"
HOLDER = {"controller": "ctl9", "user": "mallory", "play": "Another run",
          "purpose": "gpuhost.tuning.tune revert"}

SPY = """#!/bin/sh
# proxmox-boot-tool as the role calls it: note whether the run lock is there and which
# token the task carries, then the project's double does the work
if [ -f "$GPUHOST_DOUBLES_ROOT/run/gpuhost-tuning.run.lock" ]; then held=true; else held=false; fi
printf '{"held": %%s, "token": "%%s", "lock": %%s}\\n' "$held" "$GPUHOST_TUNING_RUN_LOCK" \\
  "$(cat "$GPUHOST_DOUBLES_ROOT/run/gpuhost-tuning.run.lock" 2>/dev/null || echo null)" \\
  >> "%(log)s"
exec "%(double)s" "$@"
"""


def _tree(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    for uuid in ("9B2E-4F1C", "9B2E-A7D3"):
        fx.pbt_esp(root, ESP_DIR, uuid, [hosts.SEED_RUNNING, hosts.SEED_NEW], hosts.PVE_CMDLINE)
    return root


def _play(tmp_path, root, role, extra=None):
    spy_dir = tmp_path / "spy"
    spy_dir.mkdir(exist_ok=True)
    spy = spy_dir / "proxmox-boot-tool"
    spy.write_text(SPY % {"log": tmp_path / "spy.jsonl",
                          "double": os.path.join(DOUBLES, "proxmox-boot-tool")})
    spy.chmod(0o755)
    playbook = tmp_path / ("%s.yml" % role)
    playbook.write_text("- name: %s on its own\n  hosts: all\n  gather_facts: false\n"
                        "  roles:\n    - role: gpuhost.tuning.%s\n" % (role, role))
    env = dict(os.environ)
    env.pop(run_lock.ENV_TOKEN, None)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "PATH": os.pathsep.join([str(spy_dir), DOUBLES, env.get("PATH", "")]),
        "GPUHOST_DOUBLES_ROOT": root,
        "GPUHOST_DOUBLES_LOG": str(tmp_path / "doubles.jsonl"),
        "GPUHOST_DOUBLES_RUNNING_KERNEL": hosts.SEED_RUNNING,
        "ANSIBLE_NOCOLOR": "1",
    })
    variables = {"ansible_python_interpreter": VENV_PY, "gpuhost_root": root,
                 "gpuhost_report_dir": str(tmp_path / "reports"),
                 "gpuhost_tree_commands": ["proxmox-boot-tool", "pct"],
                 "gpuhost_esp_dirs": [ESP_DIR]}
    variables.update(extra or {})
    proc = subprocess.run([PLAYBOOK, "-c", "local", "-i", "localhost,", str(playbook),
                           "-e", json.dumps(variables)],
                          env=env, capture_output=True, text=True, check=False,
                          cwd=str(tmp_path), timeout=300)
    spied = []
    if (tmp_path / "spy.jsonl").exists():
        spied = [json.loads(line) for line in (tmp_path / "spy.jsonl").read_text().splitlines()]
    return proc, spied


def _foreign(root):
    env_token = os.environ.pop(run_lock.ENV_TOKEN, None)
    try:
        return run_lock.acquire(root, HOLDER)
    finally:
        if env_token is not None:
            os.environ[run_lock.ENV_TOKEN] = env_token


def test_boot_config_on_its_own_is_refused_while_another_run_holds_the_lock(tmp_path):
    root = _tree(tmp_path)
    _foreign(root)
    before = digest(root)
    proc, spied = _play(tmp_path, root, "boot_config")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "TASK [gpuhost.tuning.boot_config : Take the run lock" in out
    assert "run by mallory from controller ctl9" in out, out[-3000:]
    assert "Kernel command line" not in out.split("Take the run lock", 1)[1].split("PLAY RECAP")[0]
    assert spied == []
    assert changed(before, digest(root)) == []


def test_boot_config_on_its_own_holds_the_lock_while_it_changes_the_boot_config(tmp_path):
    root = _tree(tmp_path)
    proc, spied = _play(tmp_path, root, "boot_config")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    with open(os.path.join(root, "etc/kernel/cmdline")) as handle:
        assert hosts.TUNED_PARAMS in handle.read()
    # proxmox-boot-tool refresh ran under the lock, with the lock's own token in its task
    assert spied, "proxmox-boot-tool was not called"
    for call in spied:
        assert call["held"] is True and call["token"] == call["lock"]["token"]
        assert call["lock"]["purpose"] == "gpuhost.tuning.boot_config"
    assert not os.path.exists(os.path.join(root, LOCK))


def test_kernel_upgrade_on_its_own_is_refused_while_another_run_holds_the_lock(tmp_path):
    root = _tree(tmp_path)
    _foreign(root)
    before = digest(root)
    proc, spied = _play(tmp_path, root, "kernel_upgrade",
                        {"gpuhost_kernel_version": hosts.SEED_NEW})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "TASK [gpuhost.tuning.kernel_upgrade : Take the run lock" in out
    assert "run by mallory from controller ctl9" in out, out[-3000:]
    assert changed(before, digest(root)) == []
