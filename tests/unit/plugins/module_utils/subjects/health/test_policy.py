"""Operator policy (subjects/health/policy.py): acknowledged findings, XID catalogue overrides,
copy-rate
pass marks per GPU model; and the reports' new / seen-before marks against the previous
``<host>.json``."""

import json

import pytest
from fixtures import health, hosts
from fixtures.cudaprobe import probe_ok
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import kernel_log, xid
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import gpu_xid_check
from ansible_collections.gpuhost.tuning.plugins.modules import audit_report, host_audit

WANTED = hosts.common_wanted()
READ_AT = "2026-11-30T12:00:00Z"
GPU = "0000:2b:00.0"


def _xid_line(code, when, text="pid=1896, name=python3, Ch 00000008"):
    # the journal's short-iso form of an NVRM line (as kernlog reads it; the same shape as
    # the real lines in test_gpuhealth.py)
    return "%s pve kernel: NVRM: Xid (PCI:0000:2b:00): %d, %s" % (when, code, text)


def _log(lines):
    now = 1796040000                            # READ_AT
    events = [kernel_log.parse_line(line) for line in lines]
    devices = xid.summarize(events, now, 7)
    for dev in devices:                         # as kernlog.facts keeps them
        for code in dev["codes"]:
            code["first"], code["last"] = kernel_log.iso(code["first"]), kernel_log.iso(code["last"])  # noqa: E501
    return {"kernel_log": {"available": True, "read_at": READ_AT, "window_days": 7,
                           "devices": devices}}


def _xid(facts, xid_policy=()):
    return list(gpu_xid_check.gpu_xid_events(facts, {"xid_policy": list(xid_policy)}))


# --- XID policy --------------------------------------------------------------------------

def test_xid_policy_class_min_count_and_window_change_the_verdict():
    facts = _log([_xid_line(13, "2026-11-30T09:00:00+00:00"),
                  _xid_line(13, "2026-11-30T10:00:00+00:00")])
    found, = _xid(facts)                       # the catalogue: XID 13 restarts the app
    assert found["severity"] == "low"
    # the operator says XID 13 needs a GPU reset here
    found, = _xid(facts, [{"xid": 13, "class": "reset_gpu"}])
    assert found["severity"] == "high" and "class reset_gpu by xid_policy" in found["detail"]
    # ... but only from 3 events on: two are no finding
    assert _xid(facts, [{"xid": 13, "class": "reset_gpu", "min_count": 3}]) == []
    # an old repeat is ignored (Azure's window): the last event 2 h before the read
    assert _xid(facts, [{"xid": 13, "window_hours": 1}]) == []
    assert len(_xid(facts, [{"xid": 13, "window_hours": 3}])) == 1
    # the facts are the host's and stay as they were read
    assert facts["kernel_log"]["devices"][0]["codes"][0]["class"] == "restart_app"


def test_a_code_the_policy_does_not_name_keeps_the_catalogue():
    facts = _log([_xid_line(79, "2026-11-30T10:00:00+00:00", "GPU has fallen off the bus.")])
    found, = _xid(facts, [{"xid": 13, "min_count": 5}])
    assert found["severity"] == "high" and found["reboot_required"] is True


@pytest.mark.parametrize("bad, words", [
    ([{"class": "reset_gpu"}], "xid_policy[0] needs xid"),
    ([{"xid": 13, "class": "reboot_now"}], "xid_policy[0].class must be one of"),
    ([{"xid": 13, "min_count": 0}], "xid_policy[0].min_count must be a whole number 1"),
    ([{"xid": 13}, {"xid": 13}], "XID 13 is given twice"),
    ([{"xid": 13, "count": 3}], "unknown key count"),
])
def test_bad_xid_policy_is_refused_naming_the_entry(tmp_path, bad, words):
    root = hosts.vm_host(str(tmp_path / "vm"))["root"]
    res = run_module(host_audit, hosts.as_wanted({"root": root, "xid_policy": bad}))
    assert res["failed"] is True and words in res["msg"], res["msg"]


# --- copy-rate pass marks ----------------------------------------------------------------

def test_the_table_names_its_source_and_matches_whole_words():
    assert policy.copy_marks("NVIDIA H100 80GB HBM3")["host_gbs"] == 48.0
    assert "nd96isr_h200_v5.conf" in policy.copy_marks("NVIDIA H200")["source"]
    assert policy.copy_marks("NVIDIA H1000") is None
    assert policy.copy_marks("NVIDIA L40S") is None
    mine = policy.copy_marks("NVIDIA L40S", [{"model": "L40S", "host_gbs": 20}])
    assert mine["host_gbs"] == 20 and mine["source"] == "copy_rate_marks"


def test_an_h200_above_70_percent_but_below_48_gbs_is_low_by_its_mark(tmp_path):
    vm = hosts.vm_host(str(tmp_path / "vm"))
    # 74 % of a Gen5 x16 link (46.6 GB/s): the old percentage passed it, Azure's mark not
    res = run_module(host_audit, {"root": vm["root"],
                                  "cuda": [probe_ok(vm["gpu"], 74.0, 74.0)]})
    found, = [f for f in res["audit"]["findings"] if f["id"] == "pcie_bandwidth_low"]
    assert found["current"].startswith("H2D 46.6 GB/s = 74.0 %, D2H 46.6 GB/s = 74.0 %")
    assert found["expected"].startswith("at least 48 GB/s each way (H200 pass mark: Azure")
    # the measured H200 (87.6 %, 55 GB/s) passes its mark
    res = run_module(host_audit, {"root": vm["root"], "cuda": [probe_ok(vm["gpu"])]})
    assert not [f for f in res["audit"]["findings"] if f["id"] == "pcie_bandwidth_low"]
    # the operator's own mark for the model comes first
    marks = [{"model": "H200", "host_gbs": 40}]
    res = run_module(host_audit, hosts.as_wanted({"root": vm["root"],
                                                  "cuda": [probe_ok(vm["gpu"], 74.0)],
                                                  "copy_rate_marks": marks}))
    assert not [f for f in res["audit"]["findings"] if f["id"] == "pcie_bandwidth_low"]


def test_a_link_too_slow_for_the_mark_is_judged_by_its_percentage():
    dev = dict(probe_ok("0000:17:00.0")["devices"][0], link_gbs=31.5, h2d_gbs=27.0,
               d2h_gbs=27.0, h2d_pct=85.7, d2h_pct=85.7, link="16.0 GT/s PCIe x16")
    facts = {"cuda": [{"devices": [dev]}]}
    assert list(cuda_check.pcie_bandwidth_low(facts, {})) == []
    dev.update(h2d_gbs=18.0, h2d_pct=57.1)
    found, = cuda_check.pcie_bandwidth_low(facts, {})
    assert found["expected"] == "at least 70 % of the link each way"


def test_bad_copy_rate_marks_are_refused(tmp_path):
    root = hosts.vm_host(str(tmp_path / "vm"))["root"]
    res = run_module(host_audit, hosts.as_wanted({"root": root,
                                                  "copy_rate_marks": [{"model": "H100"}]}))
    assert res["failed"] is True and "copy_rate_marks[0] (H100) needs host_gbs" in res["msg"]


# --- acknowledged findings and new since the last audit ---------------------------------

def _audit(root, at, **extra):
    result = audit.audit(str(root), dict(WANTED, host="pve-gpu03", **extra))
    result["collected_at"] = at
    return result


def _reports(dest, result):
    res = run_module(audit_report, {"audits": {"pve-gpu03": result}, "dest": str(dest),
                                    "generated_at": "2026-12-02 07:00:00Z"})
    assert res.get("failed") is not True, res
    return res


def test_acknowledged_findings_stay_in_the_report_but_not_in_the_alerting_series(tmp_path):
    root = tmp_path / "host"
    health.health_host(root)
    plain = _audit(root, "2026-12-01T06:00:00Z")
    target = plain["findings"][0]
    acked = _audit(root, "2026-12-01T06:00:00Z",
                   acknowledged=[{"id": target["id"], "subject": target["subject"]}])
    mine = [f for f in acked["findings"] if f.get("acknowledged")]
    assert [(f["id"], f["subject"]) for f in mine] == [(target["id"], target["subject"])]
    assert len(acked["findings"]) == len(plain["findings"])
    text = metrics.audit_text({"pve-gpu03": acked})
    alerting = [ln for ln in text.splitlines() if ln.startswith("gpuhost_finding{")]
    assert len(alerting) == len(metrics.audit_text({"pve-gpu03": plain}).splitlines()
                                and [ln for ln in metrics.audit_text(
                                    {"pve-gpu03": plain}).splitlines()
                                    if ln.startswith("gpuhost_finding{")]) - 1
    assert 'gpuhost_finding_acknowledged{host="pve-gpu03",id="%s"' % target["id"] in text
    _reports(tmp_path / "r", acked)
    summary = (tmp_path / "r" / "summary.md").read_text()
    rows = [ln for ln in summary.splitlines() if ln.startswith("| pve-gpu03 | ")
            and "`" in ln]
    assert "**acknowledged**" in rows[-1]          # listed, last
    # an id that is no finding id is refused, naming it
    acknowledged = [{"id": "gpu_xid_event", "subject": "x"}]
    res = run_module(host_audit, hosts.as_wanted({"root": str(root),
                                                  "acknowledged": acknowledged}))
    assert res["failed"] is True and "'gpu_xid_event' is no finding id" in res["msg"]


def test_findings_are_new_or_seen_before_against_the_previous_report(tmp_path):
    root, dest = tmp_path / "host", tmp_path / "reports"
    health.health_host(root)
    first = _audit(root, "2026-12-01T06:00:00Z")
    _reports(dest, first)
    doc = json.loads((dest / "pve-gpu03.json").read_text())
    assert "compared_with" not in doc and not any("new" in f for f in doc["findings"])
    # the second audit finds one more thing: a finding the first report lacks
    second = _audit(root, "2026-12-02T06:00:00Z")
    extra = dict(second["findings"][-1], id="gpu_persistence_off", subject="0000:99:00.0",
                 severity="medium")
    second["findings"] = second["findings"] + [extra]
    res = _reports(dest, second)
    doc = json.loads((dest / "pve-gpu03.json").read_text())
    assert doc["compared_with"] == "2026-12-01T06:00:00Z"
    fresh = [f for f in doc["findings"] if f["new"]]
    assert [(f["id"], f["subject"]) for f in fresh] == [("gpu_persistence_off", "0000:99:00.0")]
    assert all(f["new"] is False for f in doc["findings"] if f is not fresh[0])
    summary = (dest / "summary.md").read_text()
    rows = [ln for ln in summary.splitlines() if ln.startswith("| pve-gpu03 | ") and "`" in ln]
    assert "`gpu_persistence_off` **new**" in rows[0]      # new first, whatever its rank
    assert "pve-gpu03 1 (of %d, previous report 2026-12-01T06:00:00Z)" % len(
        doc["findings"]) in summary
    page = (dest / "pve-gpu03.html").read_text()
    assert '<span class="badge s-new">new</span>' in page
    prom = (dest / "gpuhost.prom").read_text()
    assert [ln for ln in prom.splitlines() if ln.startswith("gpuhost_finding_new{")] == [
        'gpuhost_finding_new{host="pve-gpu03",id="gpu_persistence_off",severity="medium",'
        'subject="0000:99:00.0"} 1']
    assert "gpuhost_finding_new{" in res["metrics"]["pve-gpu03"]
    # the same audit written again keeps its marks and changes nothing
    again = _reports(dest, second)
    assert again["written"] == []


# ---- issue 36: one rule for both gates, finite numbers, every policy value checked ---------


def test_gating_leaves_out_the_acknowledged_ones():
    marked = policy.mark_acknowledged([{"id": "a", "subject": "x"}, {"id": "b", "subject": "y"}],
                                      [{"id": "b"}])
    assert policy.gating(marked) == [{"id": "a", "subject": "x"}]
    assert policy.gating(None) == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused(value):
    with pytest.raises(ValueError, match=r"xid_policy\[0\]\.window_hours"):
        policy.check_xid_policy([{"xid": 13, "window_hours": value}])
    with pytest.raises(ValueError, match=r"copy_rate_marks\[0\]\.peer_gbs"):
        policy.check_copy_rate_marks([{"model": "H100", "peer_gbs": value}])


def test_check_options_checks_all_three():
    policy.check_options({"acknowledged": [{"id": "a"}], "xid_policy": [], "copy_rate_marks": []},
                         ("a",))
    with pytest.raises(ValueError, match="is no finding id"):
        policy.check_options({"acknowledged": [{"id": "b"}]}, ("a",))
    with pytest.raises(ValueError, match="xid_policy"):
        policy.check_options({"xid_policy": [{"xid": 0}]})
    with pytest.raises(ValueError, match="copy_rate_marks"):
        policy.check_options({"copy_rate_marks": [{"model": "H100"}]})
