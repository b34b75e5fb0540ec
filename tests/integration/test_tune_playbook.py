"""The tune and revert playbooks run for real (ansible-playbook, local connection) against
whole host trees: the seed host (every problem the collection fixes), an H200 VM, and a seed
host whose kernel ignores one sysctl write. Durations are measured and printed."""

import json
import os
import stat
import re
import subprocess
import time

import platforms
import pytest
import yaml
from conftest import install_collection, tree_snapshot
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu as cpu_mod

# One pytest-xdist worker runs this whole file (--dist loadgroup):
# its tests share one collection copy and one podman container name.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("tune_playbook")]
# The live tests start a container of the suite's test image (Debian 12 or 13: Python 3.11
# or 3.13 for the modules and the boot-time program, systemd 252 or 257) and drive it from
# here (tests/integration/conftest.py).
DRIVES_IMAGE = True

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv/bin/python")
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")
MANAGED = ("pcie_mrrs", "numa_balancing", "cpuidle_deep_state", "sysctl")
UNIT = "etc/systemd/system/gpuhost-tuning.service"
LINK = "etc/systemd/system/multi-user.target.wants/gpuhost-tuning.service"
CONF = "etc/sysctl.d/99-gpuhost-tuning.conf"
DURATIONS = {}

with open(os.path.join(REPO, "roles/common/defaults/main.yml")) as _handle:
    COMMON = yaml.safe_load(_handle)
WANTED = {"gpu_vendor": COMMON["gpuhost_gpu_vendor"], "gpu_classes": COMMON["gpuhost_gpu_classes"],
          "mrrs_size": COMMON["gpuhost_mrrs_size"],
          "cpuidle_deeper_than": COMMON["gpuhost_cpuidle_deeper_than"],
          "sysctl": COMMON["gpuhost_sysctl"]}


# Where the collection under test is installed: ./collections by `make collection`, then a
# private copy of it for this module's runs (other test modules reinstall ./collections with
# --force, which would pull files from under a playbook running at the same time).
COLLECTIONS = {"path": os.path.join(REPO, "collections")}


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS["path"]
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


def playbook(name, root, reports, *args, label=None):
    cmd = [PLAYBOOK, "gpuhost.tuning.%s" % name, "-c", "local", "-i", "localhost,",
           "-e", "ansible_python_interpreter=%s" % VENV_PY, "-e", "gpuhost_root=%s" % root,
           "-e", "gpuhost_report_dir=%s" % reports] + list(args)
    started = time.time()
    proc = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=600, check=False)
    DURATIONS[label or name] = round(time.time() - started, 1)
    return proc


def recap(output):
    line = output.split("PLAY RECAP")[-1].strip().splitlines()[1]
    return dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", line))


def managed_findings(root):
    result = audit.audit(root, WANTED)
    return [f for f in result["findings"] if f["id"] in MANAGED]


def pci_configs(root):
    out = {}
    for folder, _dirs, files in os.walk(os.path.join(root, "sys/devices")):
        if "config" in files:
            with open(os.path.join(folder, "config"), "rb") as handle:
                out[os.path.relpath(folder, root)] = handle.read()
    return out


def sysctl_files(root):
    out = {}
    for folder, _dirs, files in os.walk(os.path.join(root, "proc/sys")):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                out[os.path.relpath(os.path.join(folder, name), root)] = handle.read()
    return out


def idle_flags(root):
    return dict(((cpu, s["name"]), s["disabled"])
                for cpu, states in cpu_mod.read_states(root).items() for s in states)


@pytest.fixture(scope="module", autouse=True)
def collection(tmp_path_factory):
    install_collection(_env())
    private = str(tmp_path_factory.mktemp("collections"))
    subprocess.run([os.path.join(REPO, ".venv/bin/ansible-galaxy"), "collection", "install",
                    "--force", "-p", private, REPO], check=True, env=_env(),
                   capture_output=True, timeout=300)
    COLLECTIONS["path"] = private
    yield
    print("\ntune playbook durations (s): %s" % json.dumps(DURATIONS, sort_keys=True))


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "seed")
    built = hosts.seed_host(root)
    return root, built, str(tmp_path / "reports")


def test_tune_fixes_persists_is_idempotent_and_revert_restores_exactly(seed):
    root, built, reports = seed
    configs, sysctls, idle = pci_configs(root), sysctl_files(root), idle_flags(root)
    assert {f["id"] for f in managed_findings(root)} == set(MANAGED)

    first = playbook("tune", root, reports, label="tune (seed, first run)")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr
    assert recap(first.stdout)["changed"] > 0 and recap(first.stdout)["failed"] == 0
    assert managed_findings(root) == []
    # persisted sysctls: exactly the wanted values
    with open(os.path.join(root, CONF)) as handle:
        lines = [line for line in handle.read().splitlines() if line and line[0] != "#"]
    assert sorted(lines) == sorted("%s = %s" % kv for kv in COMMON["gpuhost_sysctl"].items())
    # the unit, its ordering and the wants link
    with open(os.path.join(root, UNIT)) as handle:
        unit = handle.read().splitlines()
    for line in ("Type=oneshot", "RemainAfterExit=yes", "After=nvidia-persistenced.service",
                 "Before=pve-guests.service", "WantedBy=multi-user.target"):
        assert line in unit
    assert os.readlink(os.path.join(root, LINK)) == "/" + UNIT
    # live-only commands reported as skipped, nvidia_peermem not applicable
    assert "systemctl start gpuhost-tuning.service: skipped" in first.stdout
    assert "not applicable" in first.stdout and "ib_core is not available" in first.stdout
    # the report, printed and on the controller
    with open(os.path.join(reports, "localhost-tune.json")) as handle:
        report = json.load(handle)
    rows = dict(((r["part"], r["item"]), r) for r in report["rows"])
    gpu = built["gpus"][0]
    assert rows[("pcie", gpu + " endpoint MRRS")]["before"] == 512
    assert rows[("pcie", gpu + " endpoint MRRS")]["after"] == 4096
    assert rows[("sysctl", "kernel.numa_balancing")]["before"] == "1"
    assert rows[("sysctl", "kernel.numa_balancing")]["after"] == "0"
    assert rows[("cpuidle", "C2 (800 us)")]["after"] == "disabled on CPUs 0-127"
    assert report["failures"] == [] and report["findings_after"] == []
    assert len(report["findings_before"]) >= 26  # 16 MRRS, C2, numa_balancing, 8 sysctls
    with open(os.path.join(reports, "localhost-tune.md")) as handle:
        markdown = handle.read()
    assert "| pcie | %s endpoint MRRS | 512 | 4096 | changed |" % gpu in markdown
    assert "| sysctl | kernel.numa_balancing | 1 | 0 | changed |" in markdown
    assert os.path.isfile(os.path.join(root, "var/lib/gpuhost/original.json"))

    second = playbook("tune", root, reports, label="tune (seed, second run)")
    assert second.returncode == 0, second.stdout[-3000:]
    assert recap(second.stdout)["changed"] == 0, second.stdout[-3000:]
    assert sorted(os.listdir(os.path.join(root, "var/lib/gpuhost"))) == [
        "applied.json", "original.json"]

    tuned = tree_snapshot(root)
    check = playbook("revert", root, reports, "--check", "--diff", label="revert --check (seed)")
    assert check.returncode == 0, check.stdout[-3000:]
    assert "+MRRS %s: 512" % built["gpus"][0] in check.stdout
    assert tree_snapshot(root) == tuned

    revert = playbook("revert", root, reports, label="revert (seed)")
    assert revert.returncode == 0, revert.stdout[-4000:] + revert.stderr
    assert recap(revert.stdout)["changed"] > 0
    assert pci_configs(root) == configs  # every config space byte as the fixture had it
    assert sysctl_files(root) == sysctls
    assert idle_flags(root) == idle
    for rel in (CONF, UNIT, LINK, "etc/gpuhost-tuning", "usr/local/lib/gpuhost-tuning"):
        assert not os.path.lexists(os.path.join(root, rel)), rel
    assert {f["id"] for f in managed_findings(root)} == set(MANAGED)
    again = playbook("revert", root, reports, label="revert (seed, again)")
    assert again.returncode == 0 and recap(again.stdout)["changed"] == 0, again.stdout[-3000:]


def test_check_mode_on_a_fresh_tree_changes_nothing(seed):
    root, _built, reports = seed
    before = tree_snapshot(root)
    proc = playbook("tune", root, reports, "--check", "--diff", label="tune --check --diff")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    assert tree_snapshot(root) == before
    out = proc.stdout
    assert "+kernel.numa_balancing = 0" in out  # the sysctl.d file
    assert "+RemainAfterExit=yes" in out  # the unit
    assert '+  "cpuidle": {' in out  # the boot config
    assert "-kernel.numa_balancing = 1" in out  # the live value
    assert "Max Read Request Size (bytes)" in out and "endpoint: 4096" in out
    with open(os.path.join(reports, "localhost-tune.md")) as handle:
        assert "check mode: planned, nothing changed" in handle.read()


def test_an_unreadable_key_fails_the_host_after_everything_else(seed):
    root, built, reports = seed
    key = os.path.join(root, "proc/sys/kernel/nmi_watchdog")
    os.unlink(key)
    # A device where the tree should hold the key (what tar -x of a capture recreates): the
    # reading layer never opens it, so this key alone fails and every other part is done.
    # (A link to the real /dev/null once stood for a key the kernel ignores; links now
    # resolve inside the root, and a live kernel's key is a regular procfs file.)
    os.mknod(key, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    proc = playbook("tune", root, reports, label="tune (one sysctl a device node)")
    assert proc.returncode != 0
    counts = recap(proc.stdout)
    assert counts["failed"] == 1 and counts["ignored"] >= 1
    assert "kernel.nmi_watchdog" in proc.stdout.split("Fail the host")[-1]
    # everything else was done; the audit names the file it would not read
    assert managed_findings(root) == []
    errors = audit.audit(root, WANTED)["errors"]
    assert any("nmi_watchdog: a character device, not a regular file" in str(e)
               for e in errors), errors
    with open(os.path.join(reports, "localhost-tune.json")) as handle:
        report = json.load(handle)
    assert any("kernel.nmi_watchdog" in f for f in report["failures"])
    rows = dict(((r["part"], r["item"]), r) for r in report["rows"])
    assert rows[("sysctl", "kernel.nmi_watchdog")]["status"] == "failed"
    assert rows[("pcie", built["gpus"][7] + " endpoint MRRS")]["after"] == 4096


def test_tags_select_parts_of_the_one_module_call(seed):
    root, built, reports = seed
    gpu = built["gpus"][0]
    proc = playbook("tune", root, reports, "--skip-tags", "tune_pcie,tune_boot_service",
                    label="tune --skip-tags tune_pcie,tune_boot_service")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    with open(os.path.join(reports, "localhost-tune.json")) as handle:
        rows = dict(((r["part"], r["item"]), r) for r in json.load(handle)["rows"])
    assert rows[("pcie", "MRRS")]["status"] == "off"
    assert rows[("boot_service", "gpuhost-tuning.service")]["status"] == "off"
    assert rows[("sysctl", "kernel.numa_balancing")]["status"] == "changed"
    assert [f["id"] for f in managed_findings(root)] == ["pcie_mrrs"] * 16
    assert not os.path.exists(os.path.join(root, UNIT))
    only = playbook("tune", root, reports, "--tags", "tune_pcie,tune_report",
                    label="tune --tags tune_pcie,tune_report")
    assert only.returncode == 0, only.stdout[-4000:] + only.stderr
    with open(os.path.join(reports, "localhost-tune.json")) as handle:
        rows = dict(((r["part"], r["item"]), r) for r in json.load(handle)["rows"])
    assert rows[("pcie", gpu + " endpoint MRRS")]["status"] == "changed"
    assert rows[("sysctl", "(all)")]["status"] == "off"
    assert managed_findings(root) == []


def test_vm_without_cpuidle_or_numa_balancing(tmp_path):
    root = str(tmp_path / "vm")
    built = hosts.vm_host(root)
    reports = str(tmp_path / "reports")
    # a GPU VM guest tuned on purpose: the roles refuse a guest unless told
    proc = playbook("tune", root, reports, "-e", "gpuhost_allow_guest=true",
                    label="tune (H200 VM)")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    with open(os.path.join(reports, "localhost-tune.json")) as handle:
        report = json.load(handle)
    rows = dict(((r["part"], r["item"]), r) for r in report["rows"])
    assert rows[("cpuidle", "deeper than C1")]["status"] == "not applicable"
    numa = rows[("sysctl", "kernel.numa_balancing")]
    assert numa["status"] == "skipped" and "no such key" in numa["note"]
    assert rows[("pcie", built["gpu"] + " endpoint MRRS")]["status"] == "ok"
    assert managed_findings(root) == []
    again = playbook("tune", root, reports, "-e", "gpuhost_allow_guest=true",
                     label="tune (H200 VM, second run)")
    assert recap(again.stdout)["changed"] == 0, again.stdout[-3000:]


# ---------------------------------------------------------------------------------------
# a live host: systemd as PID 1 in a podman container (read-only /proc/sys and /sys, as in
# an LXC container), reached through the containers.podman connection


CONTAINERS_CONF = os.path.join(REPO, "molecule/shared/containers.conf")


def _podman(*args, check=True, timeout=120):
    env = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF)
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, env=env,
                          check=check, timeout=timeout)


@pytest.fixture
def live_container(suite):
    # under make test (GPUHOST_TEST_STRICT) the Makefile installed podman and built the
    # images, so a missing one is a failure, never a silent skip
    platforms.require_image(suite)
    image = platforms.image(suite)
    name = "gpuhost-tune-%s-%d" % (suite, os.getpid())
    _podman("rm", "-f", name, check=False)
    _podman("run", "-d", "--name", name, "--hostname", name, "--systemd=always",
            "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", image, "/sbin/init")
    try:
        _wait_for_systemd(name)
        yield name
    finally:
        _podman("rm", "-f", name, check=False)


def _wait_for_systemd(name):
    for _attempt in range(60):
        state = _podman("exec", name, "systemctl", "is-system-running", "--wait", check=False)
        if state.stdout.strip() in ("running", "degraded"):
            return
        time.sleep(1)
    raise AssertionError("systemd did not come up in %s: %s" % (name, state.stdout))


def in_container(name, command):
    return _podman("exec", name, "sh", "-c", command, check=False).stdout.strip()


def live_playbook(name, container, reports, *args, label=None):
    env = _env()
    env["CONTAINERS_CONF"] = CONTAINERS_CONF
    cmd = [PLAYBOOK, "gpuhost.tuning.%s" % name, "-c", "containers.podman.podman",
           "-i", "%s," % container, "-e", "ansible_python_interpreter=/usr/bin/python3",
           # the podman container stands in for a node: a guest the roles refuse untold
           "-e", "gpuhost_allow_guest=true",
           "-e", "gpuhost_report_dir=%s" % reports] + list(args)
    started = time.time()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    DURATIONS[label or name] = round(time.time() - started, 1)
    return proc


def test_live_systemd_host_service_runs_now_and_at_boot_then_revert(suite, live_container,
                                                                    tmp_path):
    name = live_container
    # the host's own Python runs the modules and the boot-time program (bootapply)
    assert in_container(name, "python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'") \
        == {"bookworm": "3.11", "trixie": "3.13"}[suite]
    reports = str(tmp_path / "reports")
    first = live_playbook("tune", name, reports, label="tune (live systemd container)")
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr
    # the unit was enabled and started by systemctl, and its run is in the journal
    assert in_container(name, "systemctl is-enabled gpuhost-tuning.service") == "enabled"
    assert in_container(name, "systemctl is-active gpuhost-tuning.service") == "active"
    journal = in_container(name, "journalctl -u gpuhost-tuning.service -o cat --no-pager")
    assert "gpuhost-tuning: done: settings applied and read back" in journal
    with open(os.path.join(reports, "%s-tune.json" % name)) as handle:
        report = json.load(handle)
    rows = dict(((r["part"], r["item"]), r) for r in report["rows"])
    # /proc/sys is read-only in the container: skipped with the reason, not a failure
    swappiness = rows[("sysctl", "vm.swappiness")]
    assert swappiness["status"] == "skipped" and "Read-only file system" in swappiness["note"]
    assert "systemctl start gpuhost-tuning.service: run" in rows[
        ("boot_service", "gpuhost-tuning.service")]["note"]

    second = live_playbook("tune", name, reports, label="tune (live, second run)")
    assert second.returncode == 0 and recap(second.stdout)["changed"] == 0, second.stdout[-4000:]

    # a reboot: systemd starts the unit by itself (multi-user.target wants it)
    _podman("restart", name)
    _wait_for_systemd(name)
    assert in_container(name, "systemctl is-active gpuhost-tuning.service") == "active"
    assert "done: settings applied and read back" in in_container(
        name, "journalctl -b -u gpuhost-tuning.service -o cat --no-pager")

    revert = live_playbook("revert", name, reports, label="revert (live)")
    assert revert.returncode == 0, revert.stdout[-5000:] + revert.stderr
    enabled = in_container(name, "systemctl is-enabled gpuhost-tuning.service 2>&1; true")
    assert "No such file or directory" in enabled or enabled == "not-found", enabled
    assert in_container(name, "ls /etc/systemd/system/gpuhost-tuning.service "
                              "/usr/local/lib/gpuhost-tuning /etc/gpuhost-tuning "
                              "/etc/sysctl.d/99-gpuhost-tuning.conf 2>/dev/null; true") == ""
    assert in_container(name, "systemctl is-active gpuhost-tuning.service; true") in (
        "inactive", "unknown")


def test_live_unit_failing_at_start_fails_the_task_with_its_journal(live_container):
    name = live_container
    states = in_container(name, "cat /sys/devices/system/cpu/cpu0/cpuidle/state*/name")
    if len(states.splitlines()) < 2:
        pytest.skip("no idle state deeper than POLL on this machine (%r)" % states)
    env = _env()
    env["CONTAINERS_CONF"] = CONTAINERS_CONF
    # /sys is read-only in the container: the unit cannot disable the state deeper than POLL
    proc = subprocess.run(
        [os.path.join(REPO, ".venv/bin/ansible"), "all", "-c", "containers.podman.podman",
         "-i", "%s," % name, "-e", "ansible_python_interpreter=/usr/bin/python3",
         "-m", "gpuhost.tuning.boot_service", "-a", "cpuidle_deeper_than=POLL"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode != 0
    assert "systemctl start gpuhost-tuning.service exited 1" in proc.stdout
    assert "Read-only file system" in proc.stdout  # the unit's own journal lines
    assert "FAILED on cpuidle states deeper than POLL" in proc.stdout
    assert in_container(name, "systemctl is-active gpuhost-tuning.service; true") == "failed"


def test_fleet_of_three_hosts_in_one_run(tmp_path):
    """Seed host, tuned host and VM in one inventory: per-host results and reports, the
    tuned host's larger wmem_max kept, then a check-mode run over the tuned fleet changes
    nothing."""
    roots = {}
    for name, build in (("seed", hosts.seed_host), ("tuned", hosts.tuned_host),
                        ("vm", hosts.vm_host)):
        roots[name] = str(tmp_path / name)
        build(roots[name])
    inventory = str(tmp_path / "inventory.ini")
    with open(inventory, "w") as handle:
        handle.write("[gpuhosts]\n")
        for name, root in roots.items():
            # the VM is a GPU VM guest tuned on purpose
            handle.write("%s gpuhost_root=%s%s\n" % (
                name, root, " gpuhost_allow_guest=true" if name == "vm" else ""))
        handle.write("\n[all:vars]\nansible_connection=local\nansible_python_interpreter=%s\n"
                     % VENV_PY)
    reports = str(tmp_path / "reports")

    def fleet(*args, label):
        started = time.time()
        proc = subprocess.run(
            [PLAYBOOK, "gpuhost.tuning.tune", "-i", inventory, "-f", "3",
             "-e", "gpuhost_report_dir=%s" % reports] + list(args),
            cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600, check=False)
        DURATIONS[label] = round(time.time() - started, 1)
        return proc

    proc = fleet(label="tune (fleet of 3, first run)")
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr
    lines = proc.stdout.split("PLAY RECAP")[-1]
    for name in roots:
        assert re.search(r"^%s\s+:.*failed=0" % name, lines, re.M), lines
        assert os.path.isfile(os.path.join(reports, "%s-tune.md" % name))
        assert managed_findings(roots[name]) == [], name
    with open(os.path.join(roots["tuned"], "proc/sys/net/core/wmem_max")) as handle:
        assert handle.read().strip() == "33554432"  # at least 16 MiB: kept, not lowered
    check = fleet("--check", label="tune --check (fleet of 3, tuned)")
    assert check.returncode == 0, check.stdout[-3000:]
    assert not re.search(r"changed=[1-9]", check.stdout.split("PLAY RECAP")[-1]), check.stdout[
        -3000:]


def test_infiniband_host_gets_nvidia_peermem_at_boot_and_revert_removes_it(seed):
    root, _built, reports = seed
    from fixtures import procsys
    procsys.proc_modules(root, procsys.SEED_MODULES + [("ib_core", 471040, 2, "-")])
    ko = os.path.join(root, "lib/modules", hosts.SEED_RUNNING, "updates/dkms/nvidia-peermem.ko")
    if not os.path.exists(ko):
        os.makedirs(os.path.dirname(ko), exist_ok=True)
        with open(ko, "wb") as handle:
            handle.write(b"\x7fELF")
    conf = os.path.join(root, "etc/modules-load.d/gpuhost-nvidia-peermem.conf")
    proc = playbook("tune", root, reports, label="tune (seed with InfiniBand)")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    with open(conf) as handle:
        assert "nvidia_peermem" in handle.read().splitlines()
    with open(os.path.join(reports, "localhost-tune.json")) as handle:
        rows = dict(((r["part"], r["item"]), r) for r in json.load(handle)["rows"])
    peer = rows[("nvidia_peermem", "nvidia_peermem")]
    assert peer["status"] == "skipped" and "not the live host" in peer["note"]  # no modprobe
    revert = playbook("revert", root, reports, label="revert (seed with InfiniBand)")
    assert revert.returncode == 0, revert.stdout[-4000:]
    assert not os.path.exists(conf)


def test_a_wrong_value_on_one_host_stops_the_play_before_anything_ran(tmp_path):
    """The playbook checks every host's values against role tune's argument spec in one step
    (role common's role_arguments.yml, ansible-core's validator): a wrong type on one host and
    a value outside the choices on another name both hosts and their variables, and no host
    was tuned (trees byte-identical, no report); the same fleet with good values runs."""
    roots = {}
    for name in ("gpu1", "gpu2", "gpu3"):
        roots[name] = str(tmp_path / name)
        hosts.seed_host(roots[name])
    before = {name: tree_snapshot(root) for name, root in roots.items()}
    bad = {"gpu1": " gpuhost_mrrs_size=huge", "gpu2": "",
           "gpu3": " gpuhost_tune_mrrs_method=poke"}
    inventory = str(tmp_path / "inventory.ini")

    def write(extra):
        with open(inventory, "w") as handle:
            handle.write("[gpuhosts]\n")
            for name, root in roots.items():
                handle.write("%s gpuhost_root=%s%s\n" % (name, root, extra.get(name, "")))
            handle.write("\n[all:vars]\nansible_connection=local\n"
                         "ansible_python_interpreter=%s\n" % VENV_PY)

    write(bad)
    reports = str(tmp_path / "reports")
    proc = subprocess.run(
        [PLAYBOOK, "gpuhost.tuning.tune", "-i", inventory, "-f", "3",
         "-e", "gpuhost_report_dir=%s" % reports],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "Validation of arguments failed against role tune's argument spec" in out, out[-3000:]
    assert re.search(r"gpu1: .*gpuhost_mrrs_size", out), out[-3000:]
    assert re.search(r"gpu3: .*gpuhost_tune_mrrs_method.*poke", out), out[-3000:]
    assert "gpu2:" not in out.split("Validation of arguments failed")[1].split("PLAY RECAP")[0]
    assert "Tune the host in one module call" not in proc.stdout   # no host reached host_tune
    assert not os.path.exists(reports)
    for name, root in roots.items():
        assert tree_snapshot(root) == before[name], name
    write({})
    good = subprocess.run(
        [PLAYBOOK, "gpuhost.tuning.tune", "-i", inventory, "-f", "3", "--check",
         "-e", "gpuhost_report_dir=%s" % reports],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert good.returncode == 0, good.stdout[-3000:]
