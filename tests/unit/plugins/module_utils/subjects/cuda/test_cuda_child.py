"""The CUDA probe as a bounded child process (cuda.probe_host, cuda.child_result,
cuda.time_limit): the stand-in libcuda.so.1 hanging, crashing, seeing no GPU or copying
absurdly slowly, and what the caller gets back (the step, the limit, the signal)."""

import os
import subprocess
import time

import fakecuda
import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from ansible_collections.gpuhost.tuning.plugins.modules import cuda_probe

MIB = 1 << 20


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


@pytest.fixture
def fake(monkeypatch):
    return fakecuda.configurer(monkeypatch)


def gpu_tree(root, functions):
    """``{bdf: (vendor, class, driver or None)}`` as sysfs PCI functions under ``root``."""
    for bdf, (vendor, klass, driver) in functions.items():
        folder = os.path.join(str(root), "sys/bus/pci/devices", bdf)
        os.makedirs(folder)
        with open(os.path.join(folder, "vendor"), "w") as handle:
            handle.write(vendor + "\n")
        with open(os.path.join(folder, "class"), "w") as handle:
            handle.write(klass + "\n")
        if driver:
            os.symlink("../../../bus/pci/drivers/%s" % driver, os.path.join(folder, "driver"))
    return str(root)


# --- the limit ---------------------------------------------------------------------------

def test_limit_is_the_timeout_without_copies_and_grows_with_what_is_copied():
    assert cuda.time_limit(30) == 30
    # 1 GPU, 2 directions x (warm-up + 5) copies of 256 MiB at 1 GB/s: 3.2 s -> 4 s more
    assert cuda.time_limit(30, bandwidth=True, size_mb=256, repeats=5, gpus=1) == 34
    # 8 GPUs: 25.8 s more; peer adds 8 x 7 ordered pairs x 6 copies (90.2 s): 116 s more
    assert cuda.time_limit(30, bandwidth=True, gpus=8) == 56
    assert cuda.time_limit(30, bandwidth=True, peer=True, gpus=8) == 30 + 116
    # no GPU in the PCI tree (a container's view): 8 assumed
    assert cuda.time_limit(30, bandwidth=True, gpus=0) == \
        cuda.time_limit(30, bandwidth=True, gpus=8)


def test_nvidia_gpus_are_display_and_3d_functions_and_passthrough_ones_can_be_left_out(tmp_path):
    root = gpu_tree(tmp_path, {
        "0000:41:00.0": ("0x10de", "0x030200", "nvidia"),
        "0000:41:00.1": ("0x10de", "0x040300", "snd_hda_intel"),   # the GPU's audio function
        "0000:81:00.0": ("0x10de", "0x030000", "vfio-pci"),        # a VM's GPU
        "0000:c1:00.0": ("0x10de", "0x030200", None),              # no driver bound
        "0000:03:00.0": ("0x1a03", "0x030000", "ast"),             # the BMC's VGA
    })
    assert cuda.nvidia_gpus(root) == ["0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"]
    assert cuda.nvidia_gpus(root, passthrough=False) == ["0000:41:00.0", "0000:c1:00.0"]
    assert cuda.nvidia_gpus(str(tmp_path / "nowhere")) == []


# --- reading what the child left ---------------------------------------------------------

STEPS = "".join(cuda.STEP_PREFIX + s + "\n" for s in ("loading libcuda.so.1", "cuInit"))


def test_a_killed_child_is_named_with_the_limit_and_its_last_step():
    res = cuda.child_result(None, "", STEPS, "libcuda.so.1", "the CUDA probe", 30,
                            timed_out=True)
    assert res["error"] == "the CUDA probe did not return in 30 s (in step: cuInit): killed"
    assert (res["timed_out"], res["step"], res["time_limit"], res["signal"]) == (
        True, "cuInit", 30, None)
    assert res["cause"].startswith("the driver did not answer: a GPU that fell off the bus")


def test_a_child_stuck_in_its_copies_is_called_slow():
    err = STEPS + cuda.STEP_PREFIX + "GPU 0 (0000:41:00.0): host-to-device copies\n"
    res = cuda.child_result(None, "", err, "libcuda.so.1", "the CUDA probe", 34,
                            timed_out=True)
    assert res["step"] == "GPU 0 (0000:41:00.0): host-to-device copies"
    assert res["cause"].startswith("the copies ran slower than 1 GB/s")


@pytest.mark.parametrize("rc,fault,want", [
    (-11, "", "SIGSEGV"),                                       # the host child, rc from wait
    (245, "Fatal Python error: Segmentation fault\n", "SIGSEGV"),   # through pct exec
    (134, "Fatal Python error: Aborted\n\nCurrent thread 0x7f (most recent call first):\n",
     "SIGABRT"),
    (-7, "", "SIGBUS"),
])
def test_a_crash_is_named_by_its_signal_and_step(rc, fault, want):
    res = cuda.child_result(rc, "", STEPS + fault, "libcuda.so.1", "pct exec 129 -- python3 -",
                            30, vmid=129)
    assert res["signal"] == want and res["timed_out"] is False
    assert res["error"] == "pct exec 129 -- python3 - was killed by %s (in step: cuInit)" % want


def test_an_exit_without_a_result_shows_the_output_but_not_the_step_lines():
    res = cuda.child_result(1, "", STEPS + "Traceback (most recent call last):\nOops\n",
                            "libcuda.so.1", "the CUDA probe", 30)
    assert res["error"] == ("the CUDA probe exited 1 (in step: cuInit): Traceback (most "
                            "recent call last):\nOops")


def test_a_result_printed_keeps_the_child_s_own_fields():
    out = '{"init": {"code": 0}, "devices": [], "error": null, "step": "done"}\n'
    res = cuda.child_result(0, out, STEPS, "libcuda.so.1", "the CUDA probe", 30)
    assert res == {"init": {"code": 0}, "devices": [], "error": None, "step": "done",
                   "time_limit": 30, "timed_out": False, "signal": None}


# --- the real child against the stand-in -------------------------------------------------

def test_a_cuinit_that_never_returns_is_killed_at_the_limit(lib, fake):
    fake(hang="cuInit")
    started = time.monotonic()
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, timeout=1)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 2.5, elapsed
    assert res["timed_out"] is True and res["step"] == "cuInit"
    assert res["error"] == "the CUDA probe did not return in 1 s (in step: cuInit): killed"


@pytest.mark.parametrize("how,signal", [("segv", "SIGSEGV"), ("abort", "SIGABRT")])
def test_a_crashing_library_takes_only_the_child(lib, fake, how, signal):
    fake(crash="cuInit:" + how)
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, timeout=20)
    assert res["signal"] == signal and res["step"] == "cuInit"
    assert res["error"] == "the CUDA probe was killed by %s (in step: cuInit)" % signal


def test_a_crash_in_a_gpu_step_names_that_gpu(lib, fake):
    fake(devices="0000:41:00.0,0000:c1:00.0", crash="cuCtxCreate_v2:segv")
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, timeout=20)
    assert res["step"] == "GPU 0 (0000:41:00.0): cuCtxCreate"


def test_absurdly_slow_copies_are_cut_at_the_limit(lib, fake, tmp_path):
    root = fakecuda.link_tree(tmp_path, {"0000:41:00.0": ("32.0 GT/s PCIe", 16)})
    fake(devices="0000:41:00.0", h2d_gbs="0.000001")     # 1 MiB takes 17 min
    started = time.monotonic()
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, bandwidth=True, size_mb=1,
                          repeats=1, timeout=1, root=root)
    elapsed = time.monotonic() - started
    # 1 s + 8 GPUs assumed (this tree lists none) x 4 copies of 1 MiB at 1 GB/s: 2 s
    assert res["time_limit"] == 2 and 2.0 <= elapsed < 3.5, elapsed
    assert res["step"] == "GPU 0 (0000:41:00.0): host-to-device copies"
    assert "did not return in 2 s" in res["error"]
    assert "slower than 1 GB/s" in res["cause"]


def test_zero_devices_while_the_pci_tree_lists_gpus_is_a_failure_naming_them(lib, fake,
                                                                             tmp_path):
    root = gpu_tree(tmp_path, {"0000:41:00.0": ("0x10de", "0x030200", "nvidia"),
                               "0000:c1:00.0": ("0x10de", "0x030200", None),
                               "0000:81:00.0": ("0x10de", "0x030200", "vfio-pci")})
    fake(devices="0000:41:00.0", count=0)
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, root=root)
    assert res["init"]["code"] == 0 and res["devices"] == []
    assert res["error"] == ("cuInit(0) succeeded but CUDA sees 0 devices (cuDeviceGetCount), "
                            "although the PCI tree lists 2 NVIDIA GPUs: 0000:41:00.0, "
                            "0000:c1:00.0")
    assert res["cause"].startswith("no CUDA device is visible")
    # cuInit's own "no device" names them too
    fake(devices="")
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, root=root)
    assert res["error"].endswith("(no CUDA-capable device is detected), although the PCI "
                                 "tree lists 2 NVIDIA GPUs: 0000:41:00.0, 0000:c1:00.0")


def test_zero_devices_is_fine_where_the_pci_tree_has_no_gpu_for_cuda(lib, fake, tmp_path):
    root = gpu_tree(tmp_path, {"0000:81:00.0": ("0x10de", "0x030200", "vfio-pci")})
    fake(count=0)
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, root=root)
    assert res["error"] is None and res["devices"] == [] and res["step"] == "done"


def test_a_working_probe_reports_done_and_its_limit(lib, fake, tmp_path):
    fake(devices="0000:41:00.0,0000:c1:00.0")
    res = cuda.probe_host(Runner(processes=subprocess), library=lib, root=str(tmp_path))
    assert res["error"] is None and len(res["devices"]) == 2
    assert (res["step"], res["time_limit"], res["timed_out"], res["signal"]) == (
        "done", 30, False, None)


# --- module cuda_probe: through AnsibleModule.run_command --------------------------------

def test_module_fails_with_did_not_return_and_the_step(lib, fake):
    fake(hang="cuInit")
    started = time.monotonic()
    res = run_module(cuda_probe, {"library": lib, "timeout": 1})
    assert time.monotonic() - started < 2.5
    assert res["failed"] is True and res["timed_out"] is True
    assert res["msg"].startswith("CUDA check failed on host: the CUDA probe did not return in "
                                 "1 s (in step: cuInit): killed; cause: the driver did not "
                                 "answer")


def test_module_zero_devices_names_the_gpus_of_its_root(lib, fake, tmp_path):
    root = hosts.vm_host(str(tmp_path / "vm"))
    fake(devices=root["gpu"], count=0)
    res = run_module(cuda_probe, {"library": lib, "root": root["root"]})
    assert res["failed"] is True
    assert "although the PCI tree lists 1 NVIDIA GPU: %s" % root["gpu"] in res["msg"]


def test_module_refuses_a_bad_timeout(lib):
    res = run_module(cuda_probe, {"library": lib, "timeout": 0})
    assert res["failed"] is True
    assert res["msg"].startswith("cuda_probe: timeout: 0 is not allowed: an integer from 1 "
                                 "to 3600")
