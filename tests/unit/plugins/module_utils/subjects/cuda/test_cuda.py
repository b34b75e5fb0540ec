"""The CUDA probe (the child script of plugins/module_utils/subjects/cuda/cuda_driver.py and
cuda_child.py,
joined by ``cuda.child_source()``) against the stand-in libcuda.so.1: as a plain script and
as ``python3 -`` with its source on stdin (how it runs inside a container), in a fresh
process each time, as it runs for real."""

import json
import os
import subprocess
import sys

import fakecuda
from fixtures import realhost
import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda

PROBE = None                            # the child script as a file (see probe_file)
H200 = realhost.H200
TWO = "0000:A1:00.0,0000:C1:00.0"       # as the driver may print them: upper-case hex


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


@pytest.fixture(scope="module", autouse=True)
def probe_file(tmp_path_factory):
    """The script the module ships, written to a file to run as a plain script."""
    global PROBE
    path = tmp_path_factory.mktemp("probe") / "cuda-probe.py"
    path.write_text(cuda.child_source())
    PROBE = str(path)
    return PROBE


link_tree = fakecuda.link_tree


def run(lib, *args, stdin=False, **settings):
    env = fakecuda.clean_environ()
    env.update(fakecuda.env(**settings))
    argv = ["--library", lib] + list(args)
    if stdin:
        with open(PROBE) as handle:
            proc = subprocess.run([sys.executable, "-"] + argv, input=handle.read(), env=env,
                                  capture_output=True, text=True, timeout=120, check=False)
    else:
        proc = subprocess.run([sys.executable, PROBE] + argv, env=env, capture_output=True,
                              text=True, timeout=120, check=False)
    assert proc.stderr == ""
    return proc.returncode, json.loads(proc.stdout)


def leaks(path):
    with open(path) as handle:
        return handle.read().split(" calls=")[0]


def test_two_gpus_by_sysfs_address_at_the_set_rate_against_each_link(lib, tmp_path):
    root = link_tree(tmp_path, {"0000:a1:00.0": ("32.0 GT/s PCIe", 16),
                                "0000:c1:00.0": ("16.0 GT/s PCIe", 8)})
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, "--bandwidth", "--size-mb", "8", "--root", root, devices=TWO,
                  h2d_gbs="0.25,0.125", d2h_gbs="0.2,0.1", log=log)
    assert rc == 0 and res["error"] is None
    assert res["init"] == {"code": 0, "name": "CUDA_SUCCESS", "text": "no error"}
    assert res["driver_version"] == 13000
    a, b = res["devices"]
    assert (a["pci_bus_id"], b["pci_bus_id"]) == ("0000:a1:00.0", "0000:c1:00.0")
    assert (a["link"], a["link_gbs"]) == ("32.0 GT/s PCIe x16", 63.0)
    assert (b["link"], b["link_gbs"]) == ("16.0 GT/s PCIe x8", 15.8)
    # Copies of 30-80 ms: a busy test machine's scheduling delays stay small against them,
    # and the stand-in only ever makes a copy slower, so the best of 5 is at most the rate.
    for dev, h2d, d2h in ((a, 0.25, 0.2), (b, 0.125, 0.1)):
        assert 0.8 * h2d <= dev["h2d_gbs"] <= 1.01 * h2d
        assert 0.8 * d2h <= dev["d2h_gbs"] <= 1.01 * d2h
        assert dev["h2d_pct"] == round(100 * dev["h2d_gbs"] / dev["link_gbs"], 1)
        assert dev["skipped"] is None and dev["busy"] is False
    assert a["memory_total_mb"] == 143771 and a["name"] == "NVIDIA H200"
    assert leaks(log) == "contexts=0 device_allocs=0 host_allocs=0 modules=0"


def test_real_h200_capture_gives_the_gen5_x16_ceiling(lib):
    rc, res = run(lib, "--root", H200)
    assert rc == 0
    dev, = res["devices"]
    assert dev["pci_bus_id"] == "0000:00:06.0"
    assert (dev["link"], dev["link_gbs"]) == ("32.0 GT/s PCIe x16", 63.0)
    assert dev["h2d_gbs"] is None          # no bandwidth asked for


def test_init_999_names_the_code_and_what_is_wrong_with_nvidia_uvm(lib, tmp_path):
    with open(os.path.join(H200, "proc/devices")) as handle:
        devices = handle.read()
    os.makedirs(str(tmp_path / "proc"))
    (tmp_path / "proc" / "devices").write_text(devices)
    os.makedirs(str(tmp_path / "dev"))
    (tmp_path / "dev" / "nvidia-uvm").write_text("")     # a file where the node should be
    rc, res = run(lib, "--root", str(tmp_path), init=999)
    assert rc == 1
    assert res["init"] == {"code": 999, "name": "CUDA_ERROR_UNKNOWN", "text": "unknown error"}
    assert res["error"] == "cuInit(0) returned 999 CUDA_ERROR_UNKNOWN (unknown error)"
    assert res["cause"].startswith("/dev/nvidia-uvm is not a character device, but "
                                   "nvidia-uvm's major is 238 (/proc/devices)")
    assert "lxc_cgroup_devices" in res["cause"]
    assert res["devices"] == []


def test_init_999_without_nvidia_uvm_loaded(lib, tmp_path):
    rc, res = run(lib, "--root", str(tmp_path), init=999)
    assert rc == 1
    assert res["cause"].startswith("nvidia-uvm is not in /proc/devices")


def test_no_device_is_100_with_its_cause(lib):
    rc, res = run(lib, devices="")
    assert rc == 1
    assert (res["init"]["code"], res["init"]["name"]) == (100, "CUDA_ERROR_NO_DEVICE")
    assert res["cause"].startswith("no CUDA device is visible")


def test_a_failing_copy_fails_that_gpu_and_frees_everything(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, "--bandwidth", "--size-mb", "4", devices=TWO, log=log,
                  fail="cuMemcpyDtoH_v2:700")
    assert rc == 1
    assert res["error"].startswith("GPU 0 (0000:a1:00.0): cuMemcpyDtoH_v2 returned 700 "
                                   "CUDA_ERROR_ILLEGAL_ADDRESS")
    for dev in res["devices"]:
        assert dev["error"]["step"] == "cuMemcpyDtoH_v2" and dev["error"]["code"] == 700
        assert dev["d2h_gbs"] is None
    assert leaks(log) == "contexts=0 device_allocs=0 host_allocs=0 modules=0"


def test_data_changed_on_the_way_back_is_a_failure(lib):
    rc, res = run(lib, "--bandwidth", "--size-mb", "4", corrupt=1)
    assert rc == 1
    assert res["devices"][0]["error"]["name"] == "DATA_MISMATCH"
    assert "ECC" in res["cause"]


def test_too_little_free_memory_is_skipped_not_failed(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, "--bandwidth", "--size-mb", "256", devices=TWO, free_mb="200,100000",
                  h2d_gbs=0, d2h_gbs=0, log=log)
    assert rc == 0 and res["error"] is None
    low, ok = res["devices"]
    assert low["skipped"] == ("only 200 MiB of GPU memory free, the copy needs 320 MiB: "
                              "not measured")
    assert low["h2d_gbs"] is None
    assert ok["skipped"] is None and ok["h2d_gbs"] > 0
    assert leaks(log) == "contexts=0 device_allocs=0 host_allocs=0 modules=0"


def test_exclusive_process_gpu_held_elsewhere_is_busy_not_failed(lib):
    rc, res = run(lib, "--bandwidth", "--size-mb", "4", devices=TWO, busy="1,0")
    assert rc == 0 and res["error"] is None
    held, free = res["devices"]
    assert held["busy"] is True and held["compute_mode"] == "exclusive-process"
    assert held["skipped"].startswith("busy:")
    assert free["busy"] is False and free["h2d_gbs"] > 0


def test_context_refused_in_default_mode_is_a_failure(lib):
    rc, res = run(lib, fail="cuCtxCreate_v2:46")
    assert rc == 1
    assert "cuCtxCreate_v2 returned 46 CUDA_ERROR_DEVICE_UNAVAILABLE" in res["error"]


def test_peer_matrix_only_copies_where_access_exists(lib, tmp_path):
    log = str(tmp_path / "fake.log")
    rc, res = run(lib, "--peer", "--size-mb", "8", devices=TWO, peer="0-1", peer_gbs=0.2,
                  log=log)
    assert rc == 0
    forward, back = res["peers"]
    assert (forward["from"], forward["to"], forward["access"]) == (0, 1, True)
    assert 0.16 <= forward["gbs"] <= 0.202
    assert (forward["from_bus_id"], forward["to_bus_id"]) == ("0000:a1:00.0", "0000:c1:00.0")
    assert (back["access"], back["gbs"]) == (False, None)
    assert leaks(log) == "contexts=0 device_allocs=0 host_allocs=0 modules=0"


def test_peer_with_one_gpu_is_an_empty_matrix(lib):
    rc, res = run(lib, "--peer")
    assert rc == 0 and res["peers"] == []


def test_missing_library_says_the_driver_is_not_there(tmp_path):
    proc = subprocess.run([sys.executable, PROBE, "--library", str(tmp_path / "libcuda.so.1")],
                          capture_output=True, text=True, timeout=60, check=False)
    res = json.loads(proc.stdout)
    assert proc.returncode == 1 and res["init"] is None
    assert "the NVIDIA driver is not installed or not visible here" in res["error"]


def test_source_on_stdin_runs_as_in_a_container(lib, tmp_path):
    root = link_tree(tmp_path, {"0000:00:06.0": ("32.0 GT/s PCIe", 16)})
    rc, res = run(lib, "--bandwidth", "--size-mb", "4", "--root", root, stdin=True,
                  h2d_gbs=0.5, d2h_gbs=0.5)
    assert rc == 0
    # measured through the stand-in (never above its set 0.5 GB/s; load can only slow it)
    assert res["devices"][0]["link_gbs"] == 63.0 and 0 < res["devices"][0]["h2d_gbs"] <= 0.51
    rc, res = run(lib, stdin=True, init=999)
    assert (rc, res["init"]["code"]) == (1, 999)


def test_container_without_python3_says_so():
    class Runner:
        def run(self, argv, check=False, data=None, timeout=None):
            assert argv[:6] == ["pct", "exec", "129", "--", "python3", "-"]
            assert "def probe(" in data
            assert timeout == cuda.DEFAULT_TIMEOUT
            return 255, "", ('lxc-attach: 129: ../src/lxc/attach.c: lxc_attach_run_command: '
                             '1841 No such file or directory - Failed to exec "python3"\n')
    res = cuda.probe_container(Runner(), "pct", 129)
    assert res["vmid"] == 129
    assert res["error"].startswith("container 129 has no python3")
    assert cuda.failure_message(res).startswith("CUDA check failed on container 129: ")


def test_a_deeply_nested_child_output_is_no_result():
    """A container's output is tenant text: 100,000 "[" are skipped, not a RecursionError."""
    deep = "[" * 100000 + "]" * 100000
    result = cuda.child_result(1, deep + "\n", "", "libcuda.so.1", "host", 30)
    assert result.get("error")
