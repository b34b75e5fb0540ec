"""Snapshots: the first is the original and stays; later ones separate; restore is exact."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_service
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu as cpu_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpuidle_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import snapshot
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl_settings
from ansible_collections.gpuhost.tuning.plugins.modules import tuning_snapshot
from fixtures import cpu as cpufix
from fixtures import pci as pcifix
from fixtures import procsys
from modrun import run_module

KEYS = ["kernel.numa_balancing", "vm.swappiness", "net.core.rmem_max", "kernel.nmi_watchdog"]
WANTED = {"kernel.numa_balancing": "0", "vm.swappiness": "10", "net.core.rmem_max": "16777216",
          "kernel.nmi_watchdog": "0"}
SNAPDIR = "var/lib/gpuhost"
CONF = "etc/sysctl.d/99-gpuhost-tuning.conf"


def run(root, check_mode=False, diff=False, **args):
    args.setdefault("root", str(root))
    args.setdefault("sysctl_keys", KEYS)
    return run_module(tuning_snapshot, args, check_mode=check_mode, diff=diff)


def host_bytes(root):
    """What a restore must bring back byte for byte: every config space and sysctl file."""
    out = {}
    for folder, _dirs, files in os.walk(os.path.join(str(root), "sys/devices")):
        if "config" in files:
            with open(os.path.join(folder, "config"), "rb") as handle:
                out[os.path.relpath(folder, str(root))] = handle.read()
    for key in KEYS:
        with open(sysctl.key_path(str(root), key), "rb") as handle:
            out[key] = handle.read()
    return out


def idle_flags(root):
    """{(cpu, state name): disabled} read from the tree (value, not bytes: the kernel prints
    "0\\n" while a write of "0" leaves the fixture file without a newline)."""
    return dict(((cpu, s["name"]), s["disabled"])
                for cpu, states in cpu_mod.read_states(str(root)).items() for s in states)


def tune(root, built):
    """What the tune role does to the host, through the same writers."""
    sysctl_settings.apply_values(str(root), WANTED)
    for addr in built["gpus"] + built["root_ports"]:
        setpci_maxreadreq.set_mrrs(pci.PciDevice(str(root), addr), 4096)
    sel = cpuidle_state.select_states(str(root), deeper_than="C1")
    cpuidle_state.set_states(str(root), sel, True)
    path = os.path.join(str(root), CONF)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(sysctl_settings.render_conf(WANTED))
    config = boot_service.make_config()
    files = boot_service.desired_files(config, boot_service.render_unit())
    boot_service.write_files(str(root), files, boot_service.plan_files(str(root), files))
    boot_service.make_wants_link(str(root))


@pytest.fixture
def host(tmp_path):
    root = str(tmp_path / "host")
    built = pcifix.seed_gpus(root, mrrs=512)
    cpufix.epyc_cpus(root, threads=16, c2_disabled=[3], offline=(9,))
    procsys.sysctls(root, procsys.DESKTOP_SYSCTLS)
    return root, built


def test_first_snapshot_is_the_original_and_is_never_overwritten(host):
    root, built = host
    first = run(root)
    assert first["changed"] is True and first["path"] == "/var/lib/gpuhost/original.json"
    summary = first["summary"]
    assert summary["pcie"][built["gpus"][0]] == 512
    assert summary["pcie"][built["root_ports"][0]] == 512
    assert built["audio"][0] not in summary["pcie"]  # not a GPU: not touched, not recorded
    assert summary["cpuidle_disabled"] == {"POLL": "", "C1": "", "C2": "3"}
    assert summary["cpuidle_cpus"] == 15
    assert summary["sysctl"]["kernel.numa_balancing"] == "1"
    assert summary["files"]["/" + CONF] == "absent"
    original = os.path.join(root, SNAPDIR, "original.json")
    with open(original, "rb") as handle:
        original_bytes = handle.read()
    doc = json.loads(original_bytes)
    assert doc["kind"] == "original" and doc["state"]["cpuidle"]["cpus"]["3"]["C2"] is True
    # nothing changed: nothing written
    again = run(root)
    assert again["changed"] is False and again["path"] is None
    assert again["snapshots"] == ["original.json"]
    # the host drifts: a separate snapshot, the original untouched
    sysctl_settings.write_sysctl(root, "vm.swappiness", "30")
    later = run(root)
    assert later["changed"] is True and later["path"].startswith("/var/lib/gpuhost/snapshot-")
    assert later["summary"]["sysctl"]["vm.swappiness"] == "30"
    with open(original, "rb") as handle:
        assert handle.read() == original_bytes
    assert len(later["snapshots"]) == 2 and later["snapshots"][0] == "original.json"
    # check mode: reports, writes nothing
    sysctl_settings.write_sysctl(root, "vm.swappiness", "40")
    check = run(root, check_mode=True)
    assert check["changed"] is True and len(check["snapshots"]) == 2


def test_applied_state_makes_a_rerun_write_nothing(host):
    root, built = host
    assert run(root)["path"].endswith("original.json")
    tune(root, built)
    applied = run(root, kind="applied")
    assert applied["changed"] is True and applied["path"] == "/var/lib/gpuhost/applied.json"
    assert applied["summary"]["cpuidle_disabled"]["C2"] == "0-8,10-15"
    # a second tune run: before and after snapshots both unchanged
    assert run(root)["changed"] is False
    assert run(root, kind="applied")["changed"] is False
    assert run(root, state="query")["snapshots"] == ["original.json", "applied.json"]


def test_restore_brings_every_value_back_exactly(host, snapshot_tree):
    root, built = host
    want_bytes = host_bytes(root)
    want_idle = idle_flags(root)
    tree_before = set(snapshot_tree(root))
    run(root)
    tune(root, built)
    run(root, kind="applied")
    assert host_bytes(root) != want_bytes and idle_flags(root) != want_idle
    check = run(root, state="restore", check_mode=True, diff=True)
    assert check["changed"] is True
    assert "MRRS %s: 4096" % built["gpus"][0] in check["diff"]["before"]
    assert "MRRS %s: 512" % built["gpus"][0] in check["diff"]["after"]
    assert host_bytes(root) != want_bytes  # check mode wrote nothing
    result = run(root, state="restore")
    assert result.get("failed") is not True, result
    assert result["changed"] is True and result["failures"] == []
    assert host_bytes(root) == want_bytes
    assert idle_flags(root) == want_idle
    statuses = dict((f["path"], f["status"]) for f in result["files"])
    assert statuses["/" + CONF] == "changed"
    assert statuses["/usr/local/lib/gpuhost-tuning"] == "changed"
    # files the tune created are gone; only the snapshot folder is new
    tree = snapshot_tree(root)
    left = sorted(p for p in set(tree) - tree_before if tree[p][0] != "dir")
    assert left == [SNAPDIR + "/original.json"]
    assert not os.path.exists(os.path.join(root, "etc/gpuhost-tuning"))
    # restoring twice changes nothing
    assert run(root, state="restore")["changed"] is False


def test_files_that_existed_are_put_back_with_content_and_mode(host):
    root, _built = host
    path = os.path.join(root, CONF)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write("# the operator's own\nvm.swappiness = 1\n")
    os.chmod(path, 0o600)
    run(root)
    with open(path, "w") as handle:
        handle.write("kernel.numa_balancing = 0\n")
    os.chmod(path, 0o644)
    run(root, state="restore", parts=["files"])
    with open(path) as handle:
        assert handle.read() == "# the operator's own\nvm.swappiness = 1\n"
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_device_refusing_the_restore_fails_naming_it_after_trying_all(host, monkeypatch):
    root, built = host
    run(root)
    tune(root, built)
    stubborn = built["root_ports"][2]
    real = setpci_maxreadreq._write_config

    def drop(path, offset, data):
        if stubborn in path:
            return
        return real(path, offset, data)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", drop)
    result = run(root, state="restore")
    assert result["failed"] is True and stubborn in result["msg"]
    by_addr = dict((d["address"], d) for d in result["pcie"])
    assert by_addr[stubborn]["status"] == "failed"
    assert by_addr[built["gpus"][0]]["status"] == "changed"
    assert pcifix.devctl_of(root, built["gpus"][0]) & 0x7000 == 0x2000
    assert sysctl.read_sysctl(root, "kernel.numa_balancing") == "1"  # the rest restored


def test_restore_a_named_snapshot_and_unknown_names(host):
    root, _built = host
    run(root)
    sysctl_settings.write_sysctl(root, "vm.swappiness", "30")
    later = run(root)["path"].rsplit("/", 1)[-1]
    sysctl_settings.write_sysctl(root, "vm.swappiness", "10")
    result = run(root, state="restore", snapshot=later[:-len(".json")], parts=["sysctl"])
    assert result["snapshot"] == "/var/lib/gpuhost/" + later
    assert sysctl.read_sysctl(root, "vm.swappiness") == "30"
    run(root, state="restore", snapshot="latest", parts=["sysctl"])
    assert sysctl.read_sysctl(root, "vm.swappiness") == "30"
    missing = run(root, state="restore", snapshot="nope")
    assert missing["failed"] is True
    assert "nope.json" in missing["msg"] and "original.json" in missing["msg"]


def test_no_snapshot_yet_restore_fails_clearly(tmp_path):
    result = run(tmp_path, state="restore")
    assert result["failed"] is True and "not found" in result["msg"]
    assert snapshot.listing(str(tmp_path)) == []
