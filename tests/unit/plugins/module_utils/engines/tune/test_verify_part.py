"""engines/tune/verify_part.py: the verifying audit after tuning, and which remaining findings fail
the
host (those owned by the parts that ran, less the subjects a part skipped)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import (
    tune_registry,
    verify_part,
)


def _finding(fid, subject):
    return {"id": fid, "subject": subject, "current": "512 bytes", "expected": "4096 bytes"}


class Ctx(object):
    def __init__(self, findings, changed=True, check_mode=False, on=("pcie",), skipped=None):
        self.before = {"findings": [_finding("pcie_mrrs", "0000:01:00.0")]}
        self.after = {"findings": findings}
        self.changed = changed
        self.check_mode = check_mode
        self.managed = tune_registry.MANAGED
        self.on = on
        self.skipped = skipped or {}
        self.audits = 0

    def audit(self):
        self.audits += 1
        return self.after


def test_a_finding_of_a_part_that_ran_still_there_fails_the_host():
    ctx = Ctx([_finding("pcie_mrrs", "0000:02:00.0"), _finding("nvidia_uvm_hmm", "x")])
    out = verify_part.VERIFY_PART.run(ctx)
    assert ctx.audits == 1
    assert out["fields"]["findings_after"] == [_finding("pcie_mrrs", "0000:02:00.0")]
    assert out["fields"]["audit_again"] is True
    assert out["failures"] == ["still off after tuning: pcie_mrrs 0000:02:00.0: 512 bytes "
                               "(want 4096 bytes)"]


def test_a_part_that_did_not_run_or_a_skipped_subject_is_not_failed():
    ctx = Ctx([_finding("pcie_mrrs", "0000:02:00.0")], on=("sysctl",))
    assert verify_part.VERIFY_PART.run(ctx)["failures"] == []
    ctx = Ctx([_finding("pcie_mrrs", "0000:02:00.0")],
              skipped={"pcie": ("0000:02:00.0",)})
    assert verify_part.VERIFY_PART.run(ctx)["failures"] == []


def test_nothing_changed_judges_the_first_audit_and_check_mode_judges_nothing():
    ctx = Ctx([], changed=False)
    out = verify_part.VERIFY_PART.run(ctx)
    assert ctx.audits == 0 and out["fields"]["audit_again"] is False
    assert len(out["failures"]) == 1
    ctx = Ctx([_finding("pcie_mrrs", "0000:02:00.0")], check_mode=True)
    assert verify_part.VERIFY_PART.run(ctx) == {} and ctx.audits == 0
    assert verify_part.VERIFY_PART.not_run(ctx, "off") == {}
