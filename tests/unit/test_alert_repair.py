"""The alert-to-repair example (extensions/prometheus, extensions/eda): the Prometheus rule
fires on the series the audit writes, the rulebook answers that alert with the repair
playbook for that host only. ansible-rulebook itself is not run here (its alertmanager
source is in the ansible.eda collection, which the test venv does not have); promtool
checks and unit-tests the rule where it is installed, and ansible-rulebook (requirements-test.txt,
with a Java runtime) validates the rulebook against its own schema and runs its rules on
Alertmanager's webhook payload through a stand-in of that source
(tests/assets/eda/alertmanager_replay.py), each action replaced by a ``debug`` that prints
what the action would have been given. The AAP/AWX examples (extensions/aap): the approved
GPU recovery the rulebook launches, and the plan -> approval -> apply workflow."""

import importlib
import json
import os
import shutil
import subprocess
import sys

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


def _rule(book, alertname):
    (rule,) = [rule for rule in book[0]["rules"]
               if 'labels.alertname == "%s"' % alertname in rule["condition"]]
    return rule


def _role_options(role):
    spec = _load(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml"))
    return spec["argument_specs"]["main"]["options"]


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
    rule = _rule(book, "GpuhostLxcStaleMajors")
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


def test_a_gpu_that_needs_a_reset_alerts_per_host_and_gpu_from_the_recovery_gauge():
    audit = {"findings": [], "checks": {},
             "gpu_recovery": [{"address": "0000:1b:00.0", "need": "reset"},
                              {"address": "0000:2a:00.0", "need": "none"}]}
    text = metrics.audit_text({"pve-gpu01": audit})
    assert 'gpuhost_gpu_recovery_action{host="pve-gpu01",gpu="0000:1b:00.0",action="reset"} 2' \
        in text
    rule = _alert("GpuhostGpuNeedsReset")
    assert "gpuhost_gpu_recovery_action" in rule["expr"]
    assert "by (host, gpu, action)" in rule["expr"]
    assert rule["labels"] == {"gpuhost_finding": "gpu_recovery_needed",
                              "gpuhost_repair": "gpu_recover"}
    # a reboot is a person's decision: no repair label, so no route to the rulebook
    assert "gpuhost_repair" not in _alert("GpuhostGpuNeedsReboot")["labels"]


def test_the_rulebook_asks_for_an_approved_gpu_recover_of_that_host_and_gpu_only():
    book = _load(RULEBOOK)
    rule = _rule(book, "GpuhostGpuNeedsReset")
    assert 'event.alert.status == "firing"' in rule["condition"]
    assert sorted(rule["throttle"]["group_by_attributes"]) == [
        "event.alert.labels.gpu", "event.alert.labels.host"]
    # through an AAP/AWX workflow (its approval node), never the playbook directly
    assert "run_playbook" not in rule["action"]
    action = rule["action"]["run_workflow_template"]
    assert "approval" in action["name"]
    extra = action["job_args"]["extra_vars"]
    assert extra == {"gpuhost_hosts": "{{ event.alert.labels.host }}",
                     "gpuhost_recover_gpus": ["{{ event.alert.labels.gpu }}"],
                     "gpuhost_recover_reboot": False}
    assert os.path.isfile(os.path.join(REPO, "playbooks", "gpu_recover.yml"))
    options = _role_options("gpu_recover")
    for var in extra:
        if var != "gpuhost_hosts":
            assert var in options, var
    routes = _load(os.path.join(EXT, "prometheus", "alertmanager-gpuhost.yml"))["route"]["routes"]
    (route,) = [r for r in routes if 'gpuhost_repair="gpu_recover"' in r["matchers"]]
    assert {"host", "gpu"} <= set(route["group_by"])


def _rulebook_bin():
    """ansible-rulebook beside this Python (the test venv), with java on the PATH; None only
    in another lane's venv (GPUHOST_VENV_REQUIREMENTS: controller-next's has neither), else a
    missing tool fails: make test installs both (requirements-test.txt, UNIT_PKGS)."""
    path = os.path.join(os.path.dirname(sys.executable), "ansible-rulebook")
    if os.path.exists(path) and shutil.which("java"):
        return path
    if os.environ.get("GPUHOST_VENV_REQUIREMENTS"):
        return None
    pytest.fail("ansible-rulebook (requirements-test.txt) or java (UNIT_PKGS) missing: "
                "make test installs them")


def test_the_rulebook_is_valid_for_ansible_rulebook():
    if _rulebook_bin() is None:
        pytest.skip("ansible-rulebook and java are not in this lane's venv")
    import jsonschema
    import ansible_rulebook
    from ansible_rulebook import condition_parser
    schema = os.path.join(os.path.dirname(ansible_rulebook.__file__), "schema",
                          "ruleset_schema.json")
    with open(schema) as handle:
        jsonschema.validate(_load(RULEBOOK), json.load(handle))
    for rule in _load(RULEBOOK)[0]["rules"]:
        condition_parser.parse_condition(rule["condition"])


def _webhook(alerts):
    """Alertmanager's webhook body (webhook_configs, version 4) carrying ``alerts``."""
    return {"version": "4", "groupKey": "{}:{}", "status": "firing", "receiver": "gpuhost-eda",
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093", "truncatedAlerts": 0,
            "alerts": [dict(status=status, labels=labels, annotations={},
                            startsAt="2026-12-05T10:00:00Z", endsAt="0001-01-01T00:00:00Z",
                            generatorURL="http://prometheus:9090/graph", fingerprint="%016x" % n)
                       for n, (status, labels) in enumerate(alerts)]}


def test_ansible_rulebook_answers_each_alert_once_for_its_host_and_gpu(tmp_path):
    """The real engine (Drools) on the real rules: a firing reset alert asks once (the
    throttle drops the repeat) for that host and GPU; a resolved one, a reboot alert and
    another alert ask nothing; the stale-majors alert asks for reboot_verify."""
    binary = _rulebook_bin()
    if binary is None:
        pytest.skip("ansible-rulebook and java are not in this lane's venv")
    reset = {"alertname": "GpuhostGpuNeedsReset", "host": "pve-gpu01", "gpu": "0000:1b:00.0",
             "action": "reset"}
    payload = _webhook([
        ("firing", reset), ("firing", reset),
        ("resolved", dict(reset, host="pve-gpu02", gpu="0000:2a:00.0")),
        ("firing", {"alertname": "GpuhostGpuNeedsReboot", "host": "pve-gpu03",
                    "gpu": "0000:3d:00.0"}),
        ("firing", {"alertname": "GpuhostLxcStaleMajors", "host": "pve-gpu04",
                    "subject": "lxc 129"}),
        ("firing", {"alertname": "SomethingElse", "host": "pve-gpu05"})])
    (tmp_path / "payload.json").write_text(json.dumps(payload))
    book = _load(RULEBOOK)
    book[0]["sources"] = [{"name": "replay", "alertmanager_replay": {
        "payload": str(tmp_path / "payload.json"), "log": str(tmp_path / "events.jsonl")}}]
    for rule in book[0]["rules"]:
        (kind, args), = rule["action"].items()
        rule["action"] = {"debug": {"msg": "GPUHOST-ACTION %s %s" % (kind, json.dumps(args))}}
    (tmp_path / "book.yml").write_text(yaml.safe_dump(book))
    (tmp_path / "inventory.yml").write_text("all:\n  hosts:\n    pve-gpu01: {}\n")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    proc = subprocess.run(
        [binary, "--rulebook", "book.yml", "-i", "inventory.yml", "-S",
         os.path.join(REPO, "tests", "assets", "eda")],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    asked = [line.split(" ", 2)[1:] for line in proc.stdout.splitlines()
             if line.startswith("GPUHOST-ACTION ")]
    assert [(kind, json.loads(args)) for kind, args in asked] == [
        ("run_workflow_template",
         {"name": "gpuhost gpu_recover (approval)", "organization": "Default",
          "job_args": {"extra_vars": {"gpuhost_hosts": "pve-gpu01",
                                      "gpuhost_recover_gpus": ["0000:1b:00.0"],
                                      "gpuhost_recover_reboot": False}}}),
        ("run_playbook",
         {"name": "gpuhost.tuning.reboot_verify",
          "extra_vars": {"gpuhost_hosts": "pve-gpu04",
                         "gpuhost_reboot_verify_reboot": False,
                         "gpuhost_reboot_verify_kernel_upgrade": False}})]
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 6


AAP = os.path.join(EXT, "aap")


def _awx_options(module):
    """The options awx.awx's ``module`` documents (the collection ships with the test
    tools' ``ansible`` package), or None when it is not installed."""
    try:
        found = importlib.import_module("ansible_collections.awx.awx.plugins.modules." + module)
    except ImportError:
        return None
    return yaml.safe_load(found.DOCUMENTATION)["options"]


def test_the_approval_workflow_is_the_one_the_rulebook_launches_approval_first():
    (play,) = _load(os.path.join(AAP, "gpu_recover_workflow.yml"))
    tasks = dict((next(k for k in t if k.startswith("awx.awx.")), t) for t in play["tasks"])
    job = tasks["awx.awx.job_template"]["awx.awx.job_template"]
    flow = tasks["awx.awx.workflow_job_template"]["awx.awx.workflow_job_template"]
    rule = _rule(_load(RULEBOOK), "GpuhostGpuNeedsReset")
    assert flow["name"] == rule["action"]["run_workflow_template"]["name"]
    # the rulebook's extra vars reach the job: asked on launch by both
    assert flow["ask_variables_on_launch"] is True and job["ask_variables_on_launch"] is True
    assert job["extra_vars"] == {"gpuhost_recover_reboot": False}
    nodes = dict((n["identifier"], n) for n in flow["workflow_nodes"])
    first = [n for n in flow["workflow_nodes"]
             if not any(n["identifier"] in [s["identifier"] for s in
                                            (m.get("related") or {}).get("success_nodes", [])]
                        for m in flow["workflow_nodes"])]
    assert [n["unified_job_template"]["type"] for n in first] == ["workflow_approval"]
    (after,) = first[0]["related"]["success_nodes"]
    assert nodes[after["identifier"]]["unified_job_template"]["name"] == job["name"]
    assert "failure_nodes" not in first[0]["related"]       # denied or timed out: nothing runs
    (imported,) = _load(os.path.join(AAP, "project", job["playbook"]))
    assert imported["ansible.builtin.import_playbook"] == "gpuhost.tuning.gpu_recover"
    for module, args in (("job_template", job), ("workflow_job_template", flow)):
        options = _awx_options(module)
        if options is None and os.environ.get("GPUHOST_VENV_REQUIREMENTS"):
            pytest.skip("awx.awx is not in this lane's venv")
        assert options is not None, "awx.awx missing: requirements-test.txt's ansible has it"
        assert set(args) <= set(options), (module, set(args) - set(options))


PLAN_FLOW = os.path.join(AAP, "plan_apply_workflow.yml")


def _flow_tasks(path):
    """The play's tasks by module (awx.awx.job_template: a list, one per template)."""
    (play,) = _load(path)
    tasks = {}
    for task in play["tasks"]:
        module = next(k for k in task if k.startswith("awx.awx."))
        tasks.setdefault(module, []).append(task[module])
    return play, tasks


def _successors(node):
    return [s["identifier"] for s in (node.get("related") or {}).get("success_nodes", [])]


def test_the_plan_workflow_plans_then_a_person_approves_then_the_plan_is_applied():
    play, tasks = _flow_tasks(PLAN_FLOW)
    jobs = dict((job["name"], job) for job in tasks["awx.awx.job_template"])
    assert sorted(jobs) == ["gpuhost apply", "gpuhost plan"]
    (flow,) = tasks["awx.awx.workflow_job_template"]
    nodes = dict((n["identifier"], n) for n in flow["workflow_nodes"])
    children = [c for n in flow["workflow_nodes"] for c in _successors(n)]
    (first,) = [n for n in flow["workflow_nodes"] if n["identifier"] not in children]
    chain = [first]
    while _successors(chain[-1]):
        (after,) = _successors(chain[-1])
        chain.append(nodes[after])
    assert len(chain) == len(nodes) == 3
    kinds = [n["unified_job_template"]["type"] for n in chain]
    assert kinds == ["job_template", "workflow_approval", "job_template"]
    assert [chain[0]["unified_job_template"]["name"],
            chain[2]["unified_job_template"]["name"]] == ["gpuhost plan", "gpuhost apply"]
    for node in chain:  # a failed plan, a denial or a timeout: nothing after it runs
        assert set(node.get("related") or {}) <= {"success_nodes"}, node["identifier"]
    approval = chain[1]["unified_job_template"]
    assert "plan.md" in approval["description"] and "gpuhost_plan" in approval["description"]
    # the approval waits less than a plan may age before the apply refuses it
    max_age = _role_options("apply")["gpuhost_plan_max_age"]["default"]
    timeout = play["vars"]["gpuhost_aap_approval_timeout"]
    assert 0 < timeout < max_age * 3600
    assert flow["ask_variables_on_launch"] is True


def test_the_apply_job_gets_the_artifact_the_plan_role_sets_from_a_shared_folder():
    play, tasks = _flow_tasks(PLAN_FLOW)
    jobs = dict((job["name"], job) for job in tasks["awx.awx.job_template"])
    plan_tasks = _load(os.path.join(REPO, "roles", "plan", "tasks", "main.yml"))
    (stats,) = [t["ansible.builtin.set_stats"] for t in plan_tasks
                if "ansible.builtin.set_stats" in t]
    assert stats["per_host"] is False and list(stats["data"]) == ["gpuhost_plan"]
    assert "gpuhost_plan" in _role_options("apply")
    # plan writes the file, apply reads it: both jobs' containers see the same folder
    dirs = play["vars"]["__gpuhost_aap_dirs"]
    assert jobs["gpuhost plan"]["extra_vars"] == jobs["gpuhost apply"]["extra_vars"]
    assert jobs["gpuhost plan"]["extra_vars"] == "{{ __gpuhost_aap_dirs }}"
    assert sorted(dirs) == ["gpuhost_plan_dir", "gpuhost_report_dir"]
    for value in dirs.values():
        assert value.startswith("{{ gpuhost_aap_shared_dir }}/")
    assert "gpuhost_plan_dir" in _role_options("plan")
    assert "gpuhost_report_dir" in _role_options("tune")
    (expose,) = tasks["awx.awx.settings"]
    assert list(expose["settings"]) == ["AWX_ISOLATION_SHOW_PATHS"]
    assert "gpuhost_aap_shared_dir" in expose["settings"]["AWX_ISOLATION_SHOW_PATHS"]
    with open(PLAN_FLOW) as handle:
        text = handle.read()
    assert "Paths to expose to isolated jobs" in text and "pod_spec_override" in text
    with open(os.path.join(REPO, "README.md")) as handle:  # and the README says it too
        readme = handle.read()
    assert "extensions/aap/plan_apply_workflow.yml" in readme
    assert "AWX_ISOLATION_SHOW_PATHS" in readme and "pod_spec_override" in readme
    for name, playbook in (("gpuhost plan", "plan"), ("gpuhost apply", "apply")):
        job = jobs[name]
        assert job["job_type"] == "run" and job["ask_variables_on_launch"] is True
        (imported,) = _load(os.path.join(AAP, "project", job["playbook"]))
        assert imported["ansible.builtin.import_playbook"] == "gpuhost.tuning." + playbook
        assert os.path.isfile(os.path.join(REPO, "playbooks", playbook + ".yml"))


def test_the_plan_workflow_gives_the_awx_modules_only_options_they_document():
    _play, tasks = _flow_tasks(PLAN_FLOW)
    for module, calls in tasks.items():
        options = _awx_options(module.split(".")[-1])
        if options is None and os.environ.get("GPUHOST_VENV_REQUIREMENTS"):
            pytest.skip("awx.awx is not in this lane's venv")
        assert options is not None, "awx.awx missing: requirements-test.txt's ansible has it"
        for args in calls:
            assert set(args) <= set(options), (module, set(args) - set(options))
    (flow,) = tasks["awx.awx.workflow_job_template"]
    node_options = _awx_options("workflow_job_template")["workflow_nodes"]["suboptions"]
    for node in flow["workflow_nodes"]:
        assert set(node) <= set(node_options), set(node) - set(node_options)
        template = node_options["unified_job_template"]["suboptions"]
        assert set(node["unified_job_template"]) <= set(template), node["identifier"]
