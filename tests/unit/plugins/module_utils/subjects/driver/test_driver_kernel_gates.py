"""The known-bad driver x kernel pairs stop both upgrades before anything changes:
kernel_state names the pair for kernel_upgrade's target (role kernel_upgrade fails on it
before installing the kernel's packages), driver_stage refuses to stage a driver for a
kernel it does not build for. Trees from tests/fixtures (dkms tree layout as dkms writes
it; kernel 7.0.2-6-pve as Proxmox VE 9.2's pveversion names it)."""

import pytest
from fixtures import dkms, driver
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import kernel_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage import (
    Stager,
    StageError,
)

PVE92 = "7.0.2-6-pve"


def test_kernel_state_names_the_installed_driver_that_does_not_build_for_the_target(tmp_path):
    root = str(tmp_path)
    dkms.kernel_tree(root, driver.RUNNING, headers=True)
    dkms.proc_running(root, driver.RUNNING)
    dkms.dkms_tree(root, "nvidia", "580.119.02", installed=[driver.RUNNING])
    res = run_module(kernel_state, {"root": root, "kernel": PVE92})
    assert len(res["known_bad"]) == 1
    assert "580.119.02" in res["known_bad"][0] and "580.142" in res["known_bad"][0]
    assert "nvidia-all/issues/379" in res["known_bad"][0]
    # the running series, or no target: nothing to refuse
    assert run_module(kernel_state, {"root": root, "kernel": driver.RUNNING})["known_bad"] == []
    assert run_module(kernel_state, {"root": root})["known_bad"] == []


class _NoRun(object):
    calls = []

    def run(self, args, check=True, timeout=None):  # pragma: no cover - must not be called
        raise AssertionError("ran %r" % (args,))


def test_driver_stage_refuses_a_driver_for_a_kernel_it_does_not_build_for(tmp_path):
    root = driver.host_base(tmp_path, loaded=None)
    dkms.kernel_tree(root, PVE92, headers=True)
    state = {"host": {"installed": {"method": "nvidia-repo", "version": driver.OLD,
                                    "packages": [{"name": "nvidia-dkms-595-open",
                                                  "version": driver.OLD + "-0ubuntu1"}]},
                      "kernels": {"running": driver.RUNNING, "next": PVE92}},
             "containers": []}
    stager = Stager(_NoRun(), root, "595.71.05", "apt", state,
                    {"apt_cache": "apt-cache", "apt_get": "apt-get"})
    with pytest.raises(StageError) as err:
        stager.plan_host()
    text = str(err.value)
    assert "not staging 595.71.05 (nothing changed)" in text
    assert "kernel %s" % PVE92 in text and "595.91.07 or later" in text
    assert "open-gpu-kernel-modules/pull/1168" in text
