"""gpu_reset: the driver's answers to ``nvidia-smi -r -i`` (the texts NVIDIA's tool prints,
sources in the module's docstring) sorted into outcomes, and a reset that hangs killed at
its limit and reported, never waited on."""

import subprocess
import time

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandTimeout,
    Runner,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.recovery import gpu_reset

GPU = "0000:1a:00.0"
IN_USE = ("The following GPUs could not be reset:\n  GPU 00000000:1A:00.0: In use by another "
          "client\n\n1 device is currently being used by one or more other processes (e.g. "
          "Fabric Manager, CUDA application, graphics application such as an X server, or a "
          "monitoring application such as another instance of nvidia-smi). Please first kill "
          "all processes using this device and all compute applications running in the "
          "system.\n")
IN_USE_OLD = ("Unable to reset this GPU because it's being used by some other process (e.g. "
              "CUDA application, graphics application like X server, monitoring application "
              "like other instance of nvidia-smi). Please first kill all processes using this "
              "GPU and all compute applications running in the system (even when they are "
              "running on other GPUs) and then try to reset the GPU again.\n"
              "Terminating early due to previous errors.\n")


@pytest.mark.parametrize("rc,out,outcome", [
    (0, "GPU 00000000:1A:00.0 was successfully reset.\n", "reset"),
    (255, IN_USE, "in_use"),
    (255, IN_USE_OLD, "in_use"),
    (3, "Resetting GPU 00000000:1A:00.0 is not supported.\n", "not_supported"),
    (3, "GPU Reset couldn't run because GPU 00000000:1A:00.0 is the primary GPU.\n",
     "not_supported"),
    (15, "Unable to determine the device handle for GPU 00000000:1A:00.0: GPU is lost.  "
         "Reboot the system to recover this GPU\n", "failed"),
    (0, "GPU 00000000:1B:00.0 was successfully reset.\n", "failed"),
])
def test_the_driver_answers(rc, out, outcome):
    got = gpu_reset.parse(rc, out, "", GPU)
    assert got["outcome"] == outcome, got
    assert got["message"].startswith(" ".join(out.split())[:40]) or outcome == "failed"


def test_nvlink_peers_the_driver_asks_for_are_named_not_added():
    # nvidia-smi(1) says only that the error identifies the additional GPUs; this text is
    # made up in that shape (no quoted sample found), so the parse keys on NVLink + buses.
    text = ("GPU 00000000:1A:00.0 could not be reset: the following GPUs are connected by "
            "NVLink and must be reset with it: 00000000:1B:00.0, 00000000:1C:00.0\n")
    got = gpu_reset.parse(255, text, "", GPU)
    assert (got["outcome"], got["peers"]) == ("peers_required",
                                              ["0000:1b:00.0", "0000:1c:00.0"])


def test_a_reset_exiting_0_without_naming_the_gpu_is_no_success():
    got = gpu_reset.parse(0, "", "", GPU)
    assert got["outcome"] == "failed" and "without naming 0000:1a:00.0" in got["message"]


class Hung(object):
    def __init__(self):
        self.calls = []

    def run(self, argv, check=True, timeout=None, **kwargs):
        self.calls.append((list(argv), timeout))
        raise CommandTimeout(argv, timeout, "", "")


def test_a_hanging_reset_is_killed_at_its_limit_and_reported():
    runner = Hung()
    got = gpu_reset.reset(runner, "nvidia-smi", GPU, timeout=7)
    assert runner.calls == [(["nvidia-smi", "-r", "-i", GPU], 7)]
    assert got["outcome"] == "timed_out" and got["rc"] is None
    assert "did not return in 7 s: killed" in got["message"]


def test_a_real_hang_is_bounded(tmp_path):
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nsleep 60\n")
    tool.chmod(0o755)
    started = time.monotonic()
    got = gpu_reset.reset(Runner(processes=subprocess), str(tool), GPU, timeout=1)
    assert got["outcome"] == "timed_out" and time.monotonic() - started < 10


def test_persistence_is_switched_for_the_one_gpu():
    class Ok(object):
        calls = []

        def run(self, argv, check=True, timeout=None, **kwargs):
            self.calls.append(list(argv))
            return 0, "Disabled persistence mode for GPU 00000000:1A:00.0.\nAll done.\n", ""
    runner = Ok()
    assert gpu_reset.set_persistence(runner, "nvidia-smi", GPU, False) is None
    assert runner.calls == [["nvidia-smi", "-pm", "0", "-i", GPU]]


def test_bus_ids_in_the_driver_form_are_normalised():
    assert gpu_reset.normalize("00000000:1A:00.0") == GPU
    assert gpu_reset.normalize("1a:00.0") == GPU
