"""The alert-to-repair example (extensions/prometheus, extensions/eda): the Prometheus rule
fires on the series the audit writes, the rulebook answers that alert with the repair
playbook for that host only. ansible-rulebook itself is not run here (its alertmanager
source is in the ansible.eda collection, which the test venv does not have); promtool
checks and unit-tests the rule where it is installed."""

import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXT = os.path.join(REPO, "extensions")
RULES = os.path.join(EXT, "prometheus", "gpuhost-rules.yml")
RULEBOOK = os.path.join(EXT, "eda", "rulebooks", "gpuhost_repair.yml")


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _alert(name):
    for group in _load(RULES)["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == name:
                return rule
    raise AssertionError("no alert %s in %s" % (name, RULES))


def test_the_rule_selects_the_series_the_audit_writes():
    audit = {"findings": [{"id": "lxc_stale_majors", "severity": "high", "subject": "lxc 129"}],
             "checks": {}}
    text = metrics.audit_text({"pve-gpu01": audit})
    assert 'gpuhost_finding{host="pve-gpu01",id="lxc_stale_majors",severity="high",' \
           'subject="lxc 129"} 1' in text
    rule = _alert("GpuhostLxcStaleMajors")
    assert 'gpuhost_finding{id="lxc_stale_majors"}' in rule["expr"]
    assert "by (host, subject)" in rule["expr"]  # the host label reaches the alert


def test_the_rulebook_repairs_that_host_only_with_a_playbook_that_exists():
    book = _load(RULEBOOK)
    assert len(book) == 1
    source = book[0]["sources"][0]["ansible.eda.alertmanager"]
    assert source["data_alerts_path"] == "alerts" and source["data_host_path"] == "labels.host"
    (rule,) = book[0]["rules"]
    assert 'event.alert.labels.alertname == "GpuhostLxcStaleMajors"' in rule["condition"]
    assert 'event.alert.status == "firing"' in rule["condition"]
    action = rule["action"]["run_playbook"]
    name = action["name"]
    assert name.startswith("gpuhost.tuning.")
    assert os.path.isfile(os.path.join(REPO, "playbooks", name.split(".")[-1] + ".yml"))
    assert action["extra_vars"]["gpuhost_hosts"] == "{{ event.alert.labels.host }}"
    assert action["extra_vars"]["gpuhost_reboot_verify_reboot"] is False
    spec = _load(os.path.join(REPO, "roles", "reboot_verify", "meta", "argument_specs.yml"))
    options = spec["argument_specs"]["main"]["options"]
    for var in action["extra_vars"]:
        if var != "gpuhost_hosts":
            assert var in options, var
    assert _alert("GpuhostLxcStaleMajors")["labels"]["gpuhost_repair"] == name.split(".")[-1]
    route = _load(os.path.join(EXT, "prometheus", "alertmanager-gpuhost.yml"))["route"]
    assert 'gpuhost_repair="reboot_verify"' in route["routes"][0]["matchers"]
    assert "host" in route["routes"][0]["group_by"]


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool not installed")
def test_promtool_checks_and_unit_tests_the_rules():
    folder = os.path.dirname(RULES)
    for args in (["check", "rules", "gpuhost-rules.yml"],
                 ["test", "rules", "gpuhost-rules.test.yml"]):
        proc = subprocess.run(["promtool"] + args, cwd=folder, capture_output=True, text=True,
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
