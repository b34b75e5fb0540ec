"""What the check files' mirror tests share (each subject folder's ``*_check`` tests):
``judge``, which runs one check the way the audit does, and the findings of chosen columns.
The fixtures built on it are in tests/unit/plugins/module_utils/conftest.py."""

from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import (
    cmdout,
    facts_base,
    findings,
)

WANTED = hosts.common_wanted(host="pve-gpu01")


def judge(fid, facts, **wanted):
    """Finding id ``fid`` run alone on ``facts``: its findings (a list), or the reason
    (a string) its column or the check itself does not apply. ``wanted`` overrides role
    common's defaults."""
    merged = audit.merged_wanted(dict(WANTED, **wanted))
    item = findings.get(fid)
    reason = item.column.not_applicable(facts, merged)
    if reason is None and item.applies is not None:
        reason = item.applies(facts, merged)
    if reason is not None:
        return reason
    return item.run(facts, merged)


def column_findings(facts, columns, wanted=None):
    """The findings of the registry's columns ``columns`` on ``facts``, each column only
    where it applies (as ``checks.evaluate`` runs them)."""
    wanted = wanted if wanted is not None else {"host": "gpu07"}
    found = []
    for col in findings.columns():
        if col.key in columns and col.not_applicable(facts, wanted) is None:
            for item in col.checks:
                found.extend(item.run(facts, wanted))
    return found


HEALTH_FACTS = ("nvidia_smi", "kernel_log", "fabric_manager", "containers_nvidia")


def health_facts(root, outputs, driver="580.159.04", window_days=7):
    """The GPU health facts of ``root`` as the audit reads them (its declared facts
    ``HEALTH_FACTS``: the stored nvidia-smi XML, the kernel log, the fabric manager, no
    container), with NVIDIA driver ``driver`` loaded; a reader's failure raises."""
    wanted = audit.merged_wanted({"xid_window_days": window_days})
    context = facts_base.FactContext(str(root), wanted, outputs)
    context.facts.update(nvidia={"driver_version": driver}, lxc=[])
    errors = []
    found = facts_base.read_facts([fact for fact in check_registry.FACTS
                                   if fact.name in HEALTH_FACTS], context, errors)
    assert not errors, errors
    return found


def health_findings(root, columns, driver="580.159.04", window_days=7):
    """GPU health facts of ``root`` (``health_facts``) and the findings of ``columns`` on
    them."""
    facts = health_facts(root, cmdout.CommandOutputs(str(root)), driver, window_days)
    return facts, column_findings(facts, columns)


def ids(found):
    return sorted((f["id"], f["subject"], f["severity"]) for f in found)


def declared_facts(declaration, root, wanted=None, known=None):
    """What one subject's audit declaration (``audit_<subject>.py``) reads from ``root``:
    ``(facts, errors)``; ``known`` are facts of a lower order it reads, given as they
    would be read before it; ``wanted`` overrides role common's defaults."""
    merged = audit.merged_wanted(dict(WANTED, **(wanted or {})))
    context = facts_base.FactContext(str(root), merged, cmdout.CommandOutputs(str(root)))
    context.facts.update(known or {})
    errors = []
    return facts_base.read_facts(facts_base.declared(declaration, "FACTS"), context, errors), errors
