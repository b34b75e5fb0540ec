"""The runner's ``timeout``: the command and everything in its process group killed at the
limit (coreutils ``timeout``), a clear CommandTimeout naming the command and the limit, on
both paths (plain subprocess and AnsibleModule.run_command); without ``timeout`` the default
limit, never none."""

import os
import subprocess
import time
import uuid

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import runner as runner_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    CommandTimeout,
    Runner,
)


def alive_with(marker, settle=5.0):
    """PIDs of this user's processes whose environment holds ``marker``, after up to
    ``settle`` seconds for killed ones to be reaped (a loaded machine, or a PID namespace
    whose init reaps late, shows a killed child for a moment)."""
    deadline = time.monotonic() + settle
    while True:
        found = _alive_with(marker)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _alive_with(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.fixture
def marker(monkeypatch):
    """An environment variable only the commands of this test carry."""
    value = "GPUHOST_TEST_MARK=%s" % uuid.uuid4().hex
    monkeypatch.setenv(*value.split("=", 1))
    return value


@pytest.fixture
def module_runner():
    """A Runner on a real AnsibleModule: commands go through run_command."""
    with patch_module_args({}):
        module = AnsibleModule(argument_spec={})
    return Runner(module)


@pytest.fixture(params=["subprocess", "run_command"])
def any_runner(request, module_runner):
    return Runner(processes=subprocess) if request.param == "subprocess" else module_runner


def test_a_command_past_its_limit_is_killed_with_its_group_and_named(any_runner, marker):
    # 3 s, not 1: on a loaded 2-core machine (the controller-next lane beside molecule) a
    # cold `sh` once took over a second to print its first line, and the kill came first
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as caught:
        any_runner.run(["sh", "-c", "echo started; echo on-stderr >&2; sleep 60 & sleep 60"],
                       timeout=3)
    elapsed = time.monotonic() - started
    assert 3.0 <= elapsed < 6.0
    assert str(caught.value) == ("sh -c echo started; echo on-stderr >&2; sleep 60 & sleep 60 "
                                 "did not return in 3 s (killed)")
    assert (caught.value.out, caught.value.err, caught.value.seconds) == (
        "started\n", "on-stderr\n", 3)
    assert caught.value.rc is None
    # the background sleep was in the command's process group: gone too
    assert alive_with(marker) == []


def test_a_command_ignoring_sigterm_gets_sigkill(any_runner, marker, monkeypatch):
    monkeypatch.setattr(runner_mod, "KILL_AFTER_S", 1)
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        any_runner.run(["sh", "-c", "trap '' TERM; sleep 60"], timeout=1)
    assert 2.0 <= time.monotonic() - started < 10.0   # not the 60 s it asked for (loaded CI)
    assert alive_with(marker) == []


def test_check_false_still_raises_on_timeout():
    with pytest.raises(CommandTimeout):
        Runner(processes=subprocess).run(["sleep", "60"], check=False, timeout=0.5)


def test_a_command_that_exits_124_in_time_is_not_a_timeout(any_runner):
    assert any_runner.run(["sh", "-c", "echo out; exit 124"], check=False, timeout=20) == (
        124, "out\n", "")


def test_within_the_limit_the_result_is_the_command_s_own(any_runner):
    rc, out, err = any_runner.run(["sh", "-c", "cat /proc/$PPID/comm; exit 3"], check=False,
                                  timeout=20)
    assert (rc, out, err) == (3, "timeout\n", "")       # it ran under coreutils timeout
    assert any_runner.calls[-1] == ["sh", "-c", "cat /proc/$PPID/comm; exit 3"]


def test_without_timeout_the_default_limit_bounds_the_command(any_runner, marker, monkeypatch):
    """No command runs unbounded: a caller that names no limit gets DEFAULT_TIMEOUT_S."""
    rc, out, _err = any_runner.run(["sh", "-c", "cat /proc/$PPID/comm"])
    assert (rc, out) == (0, "timeout\n")
    monkeypatch.setattr(runner_mod, "DEFAULT_TIMEOUT_S", 1)
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match=r"sleep 60 did not return in 1 s"):
        any_runner.run(["sh", "-c", "sleep 60"], check=False)
    assert time.monotonic() - started < 10
    assert alive_with(marker) == []


def test_a_hanging_query_of_the_audit_is_an_error_not_a_hang(tmp_path, marker, monkeypatch):
    """nvidia-smi that never answers (a wedged driver): the command outputs record the
    timeout as the output's error and the audit goes on."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import nvsmi
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nsleep 600\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    monkeypatch.setattr(nvsmi, "QUERY_TIMEOUT_S", 1)
    outputs = cmdout.CommandOutputs("/", Runner(processes=subprocess))
    started = time.monotonic()
    assert outputs.get(nvsmi.OUTPUT_NAME, nvsmi.run) is None
    assert time.monotonic() - started < 10
    assert "nvidia-smi -q -x did not return in 1 s" in outputs.info[nvsmi.OUTPUT_NAME]["error"]
    assert alive_with(marker) == []


@pytest.mark.parametrize("bad", [0, -1, "abc"])
def test_a_bad_limit_is_refused(bad):
    with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
        Runner(processes=subprocess).run(["true"], timeout=bad)


def test_a_runner_without_module_or_launcher_runs_nothing_and_says_why(marker):
    """Module code has its AnsibleModule; a Runner given neither it nor ``processes`` (the
    launcher only a program outside Ansible passes) refuses instead of running."""
    runner = Runner()
    assert runner.which("sh")
    with pytest.raises(CommandError) as caught:
        runner.run(["sh", "-c", "sleep 60"], timeout=5)
    assert "neither an AnsibleModule" in str(caught.value)
    assert "Runner(processes=subprocess)" in str(caught.value)
    assert alive_with(marker) == []
