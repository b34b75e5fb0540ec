"""tune: host_tune's pass over the part registry (``tune.REGISTRY``, which tests may
extend, as its comment says): the argument spec made of the common options and each part's
own, a part's result keys checked, a before-stage failure stopping the later parts, and the
rows, failures and failure message gathered. The real parts run on fixture hosts in
tests/unit/plugins/modules/test_host_tune.py and the tune goldens."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from fixtures import hosts


class Part(object):
    """A stand-in part: ``out`` is what its run returns."""

    def __init__(self, name, stage="tune", out=None, options=None):
        self.name = name
        self.stage = stage
        self.out = out or {}
        self.options = options or {}
        self.calls = []

    def run(self, ctx):
        self.calls.append(("run", ctx.check_mode))
        return self.out

    def not_run(self, ctx, status):
        self.calls.append(("not_run", status))
        return {"rows": [(self.name, None, None, status, "")]} if status != "off" else {}


@pytest.fixture
def seed(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    return root


def _register(monkeypatch, *parts):
    monkeypatch.setattr(tune, "REGISTRY", list(tune.REGISTRY) + list(parts))
    monkeypatch.setattr(tune, "PARTS", tuple(tune.PARTS) + tuple(p.name for p in parts))


def test_the_spec_has_the_common_options_and_every_parts_own():
    spec = tune.argument_spec()
    for name in tune.COMMON_OPTIONS:
        assert name in spec
    for part in tune.REGISTRY:
        for name, declaration in part.options.items():
            assert spec[name] == tune_registry.option_spec(declaration), (part.name, name)
    assert spec["parts"]["choices"] == list(tune.PARTS)
    assert spec["parts"]["default"] == list(tune.DEFAULT_PARTS)
    # a declaration's description and role variable are no argument spec keys (Ansible's
    # sanity test refuses them)
    assert spec["latency_count"] == {"type": "int", "default": 200}
    assert not [name for name, option in spec.items()
                if set(option) & set(tune_registry.DECLARATION_KEYS)]


def test_the_option_rules_are_the_registered_parts(monkeypatch):
    tune.check_options({"latency_count": 1, "bandwidth_size_mb": 1, "bandwidth_repeats": 1,
                        "bandwidth_timeout": 1, "cuda_library": "libcuda.so.1"})
    with pytest.raises(validate.ValidationError, match="latency_gap_us: -1 is not allowed"):
        tune.check_options({"latency_gap_us": -1})
    part = Part("x")
    part.rules = lambda p: validate.fail("x_size", p.get("x_size"), "below 10")
    _register(monkeypatch, part)
    with pytest.raises(validate.ValidationError, match="x_size: 12 is not allowed: below 10"):
        tune.check_options({"x_size": 12})


def test_a_part_redefining_an_option_is_refused(monkeypatch):
    _register(monkeypatch, Part("x", options={"mrrs_size": dict(type="str")}))
    with pytest.raises(ValueError, match="tune part x redefines option mrrs_size"):
        tune.argument_spec()


def test_rows_failures_and_the_failure_message(seed, monkeypatch):
    a = Part("a", out={"changed": True, "rows": [("item1", 1, 2, "changed", "")],
                       "failures": ["a: item2 did not take"], "diffs": [{"after": "x"}]})
    _register(monkeypatch, a)
    res = tune.tune_run({"root": seed, "parts": ["a"], "host": "gpu07"})
    assert res["changed"] and res["parts_on"] == ["a"]
    # the real parts switched off report their rows too; a's come after them
    assert [r for r in res["rows"] if r["part"] == "a"] == [
        {"part": "a", "item": "item1", "before": 1, "after": 2, "status": "changed",
         "note": ""}]
    assert {"after": "x"} in res["diff"]
    assert tune.tune_failure(res) == "gpu07: a: item2 did not take"
    assert tune.tune_failure({"failures": []}) is None


def test_a_before_stage_failure_stops_the_parts_after_it(seed, monkeypatch):
    first = Part("first", stage="before", out={"failures": ["first: bad option"]})
    later = Part("later")
    _register(monkeypatch, first, later)
    res = tune.tune_run({"root": seed, "parts": ["first", "later"]}, check_mode=True)
    assert later.calls == [("not_run", "not run")]
    assert res["failures"] == ["first: bad option"]
    assert {"part": "later", "item": "later", "before": None, "after": None,
            "status": "not run", "note": ""} in res["rows"]


def test_a_part_returning_an_unknown_key_is_a_bug_named(seed, monkeypatch):
    _register(monkeypatch, Part("odd", out={"chnaged": True}))
    with pytest.raises(ValueError, match="tune part odd returned unknown keys chnaged"):
        tune.tune_run({"root": seed, "parts": ["odd"]}, check_mode=True)


def test_bad_options_are_refused_by_the_spec(seed):
    with pytest.raises(ValueError, match="mrrs_size"):
        tune.tune_run({"root": seed, "parts": [], "mrrs_size": 3000})
