"""engines/report/views.py: the order, grouping and counts of findings the reports show (the
grouping test moved from test_report.py)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import views


def test_grouping_keeps_order_and_only_merges_identical_findings():
    def item(subject, current="512 bytes", fid="pcie_mrrs", detail=None):
        return {"id": fid, "severity": "high", "subject": subject, "current": current,
                "expected": "4096 bytes", "remedy": "setpci -s %s x; tune" % subject,
                "reboot_required": False, "detail": detail}
    rows = views.group_findings([item("a", detail="GPU"), item("b", detail="bridge"),
                                 item("c", current="256 bytes"), item("d", fid="other")])
    assert [r["subjects"] for r in rows] == [["a", "b"], ["c"], ["d"]]
    assert rows[0]["remedy"] == 'for s in a b; do setpci -s "$s" x; done; tune'
    assert rows[0]["details"] == [("a", "GPU"), ("b", "bridge")]
    assert rows[1]["remedy"] == "setpci -s c x; tune"


def _f(fid, severity, subject="s", acknowledged=False):
    item = {"id": fid, "severity": severity, "subject": subject, "current": "c",
            "expected": "e", "remedy": "r", "reboot_required": False}
    if acknowledged:
        item["acknowledged"] = {"reason": "known"}
    return item


def test_counts_and_worst_over_the_severities():
    items = [_f("a", "low"), _f("b", "high"), _f("c", "high")]
    counts = views.counts(items)
    assert counts["high"] == 2 and counts["low"] == 1 and counts["critical"] == 0
    assert views.worst(items) == "high"
    assert views.worst([]) == "ok"


def test_hosts_order_is_worst_first_then_by_name():
    docs = [{"host": "b", "findings": [_f("x", "low")]},
            {"host": "a", "findings": [_f("x", "low")]},
            {"host": "c", "findings": [_f("x", "critical")]},
            {"host": "d", "findings": []}]
    assert [d["host"] for d in views.hosts_order(docs)] == ["c", "a", "b", "d"]


def test_the_status_order_ends_with_ok_and_na():
    assert views.STATUS_ORDER[-2:] == ("ok", "n/a")
    assert views.STATUS_ORDER[0] == "critical"


def test_new_first_acknowledged_last_and_their_marks():
    new = dict(_f("a", "low", "n"), new=True)
    ack = _f("b", "high", "k", acknowledged=True)
    plain = _f("c", "medium", "p")
    assert [f["subject"] for f in views.shown_order([ack, plain, new])] == ["n", "p", "k"]
    assert views.marks(new) == ["new"] and views.marks(ack) == ["acknowledged"]
    assert views.marks(plain) == []


def test_natural_host_order_puts_gpu2_before_gpu10():
    docs = [{"host": "gpu10", "findings": []}, {"host": "gpu2", "findings": []}]
    assert [d["host"] for d in views.hosts_order(docs)] == ["gpu2", "gpu10"]


def test_fleet_findings_group_by_id_with_host_counts_and_the_worst_hosts():
    def doc(host, *findings):
        return {"host": host, "findings": [{"id": i, "severity": s} for i, s in findings]}
    docs = [doc("a", ("sysctl", "medium"), ("sysctl", "medium"), ("pcie_mrrs", "high")),
            doc("b", ("sysctl", "low")),
            doc("c", ("sysctl", "high")),
            doc("d")]
    rows = views.fleet_findings(docs, worst_hosts=2)
    assert [(r["id"], r["severity"], r["hosts"], r["count"]) for r in rows] == [
        ("sysctl", "high", 3, 4), ("pcie_mrrs", "high", 1, 1)]  # more hosts first
    # worst hosts: by that finding's severity on them, then how many they have
    assert rows[0]["worst"] == [("c", 1), ("a", 2)] and rows[0]["more"] == 1
    assert views.fleet_findings([doc("d")]) == []
