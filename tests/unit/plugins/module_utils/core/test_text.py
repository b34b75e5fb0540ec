"""text: the console lines and headline of ranked findings (what host_audit returns and
the roles print). Findings in the audit's shape (id, severity, subject, current,
expected, remedy, reboot_required)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.core import text
from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.base import SEVERITIES


def _mrrs(address):
    return {"id": "pcie_mrrs_low", "severity": "high", "subject": address, "current": 512,
            "expected": 4096, "remedy": "setpci -s %s CAP_EXP+8.w (MRRS 4096)" % address,
            "reboot_required": False}


CRIT = {"id": "dkms_missing_for_kernel", "severity": "critical", "subject": "nvidia",
        "current": "not built", "expected": "built", "remedy": "dkms autoinstall -k 6.14",
        "reboot_required": True}


def test_findings_of_one_id_and_value_collapse_into_one_line_with_their_subjects():
    lines = text.text_lines([CRIT, _mrrs("0000:01:00.0"), _mrrs("0000:02:00.0")])
    assert lines == [
        "CRITICAL dkms_missing_for_kernel [nvidia]: not built (want built) [reboot]. Fix: "
        "dkms autoinstall -k 6.14",
        "HIGH     pcie_mrrs_low x2 [0000:01:00.0, 0000:02:00.0]: 512 (want 4096). Fix: "
        "setpci -s <subject> CAP_EXP+8.w (MRRS 4096)"]


def test_a_different_value_is_its_own_line():
    other = dict(_mrrs("0000:03:00.0"), current=256)
    assert len(text.text_lines([_mrrs("0000:01:00.0"), other])) == 2


def test_long_subject_lists_are_cut_at_the_limit():
    items = [_mrrs("0000:%02x:00.0" % n) for n in range(12)]
    (line,) = text.text_lines(items, limit=3)
    assert " x12 [0000:00:00.0, 0000:01:00.0, 0000:02:00.0, ... (9 more)]" in line


def test_no_findings():
    assert text.text_lines([]) == ["no findings"]
    assert text.headline([]) == "no findings"
    assert text.summary([]) == (dict.fromkeys(SEVERITIES, 0), "none")


def test_headline_and_summary_count_by_severity_worst_first():
    items = [CRIT, _mrrs("a"), _mrrs("b")]
    assert text.headline(items) == "worst critical: 1 critical, 2 high"
    counts, worst = text.summary(items)
    assert worst == "critical" and counts["critical"] == 1 and counts["high"] == 2
    assert sum(counts.values()) == 3
