"""boot_service module: main() on host trees, and the installed program run as the unit runs it."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import (
    boot_service as bootservice,
)
from ansible_collections.gpuhost.tuning.plugins.modules import boot_service
from fixtures import cpu as cpufix
from fixtures import pci as pcifix
from modrun import run_module

UNIT = "etc/systemd/system/gpuhost-tuning.service"
LINK = "etc/systemd/system/multi-user.target.wants/gpuhost-tuning.service"
CONFIG = "etc/gpuhost-tuning/boot.json"
LIB = "usr/local/lib/gpuhost-tuning"
UTILS = LIB + "/ansible_collections/gpuhost/tuning/plugins/module_utils"
MODULE_UTILS = os.path.dirname(os.path.dirname(os.path.dirname(boot_program.__file__)))


def run(root, check_mode=False, diff=False, **args):
    args.setdefault("root", str(root))
    return run_module(boot_service, args, check_mode=check_mode, diff=diff)


def read(root, rel, mode="r"):
    with open(os.path.join(str(root), rel), mode) as handle:
        return handle.read()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """A small seed host (2 GPUs' worth is what matters: 8 GPUs + 16 CPUs), built once."""
    root = str(tmp_path_factory.mktemp("bootsvc") / "host")
    built = pcifix.seed_gpus(root, mrrs=512)
    cpufix.epyc_cpus(root, threads=16)
    return root, built


def test_installs_unit_config_library_and_wants_link(tmp_path):
    root = tmp_path
    result = run(root)
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["enabled"] is True
    unit = read(root, UNIT).splitlines()
    for line in ("Type=oneshot", "RemainAfterExit=yes", "After=nvidia-persistenced.service",
                 "Before=pve-guests.service", "WantedBy=multi-user.target",
                 "Environment=PYTHONPATH=/usr/local/lib/gpuhost-tuning",
                 "ExecStart=/usr/bin/python3 -m ansible_collections.gpuhost.tuning.plugins."
                 "module_utils.engines.tune.boot_program --config /etc/gpuhost-tuning/boot.json"):
        assert line in unit
    link = os.path.join(str(root), LINK)
    assert os.path.islink(link)
    assert os.readlink(link) == "/etc/systemd/system/gpuhost-tuning.service"
    assert json.loads(read(root, CONFIG)) == {
        "mrrs": {"size": 4096, "vendor": "10de", "classes": ["0300", "0302"],
                 "include_upstream": True},
        "cpuidle": {"deeper_than": "C1"}}
    for name in bootservice.shipped():  # byte for byte the collection's own files
        assert read(root, UTILS + "/" + name, "rb") == read(MODULE_UTILS, name, "rb")
    for folder in bootservice.PACKAGES:
        assert os.path.isfile(os.path.join(str(root), LIB, folder, "__init__.py"))
    commands = dict((c["command"], c) for c in result["commands"])
    assert commands["systemctl daemon-reload"]["status"] == "skipped"
    assert "not the live host" in commands["systemctl daemon-reload"]["reason"]
    assert commands["systemctl start gpuhost-tuning.service"]["status"] == "skipped"
    assert result["active"] is None
    again = run(root)
    assert again["changed"] is False
    assert set(f["action"] for f in again["files"]) == {"ok"}
    assert again["commands"] == [{"command": "systemctl start gpuhost-tuning.service",
                                  "status": "skipped",
                                  "reason": "root is %s, not the live host" % root}]


def test_check_mode_changes_nothing_and_diffs_unit_and_config(tmp_path, snapshot_tree):
    before = snapshot_tree(str(tmp_path))
    result = run(tmp_path, check_mode=True, diff=True)
    assert snapshot_tree(str(tmp_path)) == before
    assert result["changed"] is True
    by_header = dict((d["after_header"], d) for d in result["diff"])
    assert "RemainAfterExit=yes" in by_header["/etc/systemd/system/gpuhost-tuning.service"][
        "after"]
    assert '"deeper_than": "C1"' in by_header["/etc/gpuhost-tuning/boot.json"]["after"]
    assert any("engines/tune/boot_program.py" in d.get("prepared", "") for d in result["diff"])


def test_changed_library_or_config_is_rewritten_and_stale_files_removed(tmp_path):
    run(tmp_path)
    stale = os.path.join(str(tmp_path), UTILS, "old_helper.py")
    with open(stale, "w") as handle:
        handle.write("# from an older collection\n")
    with open(os.path.join(str(tmp_path), UTILS, "subjects/pcie/pci.py"), "a") as handle:
        handle.write("# edited by hand\n")
    result = run(tmp_path, mrrs_size=2048, diff=True)
    assert result["changed"] is True
    actions = dict((f["path"], f["action"]) for f in result["files"])
    assert actions["/" + UTILS + "/subjects/pcie/pci.py"] == "update"
    assert actions["/" + UTILS + "/old_helper.py"] == "remove"
    assert actions["/" + CONFIG] == "update"
    assert actions["/" + UNIT] == "ok"
    assert not os.path.exists(stale)
    assert read(tmp_path, UTILS + "/subjects/pcie/pci.py", "rb") == read(
        MODULE_UTILS, "subjects/pcie/pci.py", "rb")
    assert json.loads(read(tmp_path, CONFIG))["mrrs"]["size"] == 2048


def test_parts_off_and_custom_ordering(tmp_path):
    run(tmp_path, mrrs_size=0, cpuidle_deeper_than="", after=["a.service", "b.service"],
        before=[])
    assert json.loads(read(tmp_path, CONFIG)) == {"mrrs": None, "cpuidle": None}
    unit = read(tmp_path, UNIT).splitlines()
    assert "After=a.service b.service" in unit
    assert not [line for line in unit if line.startswith("Before=")]


def test_bad_values_fail_before_writing(tmp_path, snapshot_tree):
    before = snapshot_tree(str(tmp_path))
    result = run(tmp_path, classes=["3"])
    assert result["failed"] is True and "invalid PCI class" in result["msg"]
    assert snapshot_tree(str(tmp_path)) == before


def test_absent_removes_everything_and_is_idempotent(tmp_path):
    run(tmp_path)
    check = run(tmp_path, state="absent", check_mode=True)
    assert check["changed"] is True and os.path.exists(os.path.join(str(tmp_path), UNIT))
    result = run(tmp_path, state="absent")
    assert result["changed"] is True
    for rel in (UNIT, LINK, CONFIG, LIB, "etc/gpuhost-tuning"):
        assert not os.path.lexists(os.path.join(str(tmp_path), rel)), rel
    assert os.path.isdir(os.path.join(str(tmp_path), "etc/systemd/system"))
    assert run(tmp_path, state="absent")["changed"] is False


def installed_program(root, tree, status=0):
    """Run the installed library as the unit does, as a separate Python process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(str(root), LIB)  # the installed copy only
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", boot_program.MODULE, "--config", os.path.join(str(root), CONFIG),
         "--root", tree], capture_output=True, text=True, env=env, cwd="/", check=False)
    assert proc.returncode == status, proc.stdout + proc.stderr
    return proc


def test_the_installed_library_imports_and_runs_against_a_host_tree(tmp_path, host):
    tree, built = host
    run(tmp_path)
    proc = installed_program(tmp_path, tree)
    assert "gpuhost-tuning: MRRS %s (endpoint 10de:2bb5): 512 -> 4096 bytes" % (
        built["gpus"][0]) in proc.stdout
    assert "C2 disabled now on CPUs 0-15" in proc.stdout
    for addr in built["gpus"] + built["root_ports"]:
        assert pcifix.devctl_of(tree, addr) & 0x7000 == 0x5000
    # it ran the installed copy, not the checkout
    probe = subprocess.run(
        [sys.executable, "-c", "import %s as m; print(m.__file__)" % boot_program.MODULE],
        capture_output=True, text=True, cwd="/", check=True,
        env=dict(os.environ, PYTHONPATH=os.path.join(str(tmp_path), LIB)))
    assert probe.stdout.strip() == os.path.join(str(tmp_path), UTILS, "engines/tune/boot_program.py")  # noqa: E501
