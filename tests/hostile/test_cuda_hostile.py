"""Hostile cases for the CUDA probe (issue 22): a driver library whose cuInit never returns,
one that crashes (SIGSEGV, SIGABRT), one that sees 0 devices while the PCI tree lists GPUs,
and GPUs that copy absurdly slowly, against every caller of the probe - host_audit's CUDA
pass, module cuda_probe, host_tune's bandwidth part and container_verify (reboot_verify's
container step) through the pct double. Each must return within its limit plus a small
margin, name the limit or the signal and the step, and leave no process behind.

The stand-in is tests/assets/fakecuda/fakecuda.c (FAKECUDA_HANG, FAKECUDA_CRASH,
FAKECUDA_COUNT, FAKECUDA_H2D_GBS); the probe finds it as ``libcuda.so.1`` on
LD_LIBRARY_PATH, as the real driver is found."""

import json
import os
import subprocess
import time
import uuid

import fakecuda
import pytest
from fixtures import hosts, lxc
from fixtures import pci as pcifix
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import measured
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import container
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandTimeout,
    Runner,
)
from ansible_collections.gpuhost.tuning.plugins.modules import (
    container_verify,
    cuda_probe,
    host_audit,
    host_tune,
)

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOUBLES = os.path.join(TESTS, "doubles")
# What the caller may take beyond the probe's limit: starting the child, the audit itself.
MARGIN_S = 2.0


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


@pytest.fixture
def marker(monkeypatch):
    """A variable only this test's processes carry: ``left(marker)`` lists the live ones."""
    value = uuid.uuid4().hex
    monkeypatch.setenv("GPUHOST_TEST_MARK", value)
    return value


def left(marker):
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if ("GPUHOST_TEST_MARK=%s" % marker).encode() in handle.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture
def fake(monkeypatch, lib, marker):
    """The stand-in as the host's libcuda.so.1 (LD_LIBRARY_PATH), configured per test."""
    configure = fakecuda.configurer(monkeypatch)
    monkeypatch.setenv("LD_LIBRARY_PATH", os.path.dirname(lib))
    return configure


@pytest.fixture
def vm(tmp_path):
    """A host tree with one H200 (0000:00:10.0, 32 GT/s x16) in its PCI tree."""
    return hosts.vm_host(str(tmp_path / "vm"))


def audit_with_pass(root, timeout, size_mb=1):
    """host_audit's audit with its CUDA pass (cuda.audit_pass, as host_audit wires it), on a
    tree whose PCI tree lists GPUs (host_audit itself runs the pass on / only); returns the
    audit and the seconds it took."""
    started = time.monotonic()
    result = audit.audit(root, hosts.common_wanted(), cuda_probe=lambda facts: (
        cuda.audit_pass(Runner(processes=subprocess), None, facts["lxc"], size_mb=size_mb,
                        timeout=timeout, root=root)))
    return result, time.monotonic() - started


def finding(result):
    found = [f for f in result["findings"] if f["id"] == "cuda_init_failed"]
    assert len(found) == 1, result["findings"]
    return found[0]


# --- a cuInit that never returns ---------------------------------------------------------

def test_hanging_cuinit_host_audit_returns_within_the_limit_with_the_timeout(fake, marker):
    fake(hang="cuInit")
    started = time.monotonic()
    res = run_module(host_audit, {"cuda_probe": True, "cuda_timeout": 2, "cuda_size_mb": 1})
    elapsed = time.monotonic() - started
    assert res.get("failed") is not True, res.get("msg")
    probe, = res["audit"]["cuda"]
    limit = probe["time_limit"]
    # 2 s for init, the copies at 1 GB/s and the launch round trips at their sleep, for as
    # many GPUs as this machine's PCI tree lists (8 assumed when none)
    assert limit == cuda.time_limit(2, bandwidth=True, size_mb=1, latency=True,
                                    latency_count=cuda.AUDIT_LATENCY_COUNT,
                                    gpus=len(cuda.nvidia_gpus("/"))) <= 8
    assert limit <= elapsed < limit + MARGIN_S, (limit, elapsed)
    assert probe["timed_out"] is True and probe["step"] == "cuInit"
    assert probe["msg"].startswith("CUDA check failed on host: the CUDA probe did not return "
                                   "in %d s (in step: cuInit): killed; cause: the driver did "
                                   "not answer" % limit)
    assert left(marker) == []


def test_hanging_cuinit_is_cuda_init_failed_naming_the_timeout(fake, vm, marker):
    fake(devices=vm["gpu"], hang="cuInit")
    result, elapsed = audit_with_pass(vm["root"], timeout=2)
    found = finding(result)
    limit = result["cuda"][0]["time_limit"]
    assert limit <= elapsed < limit + MARGIN_S
    assert found["severity"] == "critical" and found["subject"] == "host"
    assert found["current"] == "no answer in %d s (in step: cuInit): killed" % limit
    assert found["remedy"].startswith("the driver did not answer: a GPU that fell off the bus")
    assert "did not return in %d s" % limit in found["detail"]
    assert left(marker) == []


# --- a library that crashes --------------------------------------------------------------

@pytest.mark.parametrize("how,signal", [("segv", "SIGSEGV"), ("abort", "SIGABRT")])
def test_crashing_cuinit_is_cuda_init_failed_naming_the_signal(fake, vm, how, signal):
    fake(devices=vm["gpu"], crash="cuInit:" + how)
    result, elapsed = audit_with_pass(vm["root"], timeout=20)
    assert elapsed < 5
    found = finding(result)
    assert found["current"] == "killed by %s (in step: cuInit)" % signal
    assert found["remedy"].startswith("the CUDA driver library crashed the process")


def test_crashing_library_does_not_take_host_audit_down(fake):
    fake(crash="cuInit:segv")
    res = run_module(host_audit, {"cuda_probe": True, "cuda_size_mb": 1})
    assert res.get("failed") is not True, res.get("msg")
    assert res["audit"]["cuda"][0]["signal"] == "SIGSEGV"
    assert res["headline"]          # the report's line is there: the audit finished


def test_crash_in_a_copy_names_the_gpu_and_direction(fake, vm):
    fake(devices=vm["gpu"], crash="cuMemcpyDtoH_v2:segv")
    result, _elapsed = audit_with_pass(vm["root"], timeout=20)
    assert finding(result)["current"] == (
        "killed by SIGSEGV (in step: GPU 0 (%s): device-to-host copies)" % vm["gpu"])


# --- 0 devices where the PCI tree lists GPUs ---------------------------------------------

def test_zero_devices_with_gpus_in_sysfs_fails_naming_them(fake, vm, tmp_path):
    second = pcifix.vm_gpu(vm["root"], "0000:00:11.0")
    fake(devices=vm["gpu"], count=0)
    res = run_module(cuda_probe, {"root": vm["root"]})
    assert res["failed"] is True
    assert res["msg"].startswith(
        "CUDA check failed on host: cuInit(0) succeeded but CUDA sees 0 devices "
        "(cuDeviceGetCount), although the PCI tree lists 2 NVIDIA GPUs: %s, %s; cause: "
        % (vm["gpu"], second))
    result, _elapsed = audit_with_pass(vm["root"], timeout=20)
    found = finding(result)
    assert found["current"] == ("cuInit(0) succeeded but CUDA sees 0 devices "
                                "(cuDeviceGetCount), although the PCI tree lists 2 NVIDIA "
                                "GPUs: %s, %s" % (vm["gpu"], second))


# --- absurdly slow copies ----------------------------------------------------------------

def test_absurdly_slow_copies_are_bounded_and_name_the_copy(fake, vm, marker):
    fake(devices=vm["gpu"], h2d_gbs="0.000001")     # 256 MiB would take 3 days
    started = time.monotonic()
    res = run_module(cuda_probe, {"bandwidth": True, "size_mb": 4, "repeats": 2,
                                  "timeout": 2, "root": vm["root"]})
    elapsed = time.monotonic() - started
    # 2 s + 1 GPU x 2 directions x 3 copies of 4 MiB at 1 GB/s (0.03 s, rounded up): 3 s
    assert res["time_limit"] == 3 and 3 <= elapsed < 3 + MARGIN_S, elapsed
    assert res["failed"] is True and res["timed_out"] is True
    assert res["step"] == "GPU 0 (%s): host-to-device copies" % vm["gpu"]
    assert "the copies ran slower than 1 GB/s" in res["msg"]
    assert left(marker) == []


def test_hanging_bandwidth_measurement_fails_the_part_and_the_others_run(
        fake, vm, monkeypatch, marker):
    monkeypatch.setattr(measured, "is_live", lambda _root: True)   # the tree as the host
    fake(devices=vm["gpu"], hang="cuInit")
    started = time.monotonic()
    res = run_module(host_tune, hosts.as_wanted({"root": vm["root"], "host": "gpu01",
                                                 "parts": ["sysctl", "bandwidth"],
                                                 "sysctl": hosts.common_wanted()["sysctl"],
                                                 "bandwidth_size_mb": 1, "bandwidth_repeats": 1,
                                                 "bandwidth_timeout": 1}))
    elapsed = time.monotonic() - started
    # before and after: 1 s + 1 GPU x 4 copies of 1 MiB, rounded up: 2 s each
    assert 4 <= elapsed < 4 + 2 * MARGIN_S, elapsed
    assert res["failed"] is True
    assert res["failures"][0] == ("bandwidth_before: CUDA check failed on host: the CUDA "
                                  "probe did not return in 2 s (in step: cuInit): killed; "
                                  "cause: " + res["parts"]["bandwidth_before"]["cause"])
    assert res["parts"]["sysctl"]["changed"] is True
    assert left(marker) == []


# --- inside a container (reboot_verify's container step, through the pct double) -----------

@pytest.fixture
def pve(tmp_path, monkeypatch, lib, marker):
    """A Proxmox host tree whose container 129 has right rules and is running; its python3
    finds the stand-in (the double's cuda_env), which behaves as ``ct_env`` says."""
    root = str(tmp_path / "host")
    lxc.seed_host(root, era="after", config_era="after")
    lxc.container_129(root, era="after")
    state = os.path.join(root, "var/lib/gpuhost-doubles")
    os.makedirs(state)
    monkeypatch.setenv("GPUHOST_DOUBLES_ROOT", root)
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ["PATH"])
    for key in ("GPUHOST_DOUBLES_LOG", "GPUHOST_DOUBLES_STATE"):
        monkeypatch.delenv(key, raising=False)

    def ct_env(**settings):
        env = fakecuda.pct_cuda_env(**settings)
        env["GPUHOST_TEST_MARK"] = marker           # the container's own environment
        with open(os.path.join(state, "pct.json"), "w") as handle:
            json.dump({"node": "pve1", "cuda_env": env,
                       "containers": {"129": {"status": "running"}}}, handle)
        return root
    return ct_env


def test_hanging_cuinit_in_a_container_fails_it_by_name_within_the_limit(pve, marker):
    root = pve(hang="cuInit")
    started = time.monotonic()
    res = run_module(container_verify, {"vmid": 129, "root": root, "cuda_timeout": 2})
    elapsed = time.monotonic() - started
    assert 2 <= elapsed < 2 + MARGIN_S, elapsed
    assert res.get("failed") is not True, res.get("msg")
    ct = res["container"]
    assert ct["cuda"]["timed_out"] is True and ct["cuda"]["step"] == "cuInit"
    problem, = ct["problems"]
    assert problem.startswith("CUDA: pct exec 129 -- python3 - did not return in 2 s (in "
                              "step: cuInit): killed; cause: the driver did not answer")
    # the role's gate names the container first: "containers failed: 129: CUDA: ..."
    assert ct["vmid"] == 129
    assert left(marker) == []        # pct, the double's python3 child: all killed


def test_crashing_library_in_a_container_is_named_by_signal(pve):
    root = pve(crash="cuInit:abort")
    res = run_module(cuda_probe, {"vmid": 129, "root": root})
    assert res["failed"] is True and res["signal"] == "SIGABRT"
    assert res["msg"].startswith("CUDA check failed on container 129: pct exec 129 -- "
                                 "python3 - was killed by SIGABRT (in step: cuInit)")


class HangingSmi(object):
    """A runner whose ``pct exec .. nvidia-smi -L`` does not return in its limit."""

    def __init__(self):
        self.calls = []

    def run(self, argv, check=True, data=None, timeout=None, **unused):
        self.calls.append((list(argv), timeout))
        raise CommandTimeout(argv, timeout, "", "")


def test_a_hanging_gpu_listing_is_a_problem_and_skips_the_checks_that_would_hang_too():
    runner = HangingSmi()
    record = {"problems": [], "gpus": 0, "gpu_check": None, "cuda": None,
              "cuda_check": None}
    params = {"gpu_check": ["nvidia-smi", "-L"], "cuda_probe": True, "cuda_timeout": 7,
              "cuda_check": ["python3", "-c", "import torch"], "cuda_expect": "True",
              "root": "/"}
    container.in_container_checks(params, runner, 129, record)
    assert runner.calls == [(["pct", "exec", "129", "--", "nvidia-smi", "-L"], 7)]
    assert record["problems"] == ["pct exec 129 -- nvidia-smi -L did not return in 7 s "
                                  "(killed)"]
