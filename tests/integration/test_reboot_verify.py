"""ansible-playbook gpuhost.tuning.reboot_verify against fixture trees (gpuhost_root), with
the proxmox-boot-tool and pct test doubles on PATH acting on the same tree.

The real reboot is the VM lab's; here: the DKMS/headers gate stops the play before any
pin or reboot, boot_config writes and proves the cmdline and modprobe file (idempotent,
check mode byte-identical), and the container step repairs 129.conf's stale majors.
"""

import json
import os
import subprocess

import fakecuda
from fixtures import bootloader as fx
from fixtures import dkms, hosts, lxc, nvhealth, pci

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
DOUBLES = os.path.join(REPO, "tests", "doubles")
ESP_DIR = "/var/lib/gpuhost-doubles/esp"
UUIDS = ("9B2E-4F1C", "9B2E-A7D3")
OLD, NEW = hosts.SEED_RUNNING, hosts.SEED_NEW
TREE_COMMANDS = ["proxmox-boot-tool", "pct"]


# The live checkout through the link tests/conftest.py keeps (tests/output/pathlink):
# `make collection` reinstalls ./collections with rmtree, which races with plays of other
# test processes reading it.
COLLECTIONS = os.path.join(REPO, "tests", "output", "pathlink")


def _esps(root, cmdline=hosts.PVE_CMDLINE):
    for uuid in UUIDS:
        fx.pbt_esp(root, ESP_DIR, uuid, [OLD, NEW], cmdline)


def seed(tmp_path):
    """The seed host (8 GPUs, Proxmox): new kernel without headers or DKMS build."""
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    _esps(root)
    return root


def ready(tmp_path):
    """The seed host once headers and the DKMS build for the new kernel are there."""
    root = seed(tmp_path)
    dkms.kernel_tree(root, NEW, headers=True)
    dkms.dkms_tree(root, "nvidia", hosts.SEED_NVIDIA, installed=[OLD, NEW])
    return root


def play(tmp_path, root, extra=None, check=False):
    log = str(tmp_path / "doubles.jsonl")
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "PATH": DOUBLES + os.pathsep + env.get("PATH", ""),
        "GPUHOST_DOUBLES_ROOT": root,
        "GPUHOST_DOUBLES_LOG": log,
        "GPUHOST_DOUBLES_RUNNING_KERNEL": OLD,
        "ANSIBLE_NOCOLOR": "1",
    })
    variables = {
        "ansible_python_interpreter": VENV_PY,
        "gpuhost_root": root,
        "gpuhost_report_dir": str(tmp_path / "reports"),
        "gpuhost_tree_commands": TREE_COMMANDS,
        "gpuhost_esp_dirs": [ESP_DIR],
        # the seed host is untuned: only the checks a reboot would settle (pending here)
        "gpuhost_reboot_verify_checks": ["kernel", "cmdline", "module_params"],
    }
    variables.update(extra or {})
    args = [PLAYBOOK, "-c", "local", "-i", "localhost,", "gpuhost.tuning.reboot_verify",
            "-e", json.dumps(variables)]
    if check:
        args.append("--check")
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False,
                          cwd=str(tmp_path))
    calls = []
    if os.path.exists(log):
        with open(log) as handle:
            calls = [json.loads(line)["argv"] for line in handle if line.strip()]
    report = None
    path = tmp_path / "reports" / "localhost-reboot.json"
    if path.exists():
        report = json.loads(path.read_text())
    return proc, calls, report


def recap(output):
    line = [x for x in output.splitlines() if x.startswith("localhost ") and "ok=" in x][-1]
    return dict(part.split("=") for part in line.split()[2:])


def test_gate_headers_missing_stops_before_pin_and_reboot(tmp_path):
    root = seed(tmp_path)
    proc, calls, report = play(tmp_path, root, {
        "gpuhost_reboot_verify_kernel_upgrade": True, "gpuhost_kernel_version": NEW,
        "gpuhost_trial_boot": True, "gpuhost_reboot_verify_reboot": True})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "headers for kernel %s not found" % NEW in out
    assert "install proxmox-headers-%s" % NEW in out
    # the doubles were wired (pre-flight listed the containers) but nothing was pinned
    assert ["pct", "list"] in calls
    assert not any(c[:3] == ["proxmox-boot-tool", "kernel", "pin"] for c in calls), calls
    assert not any(c[:2] == ["proxmox-boot-tool", "refresh"] for c in calls), calls
    assert "TASK [gpuhost.tuning.reboot_verify : Reboot into" not in out
    assert "Gate: headers for the target kernel are installed" in out
    assert report["result"] == "failed" and "proxmox-headers-%s" % NEW in report["failure"]
    assert report["reboot"]["rebooted"] is False
    assert recap(out)["failed"] == "1"
    # the dangerous next boot was not made: no pin files
    assert not os.path.exists(os.path.join(root, "etc/kernel/next-boot-pin"))


def test_preflight_fails_on_the_dkms_gap_when_no_upgrade_is_asked(tmp_path):
    root = seed(tmp_path)
    # the name before 0.2.0 still works, with a deprecation warning
    proc, calls, report = play(tmp_path, root, {"gpuhost_reboot": True})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "[DEPRECATION WARNING] gpuhost_reboot is renamed gpuhost_reboot_verify_reboot" in out
    assert report["asked"]["reboot"] is True
    assert "pre-flight: critical findings dkms_missing_for_kernel %s" % NEW in out
    # the way out names this play's own switch, not a second run of the same playbook
    assert "-e gpuhost_reboot_verify_kernel_upgrade=true -e gpuhost_kernel_version=%s" % NEW \
        in report["failure"]
    assert "ansible-playbook gpuhost.tuning.reboot_verify" not in report["failure"]
    assert not any(c[0] == "proxmox-boot-tool" for c in calls), calls
    assert report["result"] == "failed" and report["boot_config"] is None


def test_preflight_stops_on_a_fabric_manager_of_another_version(tmp_path):
    """An NVSwitch host whose Fabric Manager (570) is not the driver's (590): after a reboot
    CUDA could not use the GPUs, so the pre-flight stops before anything is changed."""
    root = ready(tmp_path)
    for address in ("0000:c1:00.0", "0000:c2:00.0"):
        pci.add_function(root, address, "pci0000:80",
                         pci.plain_config(0x10DE, 0x22A3, 0x068000, 0xA1),
                         driver="nvidia-nvswitch", numa_node=1)
    nvhealth.dpkg_status(root, [("nvidia-fabricmanager-570", "570.86.15-1")])
    proc, calls, report = play(tmp_path, root, {"gpuhost_reboot_verify_reboot": True})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "pre-flight: fabric_manager: fabric manager 570.86.15, driver %s" \
        % hosts.SEED_NVIDIA in out
    assert "install nvidia-fabricmanager %s" % hosts.SEED_NVIDIA in report["failure"]
    assert not any(c[0] == "proxmox-boot-tool" and c[1] != "status" for c in calls), calls
    assert report["result"] == "failed" and report["reboot"]["rebooted"] is False


def test_upgrade_trial_pin_boot_config_and_containers(tmp_path):
    root = ready(tmp_path)
    conf = os.path.join(root, "etc/pve/lxc/129.conf")
    proc, calls, report = play(tmp_path, root, {
        "gpuhost_reboot_verify_kernel_upgrade": True, "gpuhost_kernel_version": NEW,
        "gpuhost_trial_boot": True})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # the audits name their options (the one templated args dict they took made ansible-core
    # warn on each of them)
    assert "Using a template for task args" not in out
    assert ["proxmox-boot-tool", "kernel", "pin", NEW, "--next-boot"] in calls
    assert ["proxmox-boot-tool", "refresh"] in calls
    # cmdline and modprobe file written under the root, entries on both ESPs carry them
    with open(os.path.join(root, "etc/kernel/cmdline")) as handle:
        assert handle.read() == hosts.PVE_CMDLINE + " " + hosts.TUNED_PARAMS + "\n"
    with open(os.path.join(root, "etc/modprobe.d/gpuhost-nvidia-uvm.conf")) as handle:
        assert "options nvidia_uvm uvm_disable_hmm=1\n" in handle.read()
    for uuid in UUIDS:
        entry = os.path.join(root, ESP_DIR.lstrip("/"), uuid,
                             "loader/entries/proxmox-%s.conf" % NEW)
        with open(entry) as handle:
            assert hosts.TUNED_PARAMS in handle.read()
        with open(os.path.join(root, ESP_DIR.lstrip("/"), uuid, "loader/loader.conf")) as h:
            assert "default proxmox-%s.conf" % NEW in h.read()
    # 129.conf: the old majors 504/507 replaced by the current ones; 130 (onboot) started
    with open(conf) as handle:
        text = handle.read()
    live = text.split("\n[", 1)[0]
    assert "c 504:* rwm" not in live and "c 509:* rwm" in live
    assert ["pct", "start", "130"] in calls
    assert ["pct", "stop", "129"] not in calls  # it was not running
    assert report["result"] == "passed"
    assert report["upgrade"]["next_boot_commands"][0].endswith("--next-boot")
    ct129 = [c for c in report["containers"] if c["vmid"] == 129][0]
    assert "c 504:* rwm" in ct129["rules_removed"]
    assert {c["name"]: c["status"] for c in report["checks"]}["cmdline"] == "pending"
    assert report["reboot"]["required"] is True and report["reboot"]["rebooted"] is False
    md = (tmp_path / "reports" / "localhost-reboot.md").read_text()
    assert "reboot_verify PASSED" in md and "| 129 |" in md

    # second run: nothing left to change
    proc2, calls2, _report = play(tmp_path, root, {
        "gpuhost_reboot_verify_kernel_upgrade": True, "gpuhost_kernel_version": NEW,
        "gpuhost_trial_boot": True})
    out2 = proc2.stdout + proc2.stderr
    assert proc2.returncode == 0, out2[-3000:]
    assert recap(out2)["changed"] == "0", [x for x in out2.splitlines() if "changed:" in x]
    assert len(calls2) > len(calls)
    assert not any(c[:2] in (["proxmox-boot-tool", "refresh"], ["pct", "start"])
                   for c in calls2[len(calls):])


def test_check_mode_leaves_the_tree_byte_identical(tmp_path, snapshot_tree):
    root = ready(tmp_path)
    before = snapshot_tree(root)
    proc, calls, report = play(tmp_path, root, {
        "gpuhost_reboot_verify_kernel_upgrade": True, "gpuhost_kernel_version": NEW}, check=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert snapshot_tree(root) == before
    assert not any(c[1] in ("refresh", "kernel", "start", "stop") for c in calls), calls
    assert report["boot_config"]["cmdline_changed"] is True  # what it would do


def _ct129_running(root, config_text=None, **cuda):
    """129 ran before the reboot, its containers see the stand-in libcuda.so.1 (behaving as
    ``cuda`` says: fakecuda settings)."""
    if config_text is not None:
        lxc.write_config(root, 129, config_text)
    state = os.path.join(root, "var/lib/gpuhost-doubles")
    os.makedirs(state, exist_ok=True)
    with open(os.path.join(state, "pct.json"), "w") as handle:
        json.dump({"containers": {"129": {"status": "running"}},
                   "cuda_env": fakecuda.pct_cuda_env(**cuda)}, handle)


UPGRADE = {"gpuhost_reboot_verify_kernel_upgrade": True, "gpuhost_kernel_version": NEW,
           "gpuhost_trial_boot": True}


def test_cuda_proved_by_default_in_the_repaired_running_container(tmp_path):
    root = ready(tmp_path)
    _ct129_running(root)
    proc, calls, report = play(tmp_path, root, UPGRADE)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    probes = [c for c in calls if c[:2] == ["pct", "exec"] and c[4:6] == ["python3", "-"]]
    assert [c[2] for c in probes] == ["129"]
    ct129 = [c for c in report["containers"] if c["vmid"] == 129][0]
    assert ct129["stopped"] and ct129["started"] and ct129["problems"] == []
    assert ct129["cuda"]["code"] == 0 and ct129["cuda"]["devices"] == 1
    md = (tmp_path / "reports" / "localhost-reboot.md").read_text()
    assert "- CT 129: cuInit 0 CUDA_SUCCESS, 1 GPU(s)" in md


def test_container_whose_cuda_fails_fails_the_host_naming_container_code_and_cause(tmp_path):
    """The rules are repaired, but 129 lost its /dev/nvidia-uvm bind mount: nvidia-smi -L
    lists the GPUs, CUDA dies with 999. The old check (nvidia-smi only) passed this host."""
    root = ready(tmp_path)
    _ct129_running(root, lxc.container_129_text("before").replace(
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n",
        ""))
    proc, _calls, report = play(tmp_path, root, UPGRADE)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    assert report["result"] == "failed"
    assert report["failure"].startswith("Gate: every GPU container is right: containers "
                                        "failed: 129: CUDA: cuInit(0) returned 999 "
                                        "CUDA_ERROR_UNKNOWN (unknown error); cause: ")
    assert "lxc_cgroup_devices" in report["failure"]
    ct129 = [c for c in report["containers"] if c["vmid"] == 129][0]
    assert ct129["gpu_check"] == 0 and ct129["gpus"] == 8        # nvidia-smi was fine
    assert ct129["cuda"]["name"] == "CUDA_ERROR_UNKNOWN"
    md = (tmp_path / "reports" / "localhost-reboot.md").read_text()
    assert "- CT 129: cuInit 999 CUDA_ERROR_UNKNOWN, 0 GPU(s): cuInit(0) returned 999" in md

    # the switch turns the built-in check off: the same host passes on nvidia-smi alone
    proc, _calls, report = play(tmp_path, root, dict(UPGRADE, gpuhost_reboot_verify_cuda=False))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert [c for c in report["containers"] if c["vmid"] == 129][0]["cuda"] is None


def test_container_whose_cuinit_never_returns_fails_the_host_within_the_limit(tmp_path):
    """A driver whose cuInit hangs inside 129 (a GPU fallen off the bus): the probe is
    killed at gpuhost_reboot_verify_cuda_timeout and the host fails naming the container,
    the limit and the step, with its report written; before issue 22 the play hung."""
    root = ready(tmp_path)
    _ct129_running(root, hang="cuInit")
    proc, _calls, report = play(tmp_path, root, dict(
        UPGRADE, gpuhost_reboot_verify_cuda_timeout=2))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    assert report["result"] == "failed"
    assert report["failure"].startswith(
        "Gate: every GPU container is right: containers failed: 129: CUDA: pct exec 129 -- "
        "python3 - did not return in 2 s (in step: cuInit): killed; cause: the driver did not "
        "answer")
    ct129 = [c for c in report["containers"] if c["vmid"] == 129][0]
    assert ct129["cuda"]["timed_out"] is True and ct129["cuda"]["step"] == "cuInit"
