"""engines/plan/changeset: a host's planned changes from host_tune's check-mode result
(the seed host for real), their fingerprint, summary lines, group key, refusal and the
difference between a plan and the host now."""

import os

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune


def _plan(root, name="gpu01"):
    return tune.tune_run({"root": root, "wanted": hosts.common_wanted(name)}, check_mode=True)


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("plan") / "seed")
    built = hosts.seed_host(root)
    return root, built, _plan(root)


def row(part, item, before, after, status="changed", note=""):
    return {"part": part, "item": item, "before": before, "after": after, "status": status,
            "note": note}


def test_changes_of_the_seed_host_in_part_order(seed):
    _root, built, result = seed
    got = changeset.changes(result)
    assert [c["part"] for c in got] == (["sysctl"] * 10 + ["cpuidle"] + ["pcie"] * 16
                                        + ["boot_service"])
    assert set(got[0]) == {"part", "item", "before", "after"}
    assert {"part": "sysctl", "item": "kernel.numa_balancing", "before": "1",
            "after": "0"} in got
    assert {"part": "pcie", "item": built["gpus"][0] + " endpoint MRRS", "before": 512,
            "after": 4096} in got
    assert changeset.refusal(result) is None


def test_summary_folds_devices_and_cpus(seed):
    lines = changeset.summary(changeset.changes(seed[2]))
    assert lines[:2] == ["/etc/sysctl.d/99-gpuhost-tuning.conf written",
                         "kernel.nmi_watchdog 1 -> 0"]
    assert "kernel.numa_balancing 1 -> 0" in lines
    assert "C2 disabled on 128 CPUs" in lines
    assert "MRRS 512 -> 4096 on 16 devices" in lines
    assert lines[-1] == "gpuhost-tuning.service enabled"
    assert len(lines) == 13


def test_fingerprint_and_group_key():
    one = [row("sysctl", "kernel.numa_balancing", "1", "0"),
           row("pcie", "0000:01:00.0 endpoint MRRS", 512, 4096)]
    other = [row("pcie", "0000:41:00.0 endpoint MRRS", 512, 4096),
             row("sysctl", "kernel.numa_balancing", "1", "0")]
    a, b = changeset.changes({"rows": one}), changeset.changes({"rows": other})
    assert a[0]["part"] == "sysctl"  # part order, not the rows' order
    assert changeset.fingerprint(a) != changeset.fingerprint(b)  # another device
    assert changeset.group_key(a) == changeset.group_key(b)  # the same change
    assert changeset.fingerprint(a) == changeset.fingerprint(list(reversed(a)))
    assert len(changeset.fingerprint(a)) == 64
    moved = changeset.changes({"rows": [row("sysctl", "kernel.numa_balancing", "2", "0"),
                                        row("pcie", "0000:01:00.0 endpoint MRRS", 512, 4096)]})
    assert changeset.fingerprint(moved) != changeset.fingerprint(a)
    assert changeset.group_key(moved) != changeset.group_key(a)
    assert changeset.fingerprint([]) == changeset.fingerprint(changeset.changes({}))


def test_only_change_statuses_are_changes():
    rows = [row("sysctl", "vm.swappiness", "10", "10", "ok"),
            row("sysctl", "kernel.nmi_watchdog", "1", None, "failed", "read-only"),
            row("nvidia_peermem", "nvidia_peermem", "", "", "planned", "load"),
            row("device_nodes", "gpuhost-nvidia-device-nodes.service", "", "", "off"),
            row("bandwidth", "GPU0 h2d", "25.1", "25.3", "same")]
    got = changeset.changes({"rows": rows})
    assert got == [{"part": "nvidia_peermem", "item": "nvidia_peermem", "before": "",
                    "after": ""}]
    assert changeset.refusal({"rows": rows}) == (
        "sysctl kernel.nmi_watchdog: failed (read-only)")


def test_summary_cpu_lists_and_counts():
    lines = changeset.summary([
        {"part": "cpuidle", "item": "C2 (800 us)", "before": "disabled on CPUs 0-63",
         "after": "disabled on CPUs 0-127"},
        {"part": "cpuidle", "item": "C3 (1000 us)", "before": "disabled on CPUs 0-3",
         "after": "disabled on CPUs none"},
        {"part": "pcie", "item": "0000:01:00.0 endpoint MRRS", "before": 512, "after": 4096},
        {"part": "numa_pin", "item": "lxc 129", "before": "", "after": "0-15"}])
    assert lines == ["C2 disabled on 64 CPUs (already on 64)", "C3 enabled again on 4 CPUs",
                     "MRRS 512 -> 4096 on 1 device", "lxc 129 0-15"]


def test_refusal_of_failed_unreachable_and_missing_results():
    assert changeset.refusal(None) == "no host_tune result (the host was not reached)"
    assert changeset.refusal({"unreachable": True, "msg": "ssh: timed out"}) == (
        "unreachable: ssh: timed out")
    assert changeset.refusal({"failed": True, "msg": "gpu09: tune pass not started: a "
                              "guest"}) == "gpu09: tune pass not started: a guest"
    assert changeset.refusal({"failed": True, "failures": ["snapshot: disk full"],
                              "rows": []}) == "snapshot: disk full"
    assert changeset.refusal({"skipped": True}) == "host_tune did not run (skipped)"


def test_a_guest_is_refused_by_host_tune(tmp_path):
    root = str(tmp_path / "vm")
    hosts.vm_host(root)
    with pytest.raises(ValueError) as err:
        tune.tune_run({"root": root, "wanted": hosts.common_wanted("vm"), "guest": "refuse"},
                      check_mode=True)
    text = changeset.refusal({"failed": True, "msg": "tune pass not started: %s" % err.value})
    assert "guest" in text


def test_difference_names_what_moved(seed, tmp_path):
    planned = changeset.changes(seed[2])
    assert changeset.difference(planned, planned) == []
    assert changeset.difference(planned, seed[2]) == []
    root = str(tmp_path / "seed")
    hosts.seed_host(root)
    with open(os.path.join(root, "proc/sys/kernel/numa_balancing"), "w") as handle:
        handle.write("0\n")
    with open(os.path.join(root, "proc/sys/vm/swappiness"), "w") as handle:
        handle.write("30\n")
    now = _plan(root)
    assert changeset.difference(planned, now) == [
        "state moved since the plan: kernel.numa_balancing is now 0 (planned 1 -> 0)",
        "state moved since the plan: vm.swappiness is now 30 (planned 60 -> 10)"]
    # with the change list alone, a change no longer needed cannot name the value now
    assert changeset.difference(planned, changeset.changes(now))[0] == (
        "planned but no longer needed: sysctl kernel.numa_balancing 1 -> 0")
    extra = changeset.changes({"rows": [row("sysctl", "kernel.foo", "1", "2")]})
    assert changeset.difference([], extra) == ["not in the plan: sysctl kernel.foo 1 -> 2"]
    wanted = [dict(planned[0], after="x")]
    assert changeset.difference(planned[:1], wanted)[0].startswith(
        "the wanted value changed since the plan: ")
