"""driver_state main(): options, failures a user reads, read-only in and out of check mode."""

import os

import pytest
from digest import changed, digest
from fixtures import driver
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import driver_state


@pytest.fixture
def host(tmp_path):
    return driver.upgrade_host(tmp_path / "host", staged=True, ct_version=driver.OLD)["root"]


def test_the_gate_refusal_is_a_result_not_a_failure_and_nothing_changes(host):
    before = digest(os.path.dirname(host))
    result = run_module(driver_state, {"root": host, "target_version": driver.NEW})
    assert "failed" not in result and result["changed"] is False
    assert result["gate"] == {"ok": False, "refusals": [
        "129: user space 580.95.05, target 590.48.01 (installed-deb): stage it"]}
    assert [c["vmid"] for c in result["containers"]] == ["129", "131"]
    assert result["host"]["kernels"] == {"running": driver.RUNNING, "next": driver.NEXT}
    assert changed(before, digest(os.path.dirname(host))) == []
    assert run_module(driver_state, {"root": host, "target_version": driver.NEW},
                      check_mode=True) == result


def test_without_a_target_there_is_no_gate(host):
    result = run_module(driver_state, {"root": host})
    assert "gate" not in result and result["host"]["loaded"]["version"] == driver.OLD


def test_options_reach_the_gate(host):
    result = run_module(driver_state, {"root": host, "target_version": driver.OLD,
                                       "phase": "after_boot", "containers": [129],
                                       "next_kernel": driver.RUNNING})
    assert result["gate"] == {"ok": True, "refusals": []}
    assert [c["vmid"] for c in result["containers"]] == ["129"]


@pytest.mark.parametrize("args,words", [
    ({"target_version": "590.48.01-1"}, ["target_version: '590.48.01-1' is not an NVIDIA "
                                         "driver version NNN.NN.NN", "nothing was read"]),
    ({"target_version": "latest"}, ["target_version: 'latest'"]),
    ({"next_kernel": "6.14 ; reboot"}, ["next_kernel"]),
    ({"containers": [12]}, ["containers: 12 is not allowed"]),
    ({"containers": [129, 140]}, ["driver_state: containers: no config for 140",
                                  "containers here: 129, 130, 131"]),
    ({"phase": "later"}, ["phase", "before_reboot, after_boot"]),
    ({"root": ""}, ["root"]),
])
def test_bad_options_fail_with_what_was_wrong(host, args, words):
    params = {"root": host}
    params.update(args)
    result = run_module(driver_state, params)
    assert result.get("failed") is True and not result.get("changed"), result
    for word in words:
        assert word in result["msg"], result["msg"]


def test_a_host_file_that_is_a_fifo_fails_naming_it(host):
    status = os.path.join(host, "var/lib/dpkg/status")
    if os.path.exists(status):
        os.unlink(status)
    os.makedirs(os.path.dirname(status), exist_ok=True)
    os.mkfifo(status)
    result = run_module(driver_state, {"root": host})
    assert result.get("failed") is True
    assert "var/lib/dpkg/status: a FIFO, not a regular file" in result["msg"]
