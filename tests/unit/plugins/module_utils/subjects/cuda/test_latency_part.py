"""host_tune's latency part against the stand-in libcuda.so.1: an empty kernel's launch
round trip on every GPU, after a sleep and back to back, before any change and after verify,
as rows that name the parts which ran in between; off by default, apart from bandwidth,
skipped off the live host, not measured in check mode.

The module runs in this process (as the other host_tune tests do) on the seed tree, whose
CPUs have C2 enabled, so the cpuidle part changes something between the two measurements;
the stand-in adds a wake-up cost to a launch after an idle caller (FAKECUDA_WAKE_US) until
that part has run, as a host with deep idle states does."""

import os
import re
import shutil

import fakecuda
import pytest
from fixtures import hosts
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import measured
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpuidle_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import latency_part
from ansible_collections.gpuhost.tuning.plugins.modules import host_tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import bandwidth_part

WANTED = hosts.common_wanted()
WITH_LATENCY = list(tune.DEFAULT_PARTS) + ["latency"]
CELL = re.compile(r"^p50 (\d+\.\d) / p99 (\d+\.\d) us$")


@pytest.fixture(scope="module")
def lib():
    return fakecuda.build()


@pytest.fixture
def private_lib(lib, tmp_path):
    path = str(tmp_path / "lib" / "libcuda.so.1")
    os.makedirs(os.path.dirname(path))
    shutil.copy(lib, path)
    return path


def loaded(path):
    with open("/proc/self/maps") as handle:
        return path in handle.read()


@pytest.fixture
def fake(monkeypatch):
    return fakecuda.configurer(monkeypatch)


@pytest.fixture
def seed(tmp_path):
    return hosts.seed_host(str(tmp_path / "seed"))


@pytest.fixture
def live(monkeypatch):
    monkeypatch.setattr(measured, "is_live", lambda _root: True)


def run(root, check_mode=False, **args):
    params = {"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"], "latency_count": 40}
    params.update(args)
    return run_module(host_tune, params, check_mode=check_mode)


def latency_rows(result):
    return dict((r["item"], r) for r in result["rows"] if r["part"] == "latency")


def p50(text):
    return float(CELL.match(text).group(1))


def test_the_wake_up_cost_gone_after_cpuidle_shows_as_better_naming_the_parts(
        seed, live, lib, fake, monkeypatch):
    first, second = seed["gpus"][:2]
    fake(devices="%s,%s" % (first.upper(), second.upper()), launch_us="300", wake_us="500")
    idle_run = cpuidle_state.TUNE_PART.run

    def idle_then_awake(ctx):   # what disabling C2 does to the launch after a sleep
        out = idle_run(ctx)
        monkeypatch.setenv("FAKECUDA_WAKE_US", "0")
        return out
    monkeypatch.setattr(cpuidle_state.TUNE_PART, "run", idle_then_awake)

    result = run(seed["root"], parts=WITH_LATENCY, cuda_library=lib)
    assert result.get("failed") is not True, result.get("msg")
    rows = latency_rows(result)
    asleep = "%s launch+sync after a 1000 us sleep" % first
    awake = "%s launch+sync back to back" % first
    assert list(rows) == [asleep, awake, "%s launch+sync after a 1000 us sleep" % second,
                          "%s launch+sync back to back" % second]
    # A busy machine only ever makes a round trip slower (the stand-in spins until its set
    # time): lower bounds are exact, upper ones leave room for preemption.
    assert rows[asleep]["status"] == "better", rows
    assert rows[asleep]["note"].startswith("p50 -")
    assert 720 <= p50(rows[asleep]["before"]) and 270 <= p50(rows[asleep]["after"]) <= 600
    assert 270 <= p50(rows[awake]["before"]) <= 600 and 270 <= p50(rows[awake]["after"]) <= 600
    note = rows[asleep]["note"]
    assert note.startswith("p50 -") and "between: sysctl (changed), cpuidle (changed), " \
        "pcie (changed)" in note, note
    assert "latency" not in str(result.get("warnings") or "")
    assert [d["pci_bus_id"] for d in result["parts"]["latency_before"]["devices"]] == \
        [first, second]
    page = report.render_tune_markdown(report.tune_document("gpu01", result))
    line = [x for x in page.splitlines() if x.startswith("| latency | %s |" % asleep)]
    assert len(line) == 1 and "| better | p50 -" in line[0], page


def test_a_slower_round_trip_is_a_warning_not_a_failure(seed, live, lib, fake, monkeypatch):
    fake(devices=seed["gpus"][0], launch_us="200")
    idle_run = cpuidle_state.TUNE_PART.run

    def idle_then_slower(ctx):
        out = idle_run(ctx)
        monkeypatch.setenv("FAKECUDA_LAUNCH_US", "600")
        return out
    monkeypatch.setattr(cpuidle_state.TUNE_PART, "run", idle_then_slower)
    result = run(seed["root"], parts=WITH_LATENCY, cuda_library=lib)
    assert result.get("failed") is not True, result.get("msg")
    statuses = [r["status"] for r in latency_rows(result).values()]
    assert statuses == ["worse", "worse"]
    assert "latency: slower after tuning: %s launch+sync" % seed["gpus"][0] in str(
        result["warnings"])


def test_off_by_default_and_apart_from_bandwidth(seed, live, private_lib, fake):
    fake(devices=seed["gpus"][0])
    result = run(seed["root"], cuda_library=private_lib)
    assert "latency" not in result["parts_on"] and latency_rows(result) == {}
    assert not loaded(private_lib)
    both = run(seed["root"], parts=["bandwidth", "latency"], cuda_library=private_lib,
               bandwidth_size_mb=4, bandwidth_repeats=1)
    assert both.get("failed") is not True, both.get("msg")
    assert {"bandwidth_before", "latency_before", "bandwidth_after",
            "latency_after"} <= set(both["parts"])
    only = run(seed["root"], parts=["latency"], cuda_library=private_lib)
    assert {"latency_before", "latency_after"} <= set(only["parts"])
    assert not [k for k in only["parts"] if k.startswith("bandwidth")]
    assert not [r for r in only["rows"] if r["part"] == "bandwidth"]


def test_another_root_is_skipped_and_check_mode_is_not_measured(
        seed, fake, private_lib, monkeypatch):
    result = run(seed["root"], parts=["latency"], cuda_library=private_lib)
    assert latency_rows(result)["latency"]["status"] == "skipped"
    assert "is not the live host" in latency_rows(result)["latency"]["note"]
    monkeypatch.setattr(measured, "is_live", lambda _root: True)
    checked = run(seed["root"], check_mode=True, parts=WITH_LATENCY, cuda_library=private_lib)
    row = latency_rows(checked)["latency"]
    assert (row["status"], row["note"]) == ("not measured", "check mode: no kernel launched")
    assert not loaded(private_lib)


def test_a_driver_refusing_the_kernel_is_skipped_with_the_code(seed, live, lib, fake):
    fake(devices=seed["gpus"][0], fail="cuModuleLoadData:218")
    result = run(seed["root"], parts=["sysctl", "latency"], cuda_library=lib)
    assert result.get("failed") is not True, result.get("msg")
    rows = list(latency_rows(result).values())
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert "218 CUDA_ERROR_INVALID_PTX" in rows[0]["note"]


def test_a_count_below_one_is_refused_before_anything_runs(seed, live, lib):
    result = run(seed["root"], parts=["snapshot", "latency", "sysctl"], cuda_library=lib,
                 latency_count=0)
    assert result["failed"] is True and result.get("changed") is not True
    assert "latency_count: 0 is not allowed: an integer from 1 to 100000" in result["msg"]
    assert not os.path.exists(os.path.join(seed["root"], "var/lib/gpuhost"))


def test_the_rules_refuse_what_the_probe_cannot_use():
    latency_part.rules({"latency_count": 1, "latency_gap_us": 0, "cuda_library": "libcuda.so.1"})
    latency_part.rules({"latency_count": 100000, "latency_gap_us": 1000000})
    latency_part.rules({})  # only the options given: module cuda_probe has no cuda_library
    for params, msg in (({"latency_count": 0}, "latency_count: 0 is not allowed: an integer "
                                               "from 1 to 100000"),
                        ({"latency_gap_us": 1000001}, "latency_gap_us: 1000001 is not "
                                                      "allowed: an integer from 0 to 1000000"),
                        ({"latency_count": True}, "latency_count: True is not allowed"),
                        ({"cuda_library": ""}, "cuda_library: '' is not allowed: a library "
                                               "name like libcuda.so.1 or a path")):
        with pytest.raises(validate.ValidationError) as err:
            latency_part.rules(params)
        assert str(err.value).startswith(msg), params


def test_the_range_each_description_gives_is_the_rule_s():
    ranges = 0
    for name, declared in latency_part.OPTIONS.items():
        found = re.search(r"\((\d+) to (\d+)\)", declared["description"])
        if not found:
            continue
        ranges += 1
        low, high = int(found.group(1)), int(found.group(2))
        latency_part.rules({name: low})
        latency_part.rules({name: high})
        for bad in (low - 1, high + 1):
            with pytest.raises(validate.ValidationError, match="an integer from %d to %d"
                               % (low, high)):
                latency_part.rules({name: bad})
    assert ranges == 2


def test_each_option_is_declared_once_with_its_role_variable():
    assert set(latency_part.OPTIONS) == {"latency_count", "latency_gap_us", "cuda_library"}
    for name in ("latency_count", "latency_gap_us"):
        declared = latency_part.OPTIONS[name]
        assert declared["role_var"] == "gpuhost_tune_" + name
        assert declared["description"].count("C(latency) part") == 1
    # the library is the bandwidth part's option (one declaration), not a role variable
    assert latency_part.OPTIONS["cuda_library"] is bandwidth_part.OPTIONS["cuda_library"]
    assert "role_var" not in latency_part.OPTIONS["cuda_library"]
    assert latency_part.BEFORE_PART.rules is latency_part.rules


def test_compare_margin():
    base = {"p50_us": 100.0, "p99_us": 200.0}
    assert latency_part.compare(base, {"p50_us": 109.0, "p99_us": 219.0}) == (
        "same", "p50 +9.0 %, p99 +9.5 %")
    assert latency_part.compare(base, {"p50_us": 80.0, "p99_us": 205.0})[0] == "better"
    assert latency_part.compare(base, {"p50_us": 80.0, "p99_us": 9000.0})[0] == "better"
    assert latency_part.compare(base, {"p50_us": 120.0, "p99_us": 150.0})[0] == "worse"
    small = {"p50_us": 8.0, "p99_us": 10.0}
    assert latency_part.compare(small, {"p50_us": 9.5, "p99_us": 11.9})[0] == "same"  # < 2 us
