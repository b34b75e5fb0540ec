"""engines/tune/tune_registry.py: the tune parts declared once and everything derived from them (run
order, steps, owned findings, defaults, role switches, options, managed files), moved from
modules/test_host_tune.py where they were checked through tune's aliases."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_part,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import (
    bandwidth_part,
    latency_part,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import (
    placement_write,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import (
    tune_registry,
    sections,
)


class _Marker(object):
    """A tune part as another subject would add one: one option, one finding it owns."""

    name = "marker"
    owns = ("nvidia_uvm_hmm",)
    steps = ("marker",)
    stage = "tune"
    options = dict(marker_text=dict(type="str", default="tuned"))
    option_docs = {"marker_text": "What the marker writes."}
    role_doc = "Write the marker."
    files = ("/etc/marker",)

    def run(self, ctx):
        return {}

    def not_run(self, ctx, status):
        return {}


def test_parts_tables_come_from_the_registered_parts():
    assert tune_registry.PARTS == ("snapshot", "bandwidth", "latency", "ceiling", "sysctl",
                                   "cpuidle", "pcie", "boot_service", "nvidia_peermem",
                                   "device_nodes", "numa_pin", "verify")
    assert tune_registry.DEFAULT_PARTS == tuple(p for p in tune_registry.PARTS if p not in (
        "device_nodes", "numa_pin", "bandwidth", "latency", "ceiling"))
    assert tune.argument_spec()["parts"]["default"] == list(tune.DEFAULT_PARTS)
    assert tune_registry.MANAGED == {"numa_balancing": "sysctl", "sysctl": "sysctl",
                                     "cpuidle_deep_state": "cpuidle", "pcie_mrrs": "pcie",
                                     "gpu_numa_mismatch": "numa_pin",
                                     "gpu_container_unpinned": "numa_pin",
                                     "device_nodes_unit_missing": "device_nodes"}
    assert tune_registry.STEPS == ("snapshot_before", "bandwidth_before", "latency_before",
                                   "ceiling_before", "sysctl", "cpuidle", "pcie", "boot_service",
                                   "nvidia_peermem",
                                   "nvidia_peermem_at_boot", "modules_load_dir", "device_nodes",
                                   "numa_pin",
                                   "snapshot_applied", "bandwidth_after", "latency_after",
                                   "ceiling_after")


def test_a_part_that_breaks_the_protocol_is_refused_at_registration():
    class NoStage(_Marker):
        stage = "sometime"

    with pytest.raises(ValueError, match="stage 'sometime'"):
        tune_registry.derive(list(tune_registry.REGISTRY) + [NoStage()])
    applied = tune_registry.REGISTRY.index(sections.APPLIED_PART)  # the first after-stage part
    with pytest.raises(ValueError, match="owned by tune parts pcie and marker"):
        tune_registry.derive(list(tune_registry.REGISTRY[:applied]) + [type("Steal", (_Marker,), {
            "owns": ("pcie_mrrs",)})()] + list(tune_registry.REGISTRY[applied:]))


def test_tune_takes_its_tables_from_the_registry():
    assert (tune.PARTS, tune.STEPS, tune.MANAGED) == tune_registry.derive(tune_registry.REGISTRY)
    assert tune.DEFAULT_PARTS == tune_registry.DEFAULT_PARTS


def test_a_stage_out_of_order_and_disagreeing_objects_are_refused():
    late = type("Late", (_Marker,), {"stage": "before"})()
    with pytest.raises(ValueError, match="tune part marker: stage before after a later"):
        tune_registry.derive(list(tune_registry.REGISTRY) + [late])
    off = type("Off", (_Marker,), {"default_on": False})()
    with pytest.raises(ValueError, match="its objects disagree on default_on"):
        tune_registry.derive([_Marker(), off])
    with pytest.raises(ValueError, match="has no run"):
        tune_registry.check_part(type("NoRun", (object,), dict(
            (a, getattr(_Marker, a)) for a in tune_registry.PART_ATTRS if a != "run"))())


def test_switches_options_and_tags_of_a_part():
    part = _Marker()
    assert tune_registry.switches([part]) == [("marker", True, "Write the marker.")]
    assert tune_registry.options([part]) == [("marker_text", {"type": "str", "default": "tuned"},
                                              "What the marker writes.")]
    assert (tune_registry.switch("marker"), tune_registry.tag("marker")) == (
        "gpuhost_tune_marker", "tune_marker")
    undocumented = type("Bare", (_Marker,), {"role_doc": None, "option_docs": {}})()
    with pytest.raises(ValueError, match="has no role_doc"):
        tune_registry.switches([undocumented])
    with pytest.raises(ValueError, match="marker_text has no description"):
        tune_registry.options([undocumented])


class _Declared(_Marker):
    """A part whose option is declared once: spec, description, role variable, its rule."""

    name = "declared"
    owns = ()
    steps = ("declared",)
    options = dict(
        declared_size=dict(type="int", default=4, role_var="gpuhost_tune_declared_size",
                           description="How much the part declares (1 to 8)."),
        declared_note=dict(type="str", description="Not passed by the role."))
    option_docs = {}

    @staticmethod
    def rules(p):
        validate.int_range("declared_size", p.get("declared_size"), 1, 8)


def test_an_option_is_declared_once_with_its_role_variable():
    part = _Declared()
    assert tune_registry.option_spec(part.options["declared_size"]) == {
        "type": "int", "default": 4}
    assert tune_registry.options([part]) == [
        ("declared_size", {"type": "int", "default": 4}, "How much the part declares (1 to 8)."),
        ("declared_note", {"type": "str"}, "Not passed by the role.")]
    assert tune_registry.role_options([part, part]) == [
        ("gpuhost_tune_declared_size", "declared_size", {"type": "int", "default": 4},
         "How much the part declares (1 to 8).")]
    own = dict(part.options["declared_size"], role_description="In the role's words.")
    assert tune_registry.role_options([type("Own", (_Declared,), {"options": {
        "declared_size": own}})()])[0][3] == "In the role's words."
    assert tune_registry.option_spec(own) == {"type": "int", "default": 4}
    nodoc = dict(part.options["declared_size"], description="")
    with pytest.raises(ValueError, match="declared_size has a role variable and no description"):
        tune_registry.role_options([type("NoDoc", (_Declared,), {"options": {
            "declared_size": nodoc}})()])
    twice = dict(part.options, other_size=part.options["declared_size"])
    with pytest.raises(ValueError, match="declared_size and other_size share role variable"):
        tune_registry.role_options([type("Twice", (_Declared,), {"options": twice})()])
    # an option declared the old way (spec plus option_docs) still documents
    assert tune_registry.options([_Marker()])[0][2] == "What the marker writes."
    assert tune_registry.role_options([_Marker()]) == []


def test_the_rules_are_the_parts_own_each_once():
    part = _Declared()
    assert tune_registry.rules([part, _Marker(), part]) == [_Declared.rules]
    tune_registry.check_options({"declared_size": 8}, [part])
    with pytest.raises(validate.ValidationError, match="declared_size: 9 is not allowed"):
        tune_registry.check_options({"declared_size": 9}, [part])
    # the measuring parts: one rule per measurement, its two objects share it
    assert tune_registry.rules() == [sections.rules, bandwidth_part.rules, latency_part.rules,
                                     ceiling_part.rules, placement_write.TUNE_PART.rules]


def test_the_role_passes_the_declared_options():
    assert [(var, name) for var, name, _spec, _doc in tune_registry.role_options()] == [
        ("gpuhost_tune_snapshot_dir", "snapshot_dir"),
        ("gpuhost_tune_bandwidth_size_mb", "bandwidth_size_mb"),
        ("gpuhost_tune_bandwidth_repeats", "bandwidth_repeats"),
        ("gpuhost_tune_bandwidth_timeout", "bandwidth_timeout"),
        ("gpuhost_tune_latency_count", "latency_count"),
        ("gpuhost_tune_latency_gap_us", "latency_gap_us"),
        ("gpuhost_tune_ceiling_seconds", "ceiling_seconds"),
        ("gpuhost_tune_ceiling_mb", "ceiling_mb"),
        ("gpuhost_tune_mrrs_method", "mrrs_method"),
        ("gpuhost_tune_boot_service_start", "boot_service_start"),
        ("gpuhost_nvidia_peermem", "nvidia_peermem"),
        ("gpuhost_tune_numa_pin_vmids", "numa_pin_vmids")]
    # the role passes every part option but these (the library; the sysctl part's by hand)
    passed = set(name for _var, name, _spec, _doc in tune_registry.role_options())
    assert [n for n, _spec, _doc in tune_registry.options() if n not in passed] == [
        "cuda_library", "sysctl_at_least", "sysctl_file"]


def test_managed_files_take_file_options_from_the_params_or_their_default():
    part = type("WithOption", (_Marker,), {"file_options": ("marker_file",), "options": dict(
        marker_file=dict(type="path", default="/etc/marker.d/default.conf"))})()
    assert tune_registry.managed_files(registry=[part]) == [
        "/etc/marker", "/etc/marker.d/default.conf"]
    assert tune_registry.managed_files({"marker_file": "/etc/other.conf"}, registry=[part, part]) == [  # noqa: E501
        "/etc/marker", "/etc/other.conf"]
    assert tune_registry.MANAGED_FILES == tuple(tune_registry.managed_files())


def test_the_snapshot_sections_are_the_parts_that_declare_one_then_the_files():
    assert tune_registry.SECTIONS[-1] is tune_registry.FILES
    assert all(hasattr(p, "snapshot_key") for p in tune_registry.SECTIONS[:-1])
    assert sections.BEFORE_PART in tune_registry.REGISTRY
