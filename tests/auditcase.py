"""What the check files' mirror tests share (each subject folder's ``*_check`` tests):
``judge``, which runs one check the way the audit does, and the findings of chosen columns.
The fixtures built on it are in tests/unit/plugins/module_utils/conftest.py."""

from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout, findings
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import gpu_health

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


def health_findings(root, columns, driver="580.159.04", window_days=7):
    """GPU health facts of ``root`` (``gpuhealth.collect``: the stored nvidia-smi XML and
    kernel log) and the findings of ``columns`` on them."""
    outputs = cmdout.CommandOutputs(str(root))
    facts = gpu_health.collect(str(root), outputs, driver, window_days)
    return facts, column_findings(facts, columns)


def ids(found):
    return sorted((f["id"], f["subject"], f["severity"]) for f in found)
