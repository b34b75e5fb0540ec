"""Module driver_stage's own checks: the options refused before anything runs, and a root
other than ``/`` refused unless every program acting on it is given (the real apt-get,
dkms and installer act on ``/``). Staging itself, with the stand-in programs, is
tests/integration/test_driver_upgrade.py and test_driver_stage.py."""

import pytest
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import driver_stage

STATE = {"host": {"version": "580.159.04"}, "containers": []}


def _run(tmp_path, **args):
    base = {"root": str(tmp_path), "version": "590.48.01", "source": "apt", "state": STATE}
    base.update(args)
    return run_module(driver_stage, base)


@pytest.mark.parametrize("args,text", [
    ({"version": "latest"}, "version: 'latest' is not allowed: an NVIDIA driver version"),
    ({"version": "590.48.01-1"}, "version: "),
    ({"kernels": ["../x"]}, "kernel releases like"),
    ({"containers": [5]}, "containers: 5 is not allowed: an integer from 100"),
    ({"timeout": 0}, "timeout: 0 is not allowed"),
    ({"install_timeout": 90000}, "install_timeout: 90000 is not allowed"),
    ({"run_file": "/../../x.run", "source": "run"}, "outside root"),
    ({"state": {"containers": []}}, "the registered result of gpuhost.tuning.driver_state"),
])
def test_bad_options_are_refused_before_anything_runs(tmp_path, args, text):
    res = _run(tmp_path, **args)
    assert res["failed"] and res["msg"].startswith("driver_stage: ") and text in res["msg"], res
    assert res["msg"].endswith("(nothing was read or written)")


@pytest.mark.parametrize("source,missing", [("apt", "apt_cache"), ("run", "dkms")])
def test_another_root_needs_the_programs_that_act_on_it(tmp_path, source, missing):
    res = _run(tmp_path, source=source, run_file="/root/NVIDIA-Linux-x86_64-590.48.01.run")
    assert res["failed"] and res["changed"] is False
    assert res["msg"] == ("driver_stage: root %s needs %s: a program that acts on that root "
                          "(the real one acts on /); nothing was changed" % (tmp_path, missing))
