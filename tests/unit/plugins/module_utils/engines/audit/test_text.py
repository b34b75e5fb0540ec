"""text: the console lines and headline of ranked findings (what host_audit returns and
the roles print). Findings in the audit's shape (id, severity, subject, current,
expected, remedy, reboot_required)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import text
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import SEVERITIES


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
        'for s in 0000:01:00.0 0000:02:00.0; do setpci -s "$s" CAP_EXP+8.w; done (MRRS 4096)']


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


# --- a grouped remedy is text that can be pasted: never a placeholder


def test_group_remedy_loops_the_command_that_names_the_subject():
    remedy = ("sysctl -w net.core.rmem_max=16777216 (now); ansible-playbook "
              "gpuhost.tuning.tune -l gpu01 (now and persisted in /etc/sysctl.d)")
    got = text.group_remedy(remedy, "net.core.rmem_max",
                            ["net.core.rmem_max", "net.core.wmem_max"])
    assert got == ('for s in net.core.rmem_max net.core.wmem_max; do sysctl -w "$s"=16777216; '
                   "done (now); ansible-playbook gpuhost.tuning.tune -l gpu01 (now and "
                   "persisted in /etc/sysctl.d)")


def test_group_remedy_quotes_subjects_for_the_shell():
    got = text.group_remedy("pct set 101 --onboot 1", "101", ["101", "it's 102"])
    assert got == "for s in 101 'it'\"'\"'s 102'; do pct set \"$s\" --onboot 1; done"


def test_group_remedy_of_prose_is_each_subjects_own_remedy():
    remedy = "nvidia-ctk system create-dev-char-symlinks; then restart Docker in lxc 129"
    got = text.group_remedy(remedy, "lxc 129", ["lxc 129", "lxc 131"])
    assert got == "; ".join(remedy.replace("lxc 129", s) for s in ("lxc 129", "lxc 131"))
    assert "<subject>" not in got


def test_group_remedy_single_subject_or_no_subject_is_the_remedy():
    assert text.group_remedy("sysctl -w a=1", "a", ["a"]) == "sysctl -w a=1"
    assert text.group_remedy("reboot", "kernel", ["kernel", "x"]) == "reboot"


def test_no_console_line_of_a_golden_host_holds_a_placeholder():
    lines = text.text_lines([_mrrs("0000:%02x:00.0" % n) for n in range(4)]
                            + [dict(CRIT, subject="a"), dict(CRIT, subject="b")])
    assert not [line for line in lines if "<subject>" in line]
