"""measured: the before/after registry objects of a measuring tune part (bandwidth,
latency): measured only on the live host and never in check mode, options checked before
anything is measured, a missing driver library a skip and a CUDA failure the part's failure.
The measurement here is a stand-in with the interface bandwidth.py and latency.py give;
the real parts against the stand-in libcuda are test_bandwidth.py and test_latency.py."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import measured
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate


class Measurement(object):
    name = "probe"
    role_doc = "doc"
    options = {}
    worse = "slower"

    def __init__(self, results, problem=None):
        self.results = list(results)
        self.problem = problem
        self.measured = 0

    def rules(self, params):
        if self.problem:
            raise validate.ValidationError(self.problem)

    def measure(self, params, runner):
        self.measured += 1
        return self.results.pop(0)

    def check_mode_note(self, params):
        return "check mode: not measured"

    def rows(self, before, after, ctx):
        return [("probe gpu0", before["v"], after["v"], "better", "")], ["gpu0"]


class Ctx(object):
    def __init__(self, root="/", check_mode=False):
        self.root = root
        self.check_mode = check_mode
        self.params = {}
        self.runner = None
        self.warned = []
        self.warn = self.warned.append


OK = {"init": 0, "v": 1}


def test_before_then_after_on_the_live_host():
    m = Measurement([OK, dict(OK, v=2)])
    before, after = measured.parts(m)
    assert (before.stage, after.stage) == ("before", "after")
    assert before.steps == ("probe_before",) and after.steps == ("probe_after",)
    ctx = Ctx()
    assert before.run(ctx) == {"detail": {"probe_before": OK}}
    out = after.run(ctx)
    assert out["rows"] == [("probe gpu0", 1, 2, "better", "")] and out["failures"] == []
    assert ctx.warned == ["probe: slower after tuning: gpu0"]


def test_another_root_and_check_mode_measure_nothing():
    m = Measurement([])
    before, after = measured.parts(m)
    for ctx in (Ctx(root="/srv/tree"), Ctx(check_mode=True)):
        assert before.run(ctx) == {}
    assert after.run(Ctx(root="/srv/tree"))["rows"][0][3] == "skipped"
    note = after.run(Ctx(check_mode=True))["rows"][0][3:]
    assert note == ("not measured", "check mode: not measured")
    assert m.measured == 0


def test_bad_options_fail_before_anything_is_measured():
    m = Measurement([], problem="size below 1")
    out = measured.MeasureBefore(m).run(Ctx())
    assert out["failures"] == ["probe_before: size below 1"] and m.measured == 0
    assert measured.check(m, {}) == "size below 1"
    assert measured.check(Measurement([]), {}) is None


def test_both_objects_carry_the_measurement_s_options_and_rules():
    m = Measurement([])
    before, after = measured.parts(m)
    assert before.options is after.options is m.options
    assert before.rules == after.rules == m.rules  # registry.rules runs it once


def test_a_missing_driver_library_is_a_skip_not_a_failure():
    missing = {"error": "libcuda.so.1: cannot open shared object file", "init": None}
    assert measured.library_missing(missing)
    assert not measured.library_missing(dict(missing, timed_out=True))
    assert not measured.library_missing(dict(missing, signal="SIGSEGV"))
    assert not measured.library_missing(OK) and not measured.library_missing(None)
    m = Measurement([missing])
    before, after = measured.parts(m)
    ctx = Ctx()
    before.run(ctx)
    assert after.run(ctx) == {"rows": [("probe", None, None, "skipped", missing["error"])]}
    assert m.measured == 1


def test_not_run_rows():
    after = measured.MeasureAfter(Measurement([]))
    assert after.not_run(Ctx(), "off") == {}
    assert after.not_run(Ctx(), "not selected") == {"rows": [("probe", None, None,
                                                             "not selected", "")]}
