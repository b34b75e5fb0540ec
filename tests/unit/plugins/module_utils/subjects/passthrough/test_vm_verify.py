"""vmverify: which GPUs VMs pass whole, which modprobe.d files bind them to vfio-pci, the
gate on the next initramfs and the VMs after a boot, on the mixed host of
tests/fixtures/passthrough.py. ``qm`` answers as qemu-server ``src/PVE/CLI/qm.pm`` prints
(``status: running``); the runner here stands in for runner.Runner and records each call
with its timeout (the module tests run the real Runner against tests/doubles/qm)."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import (
    vmgpu,
    vm_verify,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    CommandTimeout,
)
from fixtures import hosts
from fixtures import passthrough as ptfix

NEW = hosts.SEED_NEW


class Runner:
    """``answers``: {tuple(args): (rc, out, err) or an exception}; records (args, timeout)."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def run(self, args, check=True, timeout=None, **kwargs):
        self.calls.append((list(args), timeout))
        answer = self.answers.get(tuple(args[:1] + args[2:]) if args[0].endswith("lsinitramfs")
                                  else tuple(args))
        if isinstance(answer, Exception):
            raise answer
        rc, out, err = answer
        if check and rc != 0:
            raise CommandError(args, rc, out, err)
        return rc, out, err


@pytest.fixture
def mixed(tmp_path):
    root = str(tmp_path / "host")
    ptfix.mixed_host(root)
    return root


def test_passed_gpus_are_display_devices_passed_whole(mixed):
    gpus = vm_verify.passed_gpus(vmgpu.collect(mixed))
    # not the audio functions, not the vGPU VM's virtual function
    assert [d["address"] for d in gpus] == [ptfix.VM_BY_ADDRESS, ptfix.VM_BY_MAPPING]
    facts = {"devices": [dict(gpus[0], driver_option="keep"), dict(gpus[1], exists=False)]}
    assert vm_verify.passed_gpus(facts) == []


def test_binders_ids_or_a_softdep_or_blacklist_of_the_host_driver():
    files = [{"file": "/etc/modprobe.d/a.conf", "ids": ["10de:2bb5"], "softdeps": [],
              "blacklist": []},
             {"file": "/etc/modprobe.d/b.conf", "ids": [], "softdeps": ["nouveau"],
              "blacklist": []},
             {"file": "/etc/modprobe.d/c.conf", "ids": [], "softdeps": [],
              "blacklist": ["amdgpu"]}]
    on_vfio = {"id": "10de:2bb5", "driver": "vfio-pci"}
    assert vm_verify.binders(on_vfio, files) == ["/etc/modprobe.d/a.conf",
                                                 "/etc/modprobe.d/b.conf"]
    # on a host driver now: only that driver's softdep/blacklist counts
    assert vm_verify.binders({"id": "10de:2335", "driver": "nvidia"}, files) == []
    assert vm_verify.binders({"id": "1002:74a1", "driver": None}, files) == [
        "/etc/modprobe.d/c.conf"]
    # on vfio-pci now with nvidia loaded: only a binding of nvidia (or the ids) counts;
    # b.conf's softdep of nouveau keeps nothing from nvidia at boot (issue 36 item 9)
    assert vm_verify.binders({"id": "10de:2335", "driver": "vfio-pci"}, files[1:],
                             loaded=("nvidia",)) == []
    assert vm_verify.binders(on_vfio, files, loaded=("nvidia",)) == ["/etc/modprobe.d/a.conf"]


def test_qm_status_reads_the_status_line_with_its_timeout():
    runner = Runner({("qm", "status", "201"): (0, "status: running\n", "")})
    assert vm_verify.qm_status(runner, 201) == "running"
    assert runner.calls == [(["qm", "status", "201"], vm_verify.STATUS_TIMEOUT)]
    assert vm_verify.qm_status(Runner({("qm", "status", "7"): (0, "odd\n", "")}), 7) == "unknown"
    with pytest.raises(CommandError):
        vm_verify.qm_status(Runner({("qm", "status", "9"): (2, "", "no such VM")}), 9)


def test_gate_lists_the_next_image_with_its_bound(mixed):
    image = "/boot/initrd.img-%s" % NEW
    listing = "etc\netc/modprobe.d\netc/modprobe.d/vfio.conf\n"
    runner = Runner({("lsinitramfs",): (0, listing, "")})
    out = vm_verify.gate(mixed, NEW, "lsinitramfs", runner, timeout=7)
    assert out["ok"] and out["image"] == image and out["problems"] == []
    assert [d["in_image"] for d in out["devices"]] == [["/etc/modprobe.d/vfio.conf"]] * 2
    assert [c[1] for c in runner.calls] == [7]


def test_gate_names_an_image_without_the_binding(mixed):
    out = vm_verify.gate(mixed, NEW, "lsinitramfs", Runner({("lsinitramfs",): (0, "etc\n", "")}))
    assert not out["ok"] and len(out["problems"]) == 2
    assert out["problems"][0].startswith("vm 201 (train-201) hostpci0 %s (10de:2bb5): "
                                         % ptfix.VM_BY_ADDRESS)
    assert "update-initramfs -u -k %s" % NEW in out["problems"][0]


def test_gate_a_hanging_lister_is_one_problem_naming_the_gpus(mixed):
    runner = Runner({("lsinitramfs",): CommandTimeout(["lsinitramfs"], 5, "", "")})
    out = vm_verify.gate(mixed, NEW, "lsinitramfs", runner, timeout=5)
    assert not out["ok"] and len(out["problems"]) == 1
    assert "GPUs passed through: vm 201 (train-201) hostpci0" in out["problems"][0]


def test_gate_without_passed_gpus_runs_nothing(tmp_path):
    runner = Runner({})
    out = vm_verify.gate(str(tmp_path), NEW, "lsinitramfs", runner)
    assert out["ok"] and out["devices"] == [] and runner.calls == []


def test_verify_vms_starts_a_stopped_onboot_vm_within_its_timeout(mixed):
    states = iter(["status: stopped\n", "status: running\n"])

    class Qm(Runner):
        def run(self, args, check=True, timeout=None, **kwargs):
            self.calls.append((list(args), timeout))
            if args[1] == "status":
                return 0, next(states), ""
            return 0, "", ""

    runner = Qm({})
    out = vm_verify.verify_vms(mixed, runner, start_timeout=11)
    assert out["problems"] == []
    vm = out["vms"][0]
    assert vm["vmid"] == 201 and vm["started"] and vm["status"] == "running"
    assert runner.calls == [(["qm", "status", "201"], vm_verify.STATUS_TIMEOUT),
                            (["qm", "start", "201"], 11),
                            (["qm", "status", "201"], vm_verify.STATUS_TIMEOUT)]


def test_verify_vms_a_failing_qm_status_is_the_vms_problem(mixed):
    runner = Runner({("qm", "status", "201"): OSError("qm: not found"),
                     ("qm", "status", "202"): (0, "status: running\n", "")})
    out = vm_verify.verify_vms(mixed, runner, running_before=["202"])
    assert [v["vmid"] for v in out["vms"]] == [201, 202]
    assert out["problems"] == ["vm 201 (train-201): qm status 201 failed: qm: not found"]


def test_verify_vms_without_qm_only_reads_drivers(mixed):
    ptfix.rebind(mixed, ptfix.VM_BY_MAPPING, "nvidia")
    runner = Runner({})
    out = vm_verify.verify_vms(mixed, runner, qm=False)
    assert runner.calls == []
    assert out["vms"][0]["skipped"] == ["qm status/start (root %s)" % mixed]
    assert out["problems"] == [
        "vm 201 (train-201): hostpci1 %s was on nvidia before qm start, not vfio-pci: the host "
        "driver took it at boot (add 'options vfio-pci ids=10de:2bb5' and 'softdep nvidia pre: "
        "vfio-pci' to /etc/modprobe.d/vfio.conf, then update-initramfs -u)" % ptfix.VM_BY_MAPPING]
