"""host_tune and tune_report on the fixture hosts, compared byte for byte with recorded
results (tests/unit/golden/tune/*.json): the whole module result (rows, each part's own
result, failures, findings before and after, diffs) and the <host>-tune.md/json files
tune_report writes for it.

A deliberate change of what the tune pass returns or reports is recorded with

    GOLDEN_REGENERATE=1 .venv/bin/pytest -q tests/unit/test_tune_golden.py

and the diff of tests/unit/golden/ reviewed and committed with the change. Without the
switch a difference fails and names the scenario and the first differing lines.
"""

import difflib
import json
import os
import re

import pytest
from fixtures import hosts, procsys
from fixtures import pci as pcifix
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from ansible_collections.gpuhost.tuning.plugins.modules import host_tune, tune_report

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "tune")
REGENERATE = os.environ.get("GOLDEN_REGENERATE") == "1"
WANTED = hosts.common_wanted()
_STAMP = re.compile(r"\d{8}T\d{6}Z(-\d+)?|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# The size of each module_utils file the boot service ships changes with every edit of it.
_SHIPPED_SIZE = re.compile(r"\(library file, \d+ bytes\)")


def _tune(root, check_mode=False, **args):
    params = {"root": root, "host": "gpu01", "sysctl": WANTED["sysctl"]}
    params.update(args)
    result = run_module(host_tune, hosts.as_wanted(params), check_mode=check_mode, diff=True)
    # ``invocation`` is ansible-core's, not the module's: 2.19 adds it to every result, 2.21
    # only with ANSIBLE_INJECT_INVOCATION (off by default). The goldens hold what both give.
    result.pop("invocation", None)
    return _without(result, "redact_source_context")


def _without(value, key):
    """``value`` with ``key`` dropped from every dict in it: ansible-core 2.22 adds
    ``redact_source_context`` to each warning's event, which 2.19-2.21 do not have."""
    if isinstance(value, dict):
        return dict((k, _without(v, key)) for k, v in value.items() if k != key)
    if isinstance(value, list):
        return [_without(v, key) for v in value]
    return value


def _seed(root):
    hosts.seed_host(root)


def _seed_ib(root):
    hosts.seed_host(root)
    procsys.proc_modules(root, procsys.SEED_MODULES + [("ib_core", 471040, 2, "-")])


def _vm_sysctl_blocked(root):
    hosts.vm_host(root)
    os.makedirs(os.path.join(root, "etc/sysctl.d/99-gpuhost-tuning.conf"))


def _seed_snapshot_blocked(root):
    hosts.seed_host(root)
    os.makedirs(os.path.join(root, "var/lib"), exist_ok=True)
    with open(os.path.join(root, "var/lib/gpuhost"), "w") as handle:
        handle.write("a file where the snapshot folder should be\n")


# name: (build the tree, [(check_mode, extra host_tune options) per run, in order])
SCENARIOS = {
    "seed_first_then_second": (_seed, [(False, {}), (False, {})]),
    "seed_check_mode": (_seed, [(True, {})]),
    "seed_parts_off": (_seed, [(False, {"parts": ["snapshot", "sysctl", "verify"]})]),
    "seed_no_snapshot_no_verify": (_seed, [(False, {"parts": [
        "sysctl", "cpuidle", "pcie", "boot_service", "nvidia_peermem"]})]),
    "seed_infiniband": (_seed_ib, [(False, {}), (True, {"nvidia_peermem": "load"})]),
    "seed_peermem_skip_no_upstream": (_seed, [(False, {
        "nvidia_peermem": "skip", "mrrs_include_upstream": False, "mrrs_size": 1024})]),
    "seed_snapshot_blocked": (_seed_snapshot_blocked, [(False, {})]),
    "vm": (hosts.vm_host, [(False, {}), (False, {})]),
    "vm_sysctl_blocked": (_vm_sysctl_blocked, [(False, {})]),
    "tuned": (hosts.tuned_host, [(False, {})]),
}


def _normal(value, root):
    """The result as JSON text, the temporary root, clock stamps and the sizes of the
    shipped library files replaced."""
    text = json.dumps(value, indent=1, sort_keys=True)
    text = _SHIPPED_SIZE.sub("(library file, <size> bytes)", text)
    return _STAMP.sub("<time>", text.replace(root, "<root>"))


def _record(name, tmp_path, monkeypatch=None):
    build, runs = SCENARIOS[name]
    root = str(tmp_path / "host")
    build(root)
    results = {}
    for number, (check_mode, args) in enumerate(runs, 1):
        result = _tune(root, check_mode=check_mode, **args)
        results["run%d" % number] = result
    # what a play registers: the controller has already shown and removed these
    registered = dict((run, dict((k, v) for k, v in result.items()
                                 if k not in ("warnings", "deprecations", "invocation")))
                      for run, result in results.items())
    reports = run_module(tune_report, {"results": registered,
                                       "dest": str(tmp_path / "reports")})
    assert reports.get("failed") is not True, reports.get("msg")
    files = {}
    for path in sorted(reports["files"]):
        with open(path) as handle:
            files[os.path.basename(path)] = handle.read()
    summary = dict((run, dict((step, [bool(res.get("changed")), bool(res.get("failed"))])
                              for step, res in sorted(result.get("parts", {}).items())))
                   for run, result in results.items())
    doc = {"parts_changed_failed": summary, "results": results, "reports": files}
    return _normal(doc, root) + "\n"


def _compare(name, text):
    path = os.path.join(GOLDEN, name + ".json")
    if REGENERATE:
        if not os.path.isdir(GOLDEN):
            os.makedirs(GOLDEN)
        with open(path, "w") as handle:
            handle.write(text)
        return
    assert os.path.isfile(path), ("no recorded result %s: record it with GOLDEN_REGENERATE=1"
                                  % path)
    with open(path) as handle:
        want = handle.read()
    if text != want:
        diff = list(difflib.unified_diff(want.splitlines(), text.splitlines(), "recorded",
                                         "now", lineterm="", n=2))
        pytest.fail("%s differs from %s (GOLDEN_REGENERATE=1 records a deliberate change):\n%s"
                    % (name, path, "\n".join(diff[:80])))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_tune_result_and_reports_are_unchanged(name, tmp_path):
    _compare(name, _record(name, tmp_path))


def test_a_device_ignoring_the_mrrs_write(tmp_path, monkeypatch):
    name = "seed_mrrs_dropped"
    SCENARIOS[name] = (_seed, [(False, {}), (False, {})])
    bad = pcifix.device_dir(str(tmp_path / "host"), "0000:03:00.0")
    real_write = setpci_maxreadreq._write_config

    def drop_one(path, offset, data):
        if os.path.dirname(path) == bad:
            return  # a device that keeps MRRS at what it was
        real_write(path, offset, data)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", drop_one)
    try:
        _compare(name, _record(name, tmp_path))
    finally:
        del SCENARIOS[name]


def test_every_recorded_scenario_is_still_run():
    names = sorted(n[:-5] for n in os.listdir(GOLDEN) if n.endswith(".json"))
    assert names == sorted(list(SCENARIOS) + ["seed_mrrs_dropped"])
