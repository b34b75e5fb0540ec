"""host_tune module: the whole tune pass in one call, on the seed host tree (seed
host), an H200 VM and variants: what a user sees in the result and on the host."""

import json
import os
import subprocess
import sys

import pytest
from fixtures import hosts, procsys
from fixtures import pci as pcifix
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit as audit_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import peermem_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import verify_part
from ansible_collections.gpuhost.tuning.plugins.modules import host_tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from conftest import TESTS

WANTED = hosts.common_wanted()
MANAGED = ("pcie_mrrs", "numa_balancing", "cpuidle_deep_state", "sysctl")
UNIT = "etc/systemd/system/gpuhost-tuning.service"
CONF = "etc/sysctl.d/99-gpuhost-tuning.conf"


def run(root, check_mode=False, diff=False, **args):
    params = {"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"]}
    params.update(args)
    return run_module(host_tune, hosts.as_wanted(params), check_mode=check_mode, diff=diff)


def managed_findings(root):
    return [f for f in audit_mod.audit(root, WANTED)["findings"] if f["id"] in MANAGED]


def rows(result):
    return dict(((r["part"], r["item"]), r) for r in result["rows"])


def read(root, rel):
    with open(os.path.join(root, rel)) as handle:
        return handle.read()


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "seed")
    return root, hosts.seed_host(root)


def test_first_run_tunes_everything_second_run_changes_nothing(seed, snapshot_tree):
    root, built = seed
    assert {f["id"] for f in managed_findings(root)} == set(MANAGED)

    first = run(root)
    assert first.get("failed") is not True, first.get("msg")
    assert first["changed"] is True and first["failures"] == []
    assert first["verified"] is True and first["audit_again"] is True
    assert first["findings_after"] == [] and len(first["findings_before"]) >= 26
    assert first["snapshot"] == "/var/lib/gpuhost/original.json"
    assert managed_findings(root) == []  # an independent audit agrees
    table = rows(first)
    gpu = built["gpus"][0]
    assert (table[("pcie", gpu + " endpoint MRRS")]["before"],
            table[("pcie", gpu + " endpoint MRRS")]["after"]) == (512, 4096)
    assert table[("sysctl", "kernel.numa_balancing")]["status"] == "changed"
    assert table[("cpuidle", "C2 (800 us)")]["after"] == "disabled on CPUs 0-127"
    peer = table[("nvidia_peermem", "nvidia_peermem")]
    assert peer["status"] == "not applicable" and "ib_core is not available" in peer["note"]
    assert "systemctl start gpuhost-tuning.service: skipped" in table[
        ("boot_service", "gpuhost-tuning.service")]["note"]
    assert "kernel.numa_balancing = 0" in read(root, CONF).splitlines()
    assert "RemainAfterExit=yes" in read(root, UNIT).splitlines()
    assert sorted(os.listdir(os.path.join(root, "var/lib/gpuhost"))) == [
        "applied.json", "original.json"]

    tuned = snapshot_tree(root)
    second = run(root)
    assert second.get("failed") is not True, second.get("msg")
    assert second["changed"] is False and second["failures"] == []
    # an unchanged host is still in the state the first audit read: no second audit
    assert second["verified"] is True and second["audit_again"] is False
    assert "unchanged since the last recorded state" in second["snapshot"]
    assert {r["status"] for r in second["rows"] if r["part"] in ("sysctl", "pcie", "cpuidle")} \
        == {"ok"}
    assert snapshot_tree(root) == tuned  # not one byte, mode or link written


def test_check_mode_plans_everything_and_writes_nothing(seed, snapshot_tree):
    root, built = seed
    before = snapshot_tree(root)
    result = run(root, check_mode=True, diff=True)
    assert snapshot_tree(root) == before
    assert result.get("failed") is not True, result.get("msg")
    assert result["changed"] is True and result["check_mode"] is True
    assert result["verified"] is False and result["findings_after"] == []
    table = rows(result)
    assert table[("pcie", built["gpus"][0] + " endpoint MRRS")]["after"] == 4096  # planned
    assert table[("sysctl", "vm.swappiness")]["after"] == "10"
    text = json.dumps(result["diff"])
    assert "kernel.numa_balancing = 0" in text and "RemainAfterExit=yes" in text
    assert "Max Read Request Size (bytes)" in text
    assert result["parts"]["snapshot_before"]["path"] == "/var/lib/gpuhost/original.json"


def test_a_device_ignoring_the_mrrs_write_fails_the_host_after_everything_else(
        seed, monkeypatch):
    root, built = seed
    bad = "0000:03:00.0"
    real_write = setpci_maxreadreq._write_config

    def drop_one(path, offset, data):
        if os.path.dirname(path) == pcifix.device_dir(root, bad):
            return  # QEMU's emulated PCIe devices keep MRRS at what it was
        real_write(path, offset, data)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", drop_one)
    result = run(root)
    assert result["failed"] is True and result["changed"] is True
    assert result["failures"][0].startswith(
        "pcie: Max Read Request Size not set on 1 of 16 devices: %s" % bad)
    assert any(f.startswith("still off after tuning: pcie_mrrs %s" % bad)
               for f in result["failures"])
    assert result["msg"].startswith("gpu01: pcie: ")
    assert rows(result)[("pcie", bad + " endpoint MRRS")]["status"] == "failed"
    # every other part still took
    assert [(f["id"], f["subject"]) for f in managed_findings(root)] == [("pcie_mrrs", bad)]
    assert os.path.isfile(os.path.join(root, UNIT))
    assert os.path.isfile(os.path.join(root, "var/lib/gpuhost/applied.json"))
    assert pcifix.devctl_of(root, built["gpus"][7]) >> 12 & 7 == 5


def test_a_failed_snapshot_stops_before_anything_changes(seed, snapshot_tree):
    root, _built = seed
    os.makedirs(os.path.join(root, "var/lib"), exist_ok=True)
    with open(os.path.join(root, "var/lib/gpuhost"), "w") as handle:
        handle.write("a file where the snapshot folder should be\n")
    before = snapshot_tree(root)
    result = run(root)
    assert result["failed"] is True and result["changed"] is False
    assert len(result["failures"]) == 1
    assert result["failures"][0].startswith("snapshot: ")
    assert "nothing was changed" in result["failures"][0]
    assert set(result["parts"]) == {"snapshot_before"}
    assert snapshot_tree(root) == before


def test_parts_switched_off_are_left_alone_and_not_verified(seed):
    root, built = seed
    gpu = built["gpus"][0]
    devctl = pcifix.devctl_of(root, gpu)
    result = run(root, parts=["snapshot", "sysctl", "verify"])
    assert result.get("failed") is not True, result.get("msg")
    assert pcifix.devctl_of(root, gpu) == devctl  # MRRS untouched
    assert not os.path.exists(os.path.join(root, UNIT))
    table = rows(result)
    assert table[("pcie", "MRRS")]["status"] == "off"
    assert table[("cpuidle", "deeper than C1")]["status"] == "off"
    assert table[("boot_service", "gpuhost-tuning.service")]["status"] == "off"
    assert table[("nvidia_peermem", "nvidia_peermem")]["status"] == "off"
    # pcie and cpuidle findings remain, but they are not this run's business
    assert result["findings_after"] == []
    assert {f["id"] for f in managed_findings(root)} == {"pcie_mrrs", "cpuidle_deep_state"}


def test_vm_without_cpuidle_or_numa_balancing_is_not_a_failure(tmp_path):
    root = str(tmp_path / "vm")
    built = hosts.vm_host(root)
    result = run(root)
    assert result.get("failed") is not True, result.get("msg")
    table = rows(result)
    assert table[("cpuidle", "deeper than C1")]["status"] == "not applicable"
    numa = table[("sysctl", "kernel.numa_balancing")]
    assert numa["status"] == "skipped" and "no such key" in numa["note"]
    assert table[("pcie", built["gpu"] + " endpoint MRRS")]["status"] == "ok"
    assert result["findings_after"] == []


def test_infiniband_tree_gets_nvidia_peermem_at_boot_without_modprobe(seed):
    root, _built = seed
    procsys.proc_modules(root, procsys.SEED_MODULES + [("ib_core", 471040, 2, "-")])
    result = run(root)
    assert result.get("failed") is not True, result.get("msg")
    assert result["peermem"]["action"] == "persist"
    assert "nvidia_peermem" in read(
        root, "etc/modules-load.d/gpuhost-nvidia-peermem.conf").splitlines()
    peer = rows(result)[("nvidia_peermem", "nvidia_peermem")]
    assert peer["status"] == "skipped" and "not the live host" in peer["note"]
    assert "nvidia_peermem" not in result["parts"]  # no modprobe under a tree


@pytest.mark.parametrize("mode,nvidia,root,action,status", [
    ("skip", {}, "/", "none", "skipped"),
    ("auto", {"ib_core": {"loaded": False, "available": False}}, "/", "none", "not applicable"),
    ("load", {"ib_core": {}, "nvidia_peermem": {"available": True}}, "/", "load", "load"),
    ("auto", {"ib_core": {"available": True}, "nvidia_peermem": {"loaded": True}}, "/",
     "persist", "ok"),
    ("auto", {"ib_core": {"loaded": True}, "nvidia_peermem": {"available": False}}, "/",
     "none", "not applicable"),
    ("auto", {"ib_core": {"loaded": True}, "nvidia_peermem": {"available": True}}, "/",
     "load", "load"),
    ("auto", {"ib_core": {"loaded": True}, "nvidia_peermem": {"available": True}}, "/srv/x",
     "persist", "skipped"),
])
def test_nvidia_peermem_decision_matches_the_role(mode, nvidia, root, action, status):
    decision = peermem_part.decision(mode, nvidia, root)
    assert (decision["action"], decision["status"]) == (action, status)


class FailingModprobe(object):
    """A runner whose modprobe fails as on a PCIe-only host."""

    def __init__(self):
        self.calls = []

    def which(self, name):
        return "/sbin/" + name

    def run(self, args, **_kwargs):
        from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
            CommandError,
        )
        self.calls.append(args)
        raise CommandError(args, 1, "", "modprobe: ERROR: could not insert 'nvidia_peermem': "
                                        "Invalid argument")


def test_a_failed_modprobe_is_reported_and_the_other_parts_still_run(seed, monkeypatch):
    root, _built = seed
    procsys.proc_modules(root, procsys.SEED_MODULES + [("ib_core", 471040, 2, "-")])
    monkeypatch.setattr(peermem_part, "is_live", lambda _root: True)  # as if root were the host
    runner = FailingModprobe()
    result = tune.tune_run({"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"],
                            "parts": ["sysctl", "nvidia_peermem", "verify"]}, runner=runner)
    assert runner.calls == [["/sbin/modprobe", "nvidia_peermem"]]
    assert result["failures"][0].startswith("nvidia_peermem: command /sbin/modprobe")
    assert "Invalid argument" in result["failures"][0]
    assert rows(result)[("nvidia_peermem", "nvidia_peermem")]["status"] == "failed"
    assert result["parts"]["sysctl"]["changed"] is True
    assert tune.tune_failure(result).startswith("gpu01: nvidia_peermem: ")


def test_ansible_doc_renders_and_matches_the_spec(seed):
    tests = TESTS
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(tests, "output", "pathlink"))
    doc_bin = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([doc_bin, "--json", "gpuhost.tuning.host_tune"], env=env,
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)["gpuhost.tuning.host_tune"]
    assert set(doc["doc"]["options"]) == set(tune.argument_spec()) == {
        "root", "host", "parts", "gpu_vendor", "gpu_classes", "mrrs_size", "mrrs_method",
        "mrrs_include_upstream", "cpuidle_deeper_than", "sysctl", "sysctl_at_least",
        "sysctl_file", "snapshot_dir", "boot_service_start", "nvidia_peermem",
        "lxc_config_dir", "numa_pin_vmids", "bandwidth_size_mb", "bandwidth_repeats",
        "latency_count", "latency_gap_us", "bandwidth_timeout", "cuda_library", "wanted",
        "guest", "ceiling_seconds", "ceiling_mb", "planned_changes"}
    for name, spec in tune.argument_spec().items():  # every part's own option documented
        assert doc["doc"]["options"][name].get("default") == spec.get("default"), name
    root, _built = seed
    result = run(root, diff=True)
    assert set(result) - {"invocation", "warnings"} <= set(doc["return"])


class _Marker(object):
    """A tune part as another subject would add one: one option, one finding it owns."""

    name = "marker"
    owns = ("nvidia_uvm_hmm",)
    steps = ("marker",)
    stage = "tune"
    options = dict(marker_text=dict(type="str", default="tuned", description="What it writes.",
                                    role_var="gpuhost_tune_marker_text"))

    @staticmethod
    def rules(p):
        if p.get("marker_text") == "":
            validate.fail("marker_text", "", "some text")

    def run(self, ctx):
        if ctx.params["marker_text"] == "refuse":
            return {"failures": ["marker: the host refused"],
                    "rows": [("/etc/marker", "", "", "failed", "refused")]}
        return {"changed": True, "detail": {"marker": {"changed": True}},
                "rows": [("/etc/marker", "", ctx.params["marker_text"], "changed", "")]}

    def not_run(self, ctx, status):
        return {"rows": [("/etc/marker", "", "", status, "")]}


def test_a_registered_part_runs_in_its_place_with_its_option(seed, monkeypatch):
    root, _built = seed
    registry = list(tune.REGISTRY)
    registry.insert(registry.index(verify_part.VERIFY_PART) - 1, _Marker())
    names, steps, managed = tune._derive(registry)
    monkeypatch.setattr(tune, "REGISTRY", tuple(registry))
    monkeypatch.setattr(tune, "MANAGED", managed)
    monkeypatch.setattr(tune, "PARTS", names)
    assert "marker" in names and "marker" in steps and managed["nvidia_uvm_hmm"] == "marker"
    assert tune.argument_spec()["marker_text"] == {"type": "str", "default": "tuned"}
    # the module refuses a value by the part's rule before it reads anything
    bad = run(root, parts=["sysctl", "marker"], marker_text="")
    assert bad["failed"] is True and bad.get("changed") is not True
    assert "marker_text: '' is not allowed: some text" in bad["msg"]
    # the registered parts' own rules: the snapshot folder's (sections.rules)
    out = run(root, parts=["snapshot", "marker"], snapshot_dir="/../../outside")
    assert out["failed"] is True and "snapshot_dir: /../../outside resolves to" in out["msg"]
    assert not os.path.exists(os.path.join(root, "var/lib/gpuhost"))
    done = tune.tune_run({"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"],
                          "parts": ["sysctl", "marker", "verify"]})
    assert done["parts"]["marker"] == {"changed": True}
    assert rows(done)[("marker", "/etc/marker")]["after"] == "tuned"
    # its finding is verified: uvm HMM stays on on the seed host (the marker changes nothing)
    assert [f for f in done["failures"] if "nvidia_uvm_hmm" in f]
    off = tune.tune_run({"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"],
                         "parts": ["sysctl"], "marker_text": "refuse"})
    assert rows(off)[("marker", "/etc/marker")]["status"] == "off"
    refused = tune.tune_run({"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"],
                             "parts": ["marker"], "marker_text": "refuse"})
    assert refused["failures"] == ["marker: the host refused"]
    assert tune.tune_failure(refused) == "gpu01: marker: the host refused"


def test_a_larger_socket_buffer_is_kept_by_the_audits_rule_unless_told(seed):
    root, _built = seed
    wanted = dict(WANTED["sysctl"], **{"net.core.rmem_default": "212992"})
    procsys.sysctls(root, {"net.core.rmem_default": "4194304"})
    audit = audit_mod.audit(root, dict(WANTED, sysctl=wanted))
    assert not [f for f in audit["findings"] if f["subject"] == "net.core.rmem_default"]
    kept = run(root, parts=["sysctl"], sysctl=wanted)
    assert rows(kept)[("sysctl", "net.core.rmem_default")]["after"] == "4194304"
    assert "net.core.rmem_default = 4194304\n" in read(root, CONF)
    exact = run(root, parts=["sysctl"], sysctl=wanted, sysctl_at_least=[])
    assert rows(exact)[("sysctl", "net.core.rmem_default")]["after"] == "212992"
    assert "net.core.rmem_default = 212992\n" in read(root, CONF)


def _digest(root):
    out = {}
    for base, _dirs, names in os.walk(str(root)):
        for name in names:
            path = os.path.join(base, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[path] = handle.read()
    return out


def test_guest_refuse_stops_before_any_part_on_a_vm_guest(tmp_path):
    """Role tune's guest check, done by host_tune after its read-only audit (one module
    round trip per host instead of two): nothing written, the message says what it is."""
    root = hosts.vm_host(str(tmp_path / "vm"))["root"]
    before = _digest(root)
    result = run(root, guest="refuse")
    assert result["failed"] and "tune pass not started" in result["msg"]
    assert "gpu01 (%s) is a virtual machine guest (unknown hypervisor: /proc/cpuinfo flags: " \
        "hypervisor) and not a Proxmox VE node (no /etc/pve)" % root in result["msg"]
    assert "gpuhost_allow_guest=true" in result["msg"]
    assert _digest(root) == before
    # warn: the guest is tuned, and a warning says it is one; allow (the default): silent
    allowed = run(root, check_mode=True, guest="warn")
    assert not allowed.get("failed"), allowed.get("msg")
    said = " ".join(str(w) for w in allowed.get("warnings") or [])
    assert "gpu01 is a vm guest" in said and "gpuhost_allow_guest is true" in said
    quiet = run(root, check_mode=True)
    assert "is a vm guest" not in " ".join(str(w) for w in quiet.get("warnings") or [])


def test_guest_refuse_lets_a_proxmox_node_through(seed):
    root, _built = seed
    result = run(root, check_mode=True, guest="refuse")
    assert not result.get("failed"), result.get("msg")
    assert "is a vm guest" not in " ".join(str(w) for w in result.get("warnings") or [])


def test_planned_changes_are_compared_inside_the_lock_before_any_change(seed):
    """Role apply passes the saved plan's change set: host_tune's own check-mode pass under
    its run lock must be exactly it, else the host is refused with nothing changed (the
    state may move between the apply's comparison and the tune)."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset

    root, _built = seed
    planned = changeset.changes(run(root, check_mode=True))
    assert planned
    # moved after the plan: numa_balancing set by hand
    numa = os.path.join(root, "proc/sys/kernel/numa_balancing")
    with open(numa, "w") as handle:
        handle.write("0\n")
    before = _digest(root)
    refused = run(root, planned_changes=planned)
    assert refused["failed"] and not refused["changed"]
    moved = "state moved since the plan: kernel.numa_balancing is now 0 (planned 1 -> 0)"
    assert refused["plan_moved"] == [moved]
    assert refused["msg"] == "gpu01: refused, nothing was changed: " + moved
    assert _digest(root) == before
    # the plan made from this state: applied, exactly it
    planned = changeset.changes(run(root, check_mode=True))
    done = run(root, planned_changes=planned)
    assert not done.get("failed"), done.get("msg")
    assert changeset.difference(planned, changeset.changes(done)) == []
    # a change set that is no plan's is refused before anything is read
    bad = run(root, planned_changes=[{"part": "sysctl"}])
    assert bad["failed"] and "planned_changes[0]" in bad["msg"]
