"""Issue 36, third hostile round, the VM side of a reboot (helper D): the vfio gate judges
what the next boot loads (item 9) and vm_verify reads the GPU's driver before ``qm start``
rebinds it (item 10). On the mixed host of tests/fixtures/passthrough.py (VM 201 passes
``0000:83:00`` and ``0000:84:00.0`` on vfio-pci; nvidia loaded for the host's GPUs, its
``/sys/module/nvidia`` as the kernel shows a loaded module). ``lsinitramfs`` answers as the
real tool prints (one member a line, no leading slash)."""

import os

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import (
    vm_verify as vmverify,
)
from ansible_collections.gpuhost.tuning.plugins.modules import vfio_initramfs_check, vm_verify
from fixtures import hosts
from fixtures import passthrough as ptfix

NEW = hosts.SEED_NEW
CONF = "etc/modprobe.d/vfio.conf"


class Runner:
    """Stands in for runner.Runner: ``lsinitramfs`` lists ``members``; ``qm status`` says
    ``stopped`` until ``qm start``, which rebinds the VM's GPUs to vfio-pci as PVE does.
    ``events`` records, in order, each call and each sysfs driver read."""

    def __init__(self, root, members=""):
        self.root, self.members, self.events, self.running = root, members, [], False

    def run(self, args, check=True, timeout=None, **kwargs):
        self.events.append(" ".join(args[:1] + args[2:]) if args[0].endswith("lsinitramfs")
                           else " ".join(args))
        if args[0].endswith("lsinitramfs"):
            return 0, "etc\netc/modprobe.d\n" + self.members, ""
        if args[1] == "start":
            for address in (ptfix.VM_BY_ADDRESS, ptfix.VM_BY_MAPPING):
                ptfix.rebind(self.root, address, "vfio-pci")
            self.running = True
            return 0, "", ""
        return 0, "status: %s\n" % ("running" if self.running else "stopped"), ""


@pytest.fixture
def mixed(tmp_path):
    root = str(tmp_path / "host")
    ptfix.mixed_host(root)
    assert os.path.isdir(os.path.join(root, "sys/module/nvidia"))  # nvidia loaded
    return root


def _conf(root, text):
    with open(os.path.join(root, CONF), "w") as handle:
        handle.write(text)


# item 9: a binding of a driver that is not the one loaded binds nothing
@pytest.mark.parametrize("text", ["blacklist nouveau\n", "softdep nouveau pre: vfio-pci\n",
                                  "blacklist nvidiafb\nblacklist nouveau\n",
                                  "options vfio-pci ids=10de:ffff\nblacklist nouveau\n"])
def test_gate_refuses_a_binding_of_a_driver_that_is_not_loaded(mixed, text):
    _conf(mixed, text)
    out = vmverify.gate(mixed, NEW, "lsinitramfs", Runner(mixed, CONF + "\n"))
    assert not out["ok"]
    problem = [p for p in out["problems"] if ptfix.VM_BY_ADDRESS in p][0]
    assert problem.startswith("vm 201 (train-201) hostpci0 %s" % ptfix.VM_BY_ADDRESS)
    assert "options vfio-pci ids=" in problem and "softdep nvidia pre: vfio-pci" in problem
    assert "update-initramfs -u -k %s" % NEW in problem


@pytest.mark.parametrize("text", ["blacklist nvidia\n", "softdep nvidia pre: vfio-pci\n",
                                  "options vfio-pci ids=10de:2bb5\n"])
def test_gate_passes_a_binding_that_holds_off_the_loaded_driver(mixed, text):
    _conf(mixed, text)
    out = vmverify.gate(mixed, NEW, "lsinitramfs", Runner(mixed, CONF + "\n"))
    assert out["ok"], out["problems"]


def test_gate_still_needs_the_binding_inside_the_image(mixed):
    _conf(mixed, "blacklist nvidia\n")
    out = vmverify.gate(mixed, NEW, "lsinitramfs", Runner(mixed, ""))
    assert not out["ok"] and all("lacks /%s" % CONF in p for p in out["problems"])


# item 10: the driver the GPU had at boot is read before qm start rebinds it
def test_vm_verify_reads_the_boot_driver_before_qm_start(mixed, monkeypatch):
    ptfix.rebind(mixed, ptfix.VM_BY_MAPPING, "nvidia")  # the host driver took it at boot
    runner = Runner(mixed)
    real = vmverify._drivers

    def drivers(root, addresses):
        found = real(root, addresses)
        runner.events.append("read drivers %s" % sorted(found.items()))
        return found

    monkeypatch.setattr(vmverify, "_drivers", drivers)
    out = vmverify.verify_vms(mixed, runner)
    events = runner.events
    first_read = [i for i, e in enumerate(events) if e.startswith("read drivers")][0]
    assert "nvidia" in events[first_read]
    assert first_read < events.index("qm start 201")
    vm = out["vms"][0]
    assert vm["started"] and vm["status"] == "running"
    gpu = [g for g in vm["gpus"] if g["address"] == ptfix.VM_BY_MAPPING][0]
    assert gpu["driver_before_start"] == "nvidia" and gpu["driver"] == "vfio-pci"
    assert out["problems"] == [
        "vm 201 (train-201): hostpci1 %s was on nvidia before qm start, not vfio-pci: the host "
        "driver took it at boot (add 'options vfio-pci ids=10de:2bb5' and 'softdep nvidia "
        "pre: vfio-pci' to /etc/modprobe.d/vfio.conf, then update-initramfs -u)"
        % ptfix.VM_BY_MAPPING]


def test_vm_verify_a_gpu_on_vfio_at_boot_is_no_problem(mixed):
    out = vmverify.verify_vms(mixed, Runner(mixed))
    assert out["problems"] == [] and out["vms"][0]["started"]
    assert all(g["driver_before_start"] == "vfio-pci" for g in out["vms"][0]["gpus"])


# low: a FIFO or an oversized file where a VM config or pci.cfg belongs is a clear failure
# naming the file, from both modules (before any qm call or image listing)
def _fifo_mapping(root):
    path = os.path.join(root, "etc/pve/mapping/pci.cfg")
    os.unlink(path)
    os.mkfifo(path)
    return "/etc/pve/mapping/pci.cfg"


def _huge_config(root):
    path = os.path.join(root, "etc/pve/nodes", ptfix.NODE, "qemu-server/201.conf")
    with open(path, "a") as handle:
        handle.write(("# %s\n" % ("x" * 1021)) * (5 << 10))  # 5 MiB of comments
    return "qemu-server/201.conf"


@pytest.mark.parametrize("plant", [_fifo_mapping, _huge_config])
@pytest.mark.parametrize("module,args", [
    (vfio_initramfs_check, {"kernel": NEW, "executable": "/bin/false"}),
    (vm_verify, {"qm": False})])
def test_unreadable_vm_files_fail_naming_the_file(mixed, plant, module, args):
    where = plant(mixed)
    res = run_module(module, dict(args, root=mixed))
    assert res.get("failed") and "Traceback" not in res["msg"], res
    assert where in res["msg"] and where in res["file"]
    assert "FIFO" in res["msg"] or "over the" in res["msg"]


# low: a snapshot whose recorded value holds a control character is refused whole, naming
# the snapshot file and the key; its JSON is read depth-bounded
def _taken(seed):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import snapshot
    res = snapshot.snapshot_run({"root": seed, "state": "present"})
    assert not res.get("failed"), res
    return snapshot, os.path.join(seed, "var/lib/gpuhost/original.json")


def _first_string(node, where="state"):
    """(path of keys, value) of the first string value outside the files section."""
    if isinstance(node, dict):
        for key in sorted(node):
            if where == "state" and key == "files":
                continue
            found = _first_string(node[key], where + "." + key)
            if found:
                return found
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found = _first_string(item, "%s[%d]" % (where, index))
            if found:
                return found
    elif isinstance(node, str) and node:
        return where, node
    return None


@pytest.mark.parametrize("control", ["\r", "\n", "\x00", "\x1b", "\x7f"])
def test_snapshot_restore_refuses_a_value_with_a_control_character(seed, control):
    import json
    from digest import digest
    snapshot, path = _taken(seed)
    with open(path) as handle:
        doc = json.load(handle)
    where, value = _first_string(doc["state"])
    node = doc
    keys = where.split(".")
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value + control + "lxc.cgroup2.cpuset.cpus: 0-127"
    with open(path, "w") as handle:
        json.dump(doc, handle)
    before = digest(seed)
    res = snapshot.snapshot_run({"root": seed, "state": "restore"})
    assert res.get("failed") and "original.json" in res["msg"] and where in res["msg"], res
    assert "control character" in res["msg"] and digest(seed) == before


def test_snapshot_deep_json_is_refused_not_a_recursion_error(seed):
    snapshot, path = _taken(seed)
    with open(path, "w") as handle:
        handle.write("[" * 200000)
    res = snapshot.snapshot_run({"root": seed, "state": "restore"})
    assert res.get("failed") and "original.json" in res["msg"] and "not valid JSON" in res["msg"]


# low: numa_pin_vmids naming a container without a config, after other parts wrote: the
# failure says which parts changed the host in this run instead of "nothing was written"
def test_numa_pin_refusal_names_what_the_parts_before_it_wrote(tmp_path):
    from fixtures import health
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
    from ansible_collections.gpuhost.tuning.plugins.modules import host_tune
    root = str(tmp_path)
    health.gpu_host(root)
    res = run_module(host_tune, hosts.as_wanted(dict(
        root=root, host="gpu03", numa_pin_vmids=[132, 140], parts=list(tune.PARTS))))
    assert res["failed"]
    assert "numa_pin_vmids: 140 is not allowed: no container config" in res["msg"]
    wrote = sorted(set(r["part"] for r in res["rows"] if r["status"] == "changed"))
    assert wrote and "the parts before it in this run changed the host and are kept: " \
        in res["msg"]
    assert all(part in res["msg"] for part in wrote if part != "numa_pin")
    alone = str(tmp_path / "alone")
    health.gpu_host(alone)
    res = run_module(host_tune, hosts.as_wanted(dict(
        root=alone, host="gpu03", numa_pin_vmids=[140], parts=["numa_pin"])))
    assert res["failed"] and "no part before it changed anything" in res["msg"]


# low: the device_nodes part checks every path before it writes: a folder at its wants
# link, or a file where the wants folder belongs, fails with nothing written
@pytest.mark.parametrize("plant", ["folder_at_link", "file_at_folder"])
def test_device_nodes_writes_nothing_when_the_link_path_is_in_the_way(tmp_path, plant):
    from digest import digest
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
        device_nodes_part,
    )
    root = str(tmp_path / "host")
    os.makedirs(root)
    hosts.seed_host(root)
    link = os.path.join(root, device_nodes_part.WANTS_LINK.lstrip("/"))
    if plant == "folder_at_link":
        os.makedirs(os.path.join(link, "operator-notes"))
    else:
        os.makedirs(os.path.dirname(os.path.dirname(link)), exist_ok=True)
        with open(os.path.dirname(link), "w") as handle:
            handle.write("not a folder\n")
    before = digest(root)
    out = device_nodes_part.install(root)
    assert out["failed"] and "nothing was written" in out["msg"], out
    assert "multi-user.target.wants" in out["msg"] and "move it away" in out["msg"]
    assert digest(root) == before
    assert not os.path.lexists(os.path.join(root, device_nodes_part.UNIT_PATH.lstrip("/")))
