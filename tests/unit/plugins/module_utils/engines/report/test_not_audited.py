"""Every inventory host is in every report: a host that was not audited (unreachable,
failed, skipped) has its document (status, error, last_seen, groups), a row in summary.md,
gpuhost_host_up 0 in gpuhost.prom, and report_merge keeps it."""

import datetime
import json
import os
import shutil
import subprocess

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report

GENERATED = "2026-12-05 05:00:00Z"
DEAD = {"status": "unreachable",
        "error": "Task failed: Failed to connect to the host via ssh: ssh: connect to host "
                 "127.0.0.1 port 1: Connection refused"}
BROKEN = {"status": "failed", "error": "root /nope: no such folder"}


def _audits(fleet):
    return {"pve-gpu01": fleet["pve-gpu01"], "pve-dead": dict(DEAD), "pve-broken": dict(BROKEN)}


def test_documents_carry_status_error_last_seen_groups(fleet):
    groups = {"pve-gpu01": ["gpuhosts", "rack1"], "pve-dead": ["gpuhosts"]}
    files = report.report_files(_audits(fleet), GENERATED, groups=groups)
    assert set(files) == {"pve-gpu01.json", "pve-dead.json", "pve-broken.json", "summary.md",
                          "index.html", "gpuhost.prom", "pve-gpu01.html", "pve-dead.html",
                          "pve-broken.html"}
    # the fleet view lists the hosts not audited (how: the page's)
    assert "pve-dead" in files["index.html"] and "Connection refused" in files["pve-dead.html"]
    ok = json.loads(files["pve-gpu01.json"])
    assert (ok["status"], ok["error"], ok["groups"]) == ("ok", "", ["gpuhosts", "rack1"])
    assert ok["last_seen"] == ok["collected_at"] and ok["findings"]
    dead = json.loads(files["pve-dead.json"])
    assert dead["status"] == "unreachable" and "Connection refused" in dead["error"]
    assert dead["last_seen"] is None and dead["groups"] == ["gpuhosts"]
    assert dead["findings"] == [] and dead["facts"] == {} and dead["checks"] == {}
    # the time it was tried: the report's time in host_audit's format
    assert dead["collected_at"] == "2026-12-05T05:00:00Z"
    broken = json.loads(files["pve-broken.json"])
    assert (broken["status"], broken["groups"]) == ("failed", [])


def test_summary_lists_hosts_not_audited_before_findings(fleet):
    text = report.report_files(_audits(fleet), GENERATED)["summary.md"]
    section = text.index("## Hosts not audited")
    assert section < text.index("## Findings")
    assert "| pve-dead | unreachable | never | Task failed: Failed to connect" in text
    assert "| pve-broken | failed | never | root /nope: no such folder |" in text
    # the hosts table counts the audited host only (no "ok" row for a dead host)
    assert text.startswith("# GPU host audit\n\n1 host(s)")
    assert "| pve-dead | ok |" not in text


def test_metrics_host_up_and_age(fleet, tmp_path):
    prom = report.report_files(_audits(fleet), GENERATED)["gpuhost.prom"]
    assert 'gpuhost_host_up{host="pve-gpu01"} 1' in prom
    assert 'gpuhost_host_up{host="pve-dead"} 0' in prom
    assert 'gpuhost_host_up{host="pve-broken"} 0' in prom
    assert 'gpuhost_last_good_audit_age_seconds{host="pve-gpu01"}' in prom
    # never audited: no age series; no finding series for a host not audited
    assert 'gpuhost_last_good_audit_age_seconds{host="pve-dead"}' not in prom
    assert 'gpuhost_findings{host="pve-dead"' not in prom
    promtool = shutil.which("promtool")
    if promtool:
        path = tmp_path / "gpuhost.prom"
        path.write_text(prom)
        proc = subprocess.run([promtool, "check", "metrics"], input=prom, text=True,
                              capture_output=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_last_seen_from_the_previous_report(fleet, tmp_path):
    dest = str(tmp_path)
    first = report.audit_report_run({"audits": {"pve-gpu01": fleet["pve-gpu01"]},
                                     "dest": dest, "generated_at": GENERATED, "mrrs_size": 4096,
                                     "write": True})
    assert first["not_audited"] == {}
    seen = fleet["pve-gpu01"]["collected_at"]
    # an hour after that audit, whenever the fixture made it (a fixed time went stale)
    when = datetime.datetime.strptime(seen.replace("T", " "), "%Y-%m-%d %H:%M:%SZ")
    later = (when + datetime.timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%SZ")
    out = report.audit_report_run({"audits": {"pve-gpu01": dict(DEAD)}, "dest": dest,
                                   "generated_at": later, "mrrs_size": 4096, "write": True})
    assert out["not_audited"]["pve-gpu01"]["last_seen"] == seen
    doc = json.loads((tmp_path / "pve-gpu01.json").read_text())
    assert doc["status"] == "unreachable" and doc["last_seen"] == seen
    prom = (tmp_path / "gpuhost.prom").read_text()
    age = [line for line in prom.splitlines()
           if line.startswith('gpuhost_last_good_audit_age_seconds{host="pve-gpu01"}')]
    assert age and int(age[0].split()[-1]) > 0
    # a third run still unreachable keeps the last good audit's time (not its own attempt)
    report.audit_report_run({"audits": {"pve-gpu01": dict(DEAD)}, "dest": dest,
                             "generated_at": (when + datetime.timedelta(hours=2)).strftime(
                                 "%Y-%m-%d %H:%M:%SZ"), "mrrs_size": 4096,
                             "write": True})
    assert json.loads((tmp_path / "pve-gpu01.json").read_text())["last_seen"] == seen
    # back again: an audited report, compared with nothing (its previous had no findings)
    report.audit_report_run({"audits": {"pve-gpu01": fleet["pve-gpu01"]}, "dest": dest,
                             "generated_at": (when + datetime.timedelta(hours=3)).strftime(
                                 "%Y-%m-%d %H:%M:%SZ"), "mrrs_size": 4096,
                             "write": True})
    doc = json.loads((tmp_path / "pve-gpu01.json").read_text())
    assert doc["status"] == "ok" and "compared_with" not in doc


def test_registered_results_become_statuses():
    stored = {
        "ok": {"r": {"audit": {"findings": [], "checks": {}}}, "group_names": ["b", "a"]},
        "dead": {"r": {"unreachable": True, "msg": "Failed to connect\nto the host"}},
        "bad": {"r": {"failed": True, "msg": "host_audit: root missing"}},
        "skip": {"r": {"skipped": True, "skip_reason": "Conditional result was False"}},
        "none": {},
    }
    audits = report.registered_audits(stored.get, list(stored), "r")
    assert audits["ok"] == {"findings": [], "checks": {}}
    assert audits["dead"] == {"status": "unreachable", "error": "Failed to connect to the host"}
    assert audits["bad"] == {"status": "failed", "error": "host_audit: root missing"}
    assert audits["skip"]["status"] == "skipped"
    assert audits["none"]["status"] == "failed" and "before the audit" in audits["none"]["error"]
    assert report.inventory_groups(stored.get, ["ok", "none"]) == {"ok": ["a", "b"], "none": []}


def _slice(dest, audits, generated=None):
    return report.audit_report_run({"audits": audits, "dest": str(dest),
                                    "generated_at": generated, "mrrs_size": 4096,
                                    "write": True, "fleet_files": False})


def test_merge_keeps_hosts_not_audited(fleet, tmp_path):
    one, two, dest = tmp_path / "one", tmp_path / "two", tmp_path / "merged"
    _slice(one, {"pve-gpu01": fleet["pve-gpu01"], "pve-gpu02": fleet["pve-gpu02"]})
    # the next slice run cannot reach pve-gpu02 (its last good audit: the one in "one")
    _slice(two, {"pve-gpu02": dict(DEAD), "pve-broken": dict(BROKEN)})
    assert sorted(os.listdir(two)) == ["pve-broken.json", "pve-gpu02.json"]
    out = report.merge_run({"folders": [str(one), str(two)], "dest": str(dest),
                            "stale_hours": 24.0, "generated_at": None, "mrrs_size": 4096})
    assert sorted(out["hosts"]) == ["pve-broken", "pve-gpu01", "pve-gpu02"]
    doc = json.loads((dest / "pve-gpu02.json").read_text())
    assert doc["status"] == "unreachable" and "Connection refused" in doc["error"]
    assert doc["last_seen"] == fleet["pve-gpu02"]["collected_at"]
    summary = (dest / "summary.md").read_text()
    assert "| pve-gpu02 | unreachable | %s |" % doc["last_seen"] in summary
    assert "| pve-broken | failed | never |" in summary
    prom = (dest / "gpuhost.prom").read_text()
    assert 'gpuhost_host_up{host="pve-gpu02"} 0' in prom
    assert 'gpuhost_host_up{host="pve-gpu01"} 1' in prom
    assert 'gpuhost_last_good_audit_age_seconds{host="pve-gpu02"}' in prom
    # merged again over its own output: the same documents
    again = report.merge_run({"folders": [str(dest)], "dest": str(tmp_path / "again"),
                              "stale_hours": 24.0, "generated_at": None, "mrrs_size": 4096})
    assert sorted(again["hosts"]) == ["pve-broken", "pve-gpu01", "pve-gpu02"]
    redo = json.loads((tmp_path / "again" / "pve-gpu02.json").read_text())
    assert (redo["status"], redo["last_seen"]) == ("unreachable", doc["last_seen"])


# --- tune reports: every host of the play, with its status


def test_tune_reports_carry_status_and_error():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import tune_doc
    dead = tune_doc.tune_document("gpu02", {"unreachable": True, "msg": "ssh: connect\nrefused"})
    assert (dead["status"], dead["error"]) == ("unreachable", "ssh: connect refused")
    assert dead["failures"] and "UNREACHABLE: ssh: connect refused" in \
        tune_doc.render_tune_markdown(dead)
    never = tune_doc.tune_document("gpu03", None)
    assert never["status"] == "failed" and "no result" in never["error"]
    ok = tune_doc.tune_document("gpu01", {"rows": [], "verified": True, "root": "/"})
    assert (ok["status"], ok["error"]) == ("ok", "")
    # read back (report_merge) it keeps its own status
    assert tune_doc.tune_document("gpu02", dead)["status"] == "unreachable"


def test_tune_summary_names_the_unreachable_host(tmp_path):
    one = tmp_path / "one"
    report.tune_report_run({"results": {"gpu01": {"rows": [], "verified": True, "root": "/"},
                                        "gpu02": {"unreachable": True, "msg": "refused"}},
                            "dest": str(one)})
    out = report.merge_run({"folders": [str(one)], "dest": str(tmp_path / "merged"),
                            "stale_hours": 24.0, "generated_at": GENERATED, "mrrs_size": 4096})
    assert out["tune"]["failed"] == ["gpu02"]
    text = (tmp_path / "merged" / "tune-summary.md").read_text()
    assert "| gpu02 | UNREACHABLE: refused |" in text and "| gpu01 | ok |" in text


def test_merge_judges_staleness_by_the_last_good_audit(fleet, tmp_path):
    old, today, dest = tmp_path / "old", tmp_path / "today", tmp_path / "merged"
    _slice(old, {"pve-gpu01": fleet["pve-gpu01"]})
    doc = json.loads((old / "pve-gpu01.json").read_text())
    doc["collected_at"] = doc["last_seen"] = "2020-01-01T00:00:00Z"
    (old / "pve-gpu01.json").write_text(json.dumps(doc))
    _slice(today, {"pve-gpu01": dict(DEAD)})
    out = report.merge_run({"folders": [str(old), str(today)], "dest": str(dest),
                            "stale_hours": 24.0, "generated_at": None, "mrrs_size": 4096})
    assert out["stale"] == ["pve-gpu01"]
    assert out["hosts"]["pve-gpu01"]["from"] == str(today / "pve-gpu01.json")
    summary = (dest / "summary.md").read_text()
    assert "| pve-gpu01 | 2020-01-01T00:00:00Z |" in summary and "| %s |" % old in summary
    assert "| pve-gpu01 | unreachable | 2020-01-01T00:00:00Z |" in summary
