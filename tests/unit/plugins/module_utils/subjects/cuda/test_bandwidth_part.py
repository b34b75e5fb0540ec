"""host_tune's bandwidth part against the stand-in libcuda.so.1: pinned copy rates of every
GPU before the PCIe changes and after them, as rows of the tune result and report; off by
default, skipped off the live host, not measured in check mode.

The module runs in this process (as the other host_tune tests do), so the stand-in is
named by path through the ``cuda_library`` option, and the seed tree stands for the live
host's sysfs (``measured.is_live`` says yes, as ``peermem.is_live`` does in
test_host_tune). The tree is the H200 VM with a second H200 whose MRRS is 512, so the pcie
part changes something between the two measurements."""

import os
import re
import shutil

import fakecuda
import pytest
from fixtures import hosts
from fixtures import pci as pcifix
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import measured
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import bandwidth_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import mrrs_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.modules import host_tune

WANTED = hosts.common_wanted()
WITH_BANDWIDTH = list(tune.DEFAULT_PARTS) + ["bandwidth"]
CELL = re.compile(r"^(\d+\.\d) GB/s \((\d+\.\d) % of link\)$")
GEN5_X16 = "32.0 GT/s PCIe x16: 63.0 GB/s per direction"


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


@pytest.fixture
def private_lib(lib, tmp_path):
    """A copy of the stand-in under a path of this test only: whether it shows in this
    process's memory maps says whether the part loaded a CUDA library."""
    path = str(tmp_path / "lib" / "libcuda.so.1")
    os.makedirs(os.path.dirname(path))
    shutil.copy(lib, path)
    return path


def loaded(path):
    with open("/proc/self/maps") as handle:
        return path in handle.read()


@pytest.fixture
def probe_log(fake, tmp_path):
    """The stand-in's log: a probe child that loaded it appends a line when it exits, so the
    file's absence says no probe ran (the library never loads in this process)."""
    log = str(tmp_path / "fakecuda.log")
    fake(log=log)
    return log


def probes_run(log):
    if not os.path.exists(log):
        return 0
    with open(log) as handle:
        return len(handle.read().splitlines())


@pytest.fixture
def fake(monkeypatch):
    return fakecuda.configurer(monkeypatch)


@pytest.fixture
def seed(tmp_path):
    """Two H200s at 32 GT/s x16, ``0000:00:10.0`` (MRRS 4096) and ``0000:00:11.0`` (512)."""
    root = str(tmp_path / "vm")
    first = hosts.vm_host(root)["gpu"]
    second = pcifix.vm_gpu(root, "0000:00:11.0", devctl=pcifix.devctl_value(mrrs=512))
    return root, {"gpus": [first, second]}


@pytest.fixture
def live(monkeypatch):
    monkeypatch.setattr(measured, "is_live", lambda _root: True)  # as if root were the host


def run(root, check_mode=False, **args):
    params = {"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"],
              "bandwidth_size_mb": 8, "bandwidth_repeats": 3}
    params.update(args)
    return run_module(host_tune, params, check_mode=check_mode)


def bandwidth_rows(result):
    return dict((r["item"], r) for r in result["rows"] if r["part"] == "bandwidth")


def rate(text):
    gbs, pct = CELL.match(text).groups()
    return float(gbs), float(pct)


def test_rates_before_and_after_the_pcie_change_per_gpu_with_the_link_share(
        seed, live, lib, fake, monkeypatch, probe_log):
    root, built = seed
    first, second = built["gpus"][:2]
    # The driver prints the bus id with an 8-digit upper-case domain.
    fake(devices="00000000:00:10.0,00000000:00:11.0", h2d_gbs="0.2,0.1", d2h_gbs="0.2,0.1")
    mrrs_run = mrrs_part.TUNE_PART.run

    def mrrs_then_faster(ctx):  # the copy rates the GPUs give once MRRS is written
        out = mrrs_run(ctx)
        monkeypatch.setenv("FAKECUDA_H2D_GBS", "0.4,0.1")
        monkeypatch.setenv("FAKECUDA_D2H_GBS", "0.1,0.1")
        return out
    monkeypatch.setattr(mrrs_part.TUNE_PART, "run", mrrs_then_faster)

    result = run(root, parts=WITH_BANDWIDTH, cuda_library=lib)
    assert result.get("failed") is not True, result.get("msg")
    assert result["failures"] == [] and result["parts_on"][:2] == ["snapshot", "bandwidth"]
    rows = bandwidth_rows(result)
    assert list(rows) == ["%s %s" % (gpu, way) for gpu in (first, second)
                          for way in ("host->GPU", "GPU->host")]
    want = {(first, "host->GPU"): (0.2, 0.4, "higher"), (first, "GPU->host"): (0.2, 0.1, "lower"),
            (second, "host->GPU"): (0.1, 0.1, "same"), (second, "GPU->host"): (0.1, 0.1, "same")}
    for (gpu, way), (before, after, status) in want.items():
        row = rows["%s %s" % (gpu, way)]
        (b_gbs, b_pct), (a_gbs, a_pct) = rate(row["before"]), rate(row["after"])
        assert 0.85 * before <= b_gbs <= before and 0.85 * after <= a_gbs <= after, row
        assert abs(b_pct - 100 * b_gbs / 63.0) < 0.2 and abs(a_pct - 100 * a_gbs / 63.0) < 0.2
        assert row["status"] == status, row
        assert row["note"].endswith(GEN5_X16), row
    assert re.match(r"^\+\d+\.\d %; ", rows[first + " host->GPU"]["note"])
    # what the measurement bought sits next to what was changed
    assert [r["after"] for r in result["rows"]
            if r["part"] == "pcie" and r["item"] == second + " endpoint MRRS"] == [4096]
    assert "bandwidth: lower after tuning: %s GPU->host 0.2 -> 0.1 GB/s" % first in str(
        result["warnings"])
    # two probe children (before, after), each freed everything
    with open(probe_log) as handle:
        assert [line.split(" calls=")[0] for line in handle.read().splitlines()] == [
            "contexts=0 device_allocs=0 host_allocs=0 modules=0"] * 2
    probe_before = result["parts"]["bandwidth_before"]["devices"]
    assert [d["pci_bus_id"] for d in probe_before] == [first, second]
    assert result["parts"]["bandwidth_after"]["devices"][0]["link_gbs"] == 63.0

    page = report.render_tune_markdown(report.tune_document("gpu01", result))
    line = [x for x in page.splitlines() if x.startswith("| bandwidth | %s host->GPU |" % first)]
    assert len(line) == 1 and "% of link) | higher | +" in line[0], page


def test_off_by_default_loads_no_cuda_library_and_adds_no_row(seed, live, private_lib,
                                                              probe_log):
    root, _built = seed
    result = run(root, cuda_library=private_lib)
    assert result.get("failed") is not True, result.get("msg")
    assert "bandwidth" not in result["parts_on"]
    assert bandwidth_rows(result) == {}
    assert not [k for k in result["parts"] if k.startswith("bandwidth")]
    assert not loaded(private_lib) and probes_run(probe_log) == 0


def test_another_root_is_skipped_with_the_reason(seed, private_lib, probe_log):
    root, _built = seed
    result = run(root, parts=["bandwidth"], cuda_library=private_lib)
    assert result.get("failed") is not True, result.get("msg")
    assert bandwidth_rows(result) == {"bandwidth": {
        "part": "bandwidth", "item": "bandwidth", "before": None, "after": None,
        "status": "skipped",
        "note": "root %s is not the live host: no GPU to measure there" % root}}
    assert not loaded(private_lib) and probes_run(probe_log) == 0


def test_check_mode_measures_nothing_and_says_so(seed, live, private_lib, fake, probe_log):
    root, _built = seed
    fake(devices="0000:00:10.0")
    result = run(root, check_mode=True, parts=WITH_BANDWIDTH, cuda_library=private_lib)
    assert result.get("failed") is not True, result.get("msg")
    row = bandwidth_rows(result)["bandwidth"]
    assert row["status"] == "not measured" and row["note"].startswith("check mode: no copies")
    assert not loaded(private_lib) and probes_run(probe_log) == 0


def test_no_driver_library_is_skipped_and_the_tune_still_passes(seed, live, tmp_path):
    root, _built = seed
    missing = str(tmp_path / "nowhere" / "libcuda.so.1")
    result = run(root, parts=["sysctl", "bandwidth"], cuda_library=missing)
    assert result.get("failed") is not True, result.get("msg")
    row = bandwidth_rows(result)["bandwidth"]
    assert row["status"] == "skipped"
    assert "the NVIDIA driver is not installed or not visible here" in row["note"]
    assert result["changed"] is True  # the sysctls were still applied


def test_cuda_failing_fails_the_part_with_the_code_and_the_others_still_run(
        seed, live, lib, fake):
    root, _built = seed
    fake(init=999)
    result = run(root, parts=["sysctl", "bandwidth"], cuda_library=lib)
    assert result["failed"] is True
    assert result["failures"][0].startswith(
        "bandwidth_before: CUDA check failed on host: cuInit(0) returned 999 CUDA_ERROR_UNKNOWN")
    assert "999 CUDA_ERROR_UNKNOWN" in result["msg"] and "cause: " in result["msg"]
    assert result["parts"]["sysctl"]["changed"] is True


def test_a_gpu_short_of_memory_is_skipped_with_the_reason_not_failed(seed, live, lib, fake):
    root, built = seed
    fake(devices="0000:00:10.0,0000:00:11.0", free_mb="8000,40", h2d_gbs="0.4", d2h_gbs="0.4")
    result = run(root, parts=["bandwidth"], cuda_library=lib)
    assert result.get("failed") is not True, result.get("msg")
    rows = bandwidth_rows(result)
    measured = rows[built["gpus"][0] + " host->GPU"]
    assert rate(measured["before"])[0] <= 0.4 and rate(measured["after"])[0] <= 0.4
    short = rows[built["gpus"][1] + " GPU->host"]
    assert (short["before"], short["after"], short["status"]) == (None, None, "skipped")
    assert short["note"].startswith("only 40 MiB of GPU memory free, the copy needs 72 MiB")


def test_a_copy_size_below_one_is_refused_before_anything_runs(seed, live, lib):
    root, _built = seed
    result = run(root, parts=["snapshot", "bandwidth", "sysctl"], cuda_library=lib,
                 bandwidth_size_mb=0)
    assert result["failed"] is True and result.get("changed") is not True
    assert "bandwidth_size_mb: 0 is not allowed: an integer from 1 to 65536" in result["msg"]
    assert not os.path.exists(os.path.join(root, "var/lib/gpuhost"))  # no snapshot either
    # the pass called directly refuses it too, in the before stage: nothing after it runs
    direct = tune.tune_run({"root": root, "parts": ["bandwidth", "sysctl"],
                            "sysctl": WANTED["sysctl"], "bandwidth_repeats": 0})
    assert direct["failures"] == ["bandwidth_before: bandwidth_repeats: 0 is not allowed: "
                                  "an integer from 1 to 1000"]
    assert direct["changed"] is False and "sysctl" not in direct["parts"]


def test_the_rules_refuse_what_the_probe_cannot_use():
    good = {"bandwidth_size_mb": 65536, "bandwidth_repeats": 1, "bandwidth_timeout": 3600,
            "cuda_library": "/opt/cuda/libcuda.so.1"}
    bandwidth_part.rules(good)
    bandwidth_part.rules({})  # an option not given is the spec's to fill
    for key, value, allowed in (("bandwidth_size_mb", 65537, "an integer from 1 to 65536"),
                                ("bandwidth_repeats", 0, "an integer from 1 to 1000"),
                                ("bandwidth_timeout", "30", "an integer from 1 to 3600"),
                                ("cuda_library", None, "a library name like libcuda.so.1")):
        with pytest.raises(validate.ValidationError) as err:
            bandwidth_part.rules(dict(good, **{key: value}))
        assert str(err.value).startswith("%s: %r is not allowed: %s" % (key, value, allowed))


def test_the_range_each_description_gives_is_the_rule_s():
    ranges = 0
    for name, declared in bandwidth_part.OPTIONS.items():
        found = re.search(r"\((\d+) to (\d+)\)", declared["description"])
        if not found:
            continue
        ranges += 1
        low, high = int(found.group(1)), int(found.group(2))
        bandwidth_part.rules({name: low})
        bandwidth_part.rules({name: high})
        for bad in (low - 1, high + 1):
            with pytest.raises(validate.ValidationError, match="an integer from %d to %d"
                               % (low, high)):
                bandwidth_part.rules({name: bad})
    assert ranges == 3


def test_each_option_is_declared_once_with_its_role_variable():
    for name in ("bandwidth_size_mb", "bandwidth_repeats", "bandwidth_timeout"):
        declared = bandwidth_part.OPTIONS[name]
        assert declared["role_var"] == "gpuhost_tune_" + name
        assert "C(bandwidth) part" in declared["description"] and declared["type"] == "int"
    assert bandwidth_part.OPTIONS["bandwidth_timeout"]["default"] == cuda.DEFAULT_TIMEOUT
    assert "role_var" not in bandwidth_part.OPTIONS["cuda_library"]  # host_tune's only
    assert bandwidth_part.BEFORE_PART.rules is bandwidth_part.AFTER_PART.rules


def test_the_two_objects_of_a_part_must_agree_on_being_off_by_default():
    class OnByDefault(measured.MeasureAfter):
        default_on = True

    registry = [p for p in tune.REGISTRY if p is not bandwidth_part.AFTER_PART]
    with pytest.raises(ValueError, match="tune part bandwidth: its objects disagree"):
        tune._derive(registry + [OnByDefault(bandwidth_part._Measurement)])
