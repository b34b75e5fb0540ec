"""The check registry: ids, severities and columns declared once, and the documentation that
users read (host_audit's DOCUMENTATION, the README's findings table) kept true to it."""

import os
import re

import pytest
import yaml

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import findings
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit
from conftest import REPO

REGISTERED = dict((c.id, c) for c in findings.checks())


def documented_ids():
    """``{id: severity group}`` from host_audit's "Finding ids (stable):" paragraph, where
    each run of ``C(id)`` ends with its ``(severity)``."""
    doc = yaml.safe_load(host_audit.DOCUMENTATION)
    (text,) = [d for d in doc["description"] if d.startswith("Finding ids (stable):")]
    text = text.split("Some ids take another severity")[0]
    out, pending = {}, []
    for match in re.finditer(r"C\((\w+)\)|\((critical|high|medium|low|info)\)", text):
        if match.group(1):
            pending.append(match.group(1))
        else:
            out.update((fid, match.group(2)) for fid in pending)
            pending = []
    assert not pending, "ids without a severity in host_audit's documentation: %s" % pending
    return out


def readme_rows():
    """``{id: severity cell}`` of the README's "Audit findings (stable ids)" table."""
    with open(os.path.join(REPO, "README.md")) as handle:
        text = handle.read()
    section = text.split("### Audit findings (stable ids)", 1)[1].split("\n#", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for fid in re.findall(r"`(\w+)`", cells[0]):
            out[fid] = cells[1]
    return out


def test_every_registered_id_is_documented_in_host_audit_and_nothing_else():
    documented = documented_ids()
    assert sorted(set(REGISTERED) - set(documented)) == [], \
        "registered but missing from host_audit's DOCUMENTATION"
    assert sorted(set(documented) - set(REGISTERED)) == [], \
        "documented in host_audit but not registered"
    for fid, severity in documented.items():
        assert severity == REGISTERED[fid].severities[0], fid


def test_every_registered_id_is_in_the_readme_table_with_its_severities():
    rows = readme_rows()
    assert sorted(set(REGISTERED) - set(rows)) == [], "missing from the README's table"
    assert sorted(set(rows) - set(REGISTERED)) == [], "in the README's table, not registered"
    for fid, cell in rows.items():
        words = set(re.findall(r"[a-z]+", cell))
        declared = set(REGISTERED[fid].severities)
        assert declared <= words, "%s: README says %r, registry %s" % (fid, cell, declared)
        assert not (words & set(findings.SEVERITIES)) - declared, (fid, cell)


def test_order_and_columns_are_derived_from_the_registry():
    assert audit.FINDING_ORDER == tuple(c.id for c in sorted(REGISTERED.values(),
                                                             key=lambda c: c.order))
    assert [key for key, _label, _ids in audit.CHECKS] == [c.key for c in findings.columns()]
    assert sorted(fid for _key, _label, ids in audit.CHECKS for fid in ids) == sorted(REGISTERED)
    # the report's first columns and the first-ranked findings (MRRS before the link, DKMS
    # first of all) as users know them
    assert audit.FINDING_ORDER[:4] == ("dkms_missing_for_kernel", "gpu_no_driver", "pcie_mrrs",
                                       "pcie_link_degraded")
    assert [k for k, _l, _i in audit.CHECKS][:3] == ["dkms", "pcie_mrrs", "pcie_link"]


def test_registering_twice_or_with_an_unknown_severity_fails():
    col = findings.Column("x", "X", 999)
    with pytest.raises(ValueError, match="registered twice"):
        findings.check("sysctl", col, "low", order=12345)(lambda facts, wanted: [])
    with pytest.raises(ValueError, match="share order"):
        findings.check("new_id", col, "low", order=REGISTERED["sysctl"].order)(
            lambda facts, wanted: [])
    with pytest.raises(ValueError, match="unknown severity"):
        findings.check("new_id", col, "severe", order=12345)
    with pytest.raises(ValueError, match="share position"):
        findings.column("new_column", "New", position=findings.columns()[0].position)
    assert "new_id" not in dict((c.id, c) for c in findings.checks())


def test_a_check_giving_a_severity_it_does_not_declare_fails_loudly():
    def rule(facts, wanted):
        return [findings.found("s", "a", "b", "fix", severity="high")]
    item = findings.Check("demo", findings.Column("x", "X", 999), "low", 12345, rule)
    with pytest.raises(ValueError, match="demo gave severity 'high'"):
        item.run({}, {})


def test_an_inapplicable_column_runs_none_of_its_checks():
    facts = {"gpus": [], "cpu": {}, "sysctl": {}, "dkms": [], "lxc": [], "nvidia": {},
             "kernel": {}, "errors": []}
    items, reasons = check_registry.evaluate(facts, audit.merged_wanted({}))
    assert items == []
    assert reasons["pcie_mrrs"] == "no NVIDIA GPU" and reasons["nvidia"] == "no NVIDIA driver"
    assert "kernel" not in reasons and "audit" not in reasons
