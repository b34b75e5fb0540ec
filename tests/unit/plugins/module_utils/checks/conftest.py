"""What the check files' mirror tests share: the fixture hosts of tests/fixtures/hosts.py
(real-format trees, each builder names where its formats came from) audited once per
session, and ``judge``, which runs one check the way ``checks.evaluate`` does."""

import copy
import importlib

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks import run as audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.core import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.readers import gpu_health as gpuhealth
from ansible_collections.gpuhost.tuning.plugins.module_utils.checks import base

WANTED = hosts.common_wanted(host="pve-gpu01")


@pytest.fixture(scope="session")
def audited(tmp_path_factory):
    """``audited(builder)``: a deep copy of ``audit.audit`` (facts, findings, checks) of
    the host ``hosts.<builder>`` builds (or ``fixtures.<module>.<builder>`` for a dotted
    name), each host built and audited once per session."""
    cache = {}

    def get(name):
        if name not in cache:
            module, _dot, func = name.rpartition(".")
            builder = getattr(importlib.import_module("fixtures." + module) if module
                              else hosts, func)
            root = tmp_path_factory.mktemp(name.replace(".", "-"))
            builder(str(root))
            cache[name] = audit.audit(str(root), WANTED)
        return copy.deepcopy(cache[name])
    return get


def judge(fid, facts, **wanted):
    """Finding id ``fid`` run alone on ``facts``: its findings (a list), or the reason
    (a string) its column or the check itself does not apply. ``wanted`` overrides role
    common's defaults."""
    merged = audit.merged_wanted(dict(WANTED, **wanted))
    item = base.get(fid)
    reason = item.column.not_applicable(facts, merged)
    if reason is None and item.applies is not None:
        reason = item.applies(facts, merged)
    if reason is not None:
        return reason
    return item.run(facts, merged)


@pytest.fixture(scope="session")
def run_check():
    return judge


def column_findings(facts, columns, wanted=None):
    """The findings of the registry's columns ``columns`` on ``facts``, each column only
    where it applies (as ``checks.evaluate`` runs them)."""
    wanted = wanted if wanted is not None else {"host": "gpu07"}
    found = []
    for col in base.columns():
        if col.key in columns and col.not_applicable(facts, wanted) is None:
            for item in col.checks:
                found.extend(item.run(facts, wanted))
    return found


def health_findings(root, columns, driver="580.159.04", window_days=7):
    """GPU health facts of ``root`` (``gpuhealth.collect``: the stored nvidia-smi XML and
    kernel log) and the findings of ``columns`` on them."""
    outputs = cmdout.CommandOutputs(str(root))
    facts = gpuhealth.collect(str(root), outputs, driver, window_days)
    return facts, column_findings(facts, columns)


def ids(found):
    return sorted((f["id"], f["subject"], f["severity"]) for f in found)
