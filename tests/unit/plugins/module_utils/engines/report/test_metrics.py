"""Prometheus text exposition of audit results (module_utils/engines/report/metrics.py)."""

import re

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics, report

WANTED = hosts.common_wanted()
SAMPLE = re.compile(r'^([a-z_]+)(\{(.*)\})? (-?[0-9.e+]+|NaN|[+-]Inf)$')


@pytest.fixture(scope="module")
def audits(tmp_path_factory):
    out = {}
    for name, build in (("seed", hosts.seed_host), ("tuned", hosts.tuned_host),
                        ("vm", hosts.vm_host)):
        root = tmp_path_factory.mktemp(name)
        build(root)
        out[name] = audit.audit(str(root), dict(WANTED, host=name))
    return out


def parse(text):
    """``{(name, ((label, value), ...)): value}`` plus the HELP/TYPE lines seen per name."""
    samples, meta = {}, {}
    for line in text.splitlines():
        if line.startswith("# "):
            kind, name = line.split()[1:3]
            meta.setdefault(name, []).append(kind)
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        samples[(match.group(1), labels)] = float(match.group(4))
    return samples, meta


def test_one_family_per_name_sorted_with_help_and_type(audits):
    text = metrics.audit_text(audits)
    assert text.endswith("\n") and not text.endswith("\n\n")
    _samples, meta = parse(text)
    assert list(meta) == sorted(meta) == [
        "gpuhost_audit_duration_seconds", "gpuhost_audit_timestamp_seconds",
        "gpuhost_check_status", "gpuhost_finding", "gpuhost_findings"]
    assert all(kinds == ["HELP", "TYPE"] for kinds in meta.values())
    assert "# TYPE gpuhost_finding gauge" in text
    # one block per family: the name never comes back after another family started
    names = [line.split("{")[0].split()[0] for line in text.splitlines() if line[0] != "#"]
    assert names == sorted(names)


def test_findings_per_severity_include_zeros_and_match_the_findings(audits):
    samples, _meta = parse(metrics.audit_text(audits))
    for host, result in audits.items():
        for severity in ("critical", "high", "medium", "low", "info"):
            value = samples[("gpuhost_findings", (("host", host), ("severity", severity)))]
            assert value == len([f for f in result["findings"]
                                 if f["severity"] == severity]), (host, severity)
    assert samples[("gpuhost_findings", (("host", "tuned"), ("severity", "critical")))] == 0
    seed = [k for k in samples if k[0] == "gpuhost_finding" and k[1][0] == ("host", "seed")]
    assert len(seed) == len(audits["seed"]["findings"])
    key = ("gpuhost_finding", (("host", "seed"), ("id", "pcie_mrrs"), ("severity", "high"),
                               ("subject", "0000:01:00.0")))
    assert samples[key] == 1


def test_check_status_encoding_time_and_duration(audits):
    samples, _meta = parse(metrics.audit_text(audits))
    status = dict((dict(k[1])["column"], v) for k, v in samples.items()
                  if k[0] == "gpuhost_check_status" and dict(k[1])["host"] == "seed")
    assert set(status) == set(audits["seed"]["checks"])
    assert status["dkms"] == 5 and status["pcie_mrrs"] == 4 and status["sysctl"] == 3
    vm = dict((dict(k[1])["column"], v) for k, v in samples.items()
              if k[0] == "gpuhost_check_status" and dict(k[1])["host"] == "vm")
    assert vm["cpuidle"] == -1  # n/a: no cpuidle in a VM
    tuned = dict((dict(k[1])["column"], v) for k, v in samples.items()
                 if k[0] == "gpuhost_check_status" and dict(k[1])["host"] == "tuned")
    assert tuned["pcie_mrrs"] == 0
    stamp = samples[("gpuhost_audit_timestamp_seconds", (("host", "seed"),))]
    assert stamp == metrics.epoch(audits["seed"]["collected_at"]) > 1.7e9
    assert samples[("gpuhost_audit_duration_seconds", (("host", "vm"),))] == pytest.approx(
        audits["vm"]["duration_s"])


def test_label_values_and_help_are_escaped():
    family = metrics.Family("gpuhost_x", "a \\ help\nline")
    family.add({"host": 'we"ird\\host\nname'}, 1)
    text = metrics.render([family])
    assert '# HELP gpuhost_x a \\\\ help\\nline\n' in text
    assert 'gpuhost_x{host="we\\"ird\\\\host\\nname"} 1\n' in text
    assert text.count("\n") == 3


def test_identical_findings_add_up_and_bad_names_are_refused():
    item = {"id": "audit_error", "severity": "medium", "subject": "gpus"}
    text = metrics.audit_text({"h": {"findings": [item, dict(item)], "checks": {}}})
    assert 'gpuhost_finding{host="h",id="audit_error",severity="medium",subject="gpus"} 2' \
        in text
    with pytest.raises(ValueError):
        metrics.Family("bad-name", "x")
    with pytest.raises(ValueError):
        metrics.Family("ok", "x").add({"bad-label": "v"}, 1)
    with pytest.raises(ValueError):
        metrics.render([metrics.Family("a", "x").add({}, 1), metrics.Family("a", "y")])


def test_value_formats():
    assert metrics.format_value(3) == "3"
    assert metrics.format_value(2.0) == "2"
    assert metrics.format_value(0.125) == "0.125"
    assert metrics.format_value(float("nan")) == "NaN"
    assert metrics.format_value(float("-inf")) == "-Inf"
    assert metrics.render([metrics.Family("empty", "nothing")]) == ""


def test_report_files_include_the_run_metrics(audits):
    generated = "2026-12-05 05:00:00Z"
    files = report.report_files(audits, generated)
    # the run's metrics carry the run-level findings (fleet drift) the reports show, and
    # every host's up and age series at the report's time
    docs = report.report_documents(audits)
    assert files["gpuhost.prom"] == metrics.audit_text(report.judged_audits(audits), docs,
                                                       metrics.epoch(generated))
    assert 'gpuhost_host_up{host="seed"} 1' in files["gpuhost.prom"]
    assert files["gpuhost.prom"] != metrics.audit_text(audits)
    assert 'id="fleet_drift"' in files["gpuhost.prom"]


def test_control_characters_and_surrogates_keep_one_sample_per_line():
    """A carriage return (or any control character, line separator or lone surrogate) in a
    host name or finding subject stays on its sample's line, as visible text, and the
    text is UTF-8: a reader that splits lines on any line break reads every sample."""
    odd = [chr(c) for c in list(range(0x00, 0x20)) + list(range(0x7f, 0xa0))]
    odd += [u"\u2028", u"\u2029", u"\udcff", u"\ud800"]
    audits = dict(("gpu%02d%s" % (n, ch), {"findings": [
        {"id": "audit_error", "severity": "low", "subject": "a%sb" % ch}], "checks": {}})
        for n, ch in enumerate(odd))
    text = metrics.audit_text(audits)
    text.encode("utf-8")  # strict: no surrogate left
    lines = text.split("\n")[:-1]
    assert text.splitlines() == lines
    assert all(re.match(r"^(# (HELP|TYPE) )?gpuhost_\w+", line) for line in lines), lines
    assert 'gpuhost_finding{host="gpu13\\\\x0d",id="audit_error",severity="low",' \
        'subject="a\\\\x0db"} 1' in lines
    assert 'subject="a\\nb"' in text  # a line feed keeps the format's own escape
    assert 'host="gpu%02d\\\\u2028"' % odd.index(u"\u2028") in text
    assert 'host="gpu%02d\\\\udcff"' % odd.index(u"\udcff") in text
    assert len([ln for ln in lines if ln.startswith("gpuhost_finding{")]) == len(odd)
    family = metrics.Family("gpuhost_x", "help\rwith a return")
    family.add({"host": "h"}, 1)
    assert "# HELP gpuhost_x help\\\\x0dwith a return\n" in metrics.render([family])


def test_each_gpus_recovery_need_is_a_series_ranked_by_what_it_needs():
    audit = {"findings": [], "checks": {}, "gpu_recovery": [
        {"address": "0000:18:00.0", "need": "none"},
        {"address": "0000:2a:00.0", "need": "reset"},
        {"address": "0000:3a:00.0", "need": "reboot"},
        {"address": None, "need": "reset"}]}           # no address: no series
    samples, meta = parse(metrics.audit_text({"h": audit}))
    got = dict((dict(k[1])["gpu"], (dict(k[1])["action"], v)) for k, v in samples.items()
               if k[0] == "gpuhost_gpu_recovery_action")
    assert got == {"0000:18:00.0": ("none", 0), "0000:2a:00.0": ("reset", 2),
                   "0000:3a:00.0": ("reboot", 4)}
    assert meta["gpuhost_gpu_recovery_action"] == ["HELP", "TYPE"]
