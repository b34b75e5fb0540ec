"""One ``wanted``: one spec (facts.wanted_spec), one doc fragment, composed once in role common
(``__gpuhost_wanted``) and passed whole by every caller, role task or module.

Each test here fails on the way things were before option ``wanted``: role audit's timer
passed 10 of the keys, reboot_verify 12, tune's verifying audit (tune.Context.audit) 7.
"""

import glob
import os

import yaml
from conftest import REPO
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.doc_fragments import wanted as wanted_doc
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_timer
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    post_boot_verify as verify,
)

KEYS = set(facts.WANTED_KEYS)
# The modules taking option wanted, and the per-key options (deprecated) of each.
TAKERS = {
    # added with option wanted, or since: option wanted's only
    "host_audit": set(facts.WANTED_KEYS) - {"thermal_margin_min_c", "ceiling_spread_pct",
                                            "ceiling_min_pct"},
    "host_tune": set(tune.PER_KEY),
    "post_boot_verify": {"boot_params", "cpufreq_drivers_wanted", "cpuidle_deeper_than",
                         "mrrs_size"},
    "audit_timer": set(),
}
WHOLE = "{{ __gpuhost_wanted }}"


def _yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def test_the_doc_fragment_documents_the_spec_key_by_key():
    doc = yaml.safe_load(wanted_doc.ModuleDocFragment.DOCUMENTATION)["options"]["wanted"]
    subs = doc["suboptions"]
    spec = facts.wanted_spec()
    assert set(subs) == set(spec)
    for key, option in spec.items():
        documented = subs[key]
        for field in ("type", "default", "choices", "elements"):
            assert documented.get(field) == option.get(field), (key, field)
    assert facts.wanted_option()["options"] == spec and doc["type"] == "dict"
    assert doc["default"] == facts.wanted_option()["default"]


def test_role_common_composes_every_wanted_value_once():
    composed = _yaml(os.path.join(REPO, "roles/common/vars/main.yml"))["__gpuhost_wanted"]
    assert set(composed) == KEYS
    # and the fixture's copy is read from it (what the unit tests pass is what roles pass)
    assert set(hosts.common_wanted("gpu01")) == KEYS - {"gpu_count"}


def _tasks(node):
    """Every task mapping under a task list (blocks included)."""
    for item in node or []:
        if not isinstance(item, dict):
            continue
        for key in ("block", "rescue", "always"):
            if key in item:
                yield from _tasks(item[key])
        yield item


def _all_calls():
    """``(file, module, args)`` of every task of the roles and playbooks that calls a module
    of the collection."""
    found = []
    files = glob.glob(os.path.join(REPO, "roles/*/tasks/*.yml")) + \
        glob.glob(os.path.join(REPO, "playbooks/*.yml"))
    for path in sorted(files):
        data = _yaml(path) or []
        if path.startswith(os.path.join(REPO, "playbooks")):
            data = [t for play in data if isinstance(play, dict)
                    for t in (play.get("tasks") or []) + (play.get("pre_tasks") or [])
                    + (play.get("post_tasks") or [])]
        for task in _tasks(data):
            for key, args in task.items():
                if key.startswith("gpuhost.tuning."):
                    found.append((os.path.relpath(path, REPO), key.split(".")[-1], args))
    return found


def _calls():
    """The calls of ``_all_calls`` to a module taking wanted."""
    return [call for call in _all_calls() if call[1] in TAKERS]


def templated_args(calls):
    """The calls whose args are one template (ansible-core warns: "Using a template for task
    args is unsafe"): each option is to be named."""
    return ["%s: %s gets its args as one template %s" % (path, module, args)
            for path, module, args in calls if not isinstance(args, dict)]


def problems(calls):
    """What is wrong with each call: args one template, wanted not passed whole, or a
    per-key option given."""
    out = templated_args(calls)
    for path, module, args in calls:
        if not isinstance(args, dict):
            continue
        if args.get("wanted") != WHOLE:
            out.append("%s: %s gets wanted %r, not %s"
                       % (path, module, args.get("wanted"), WHOLE))
        if TAKERS[module] & set(args):
            out.append("%s: %s gets per-key options %s" % (
                path, module, ", ".join(sorted(TAKERS[module] & set(args)))))
    return out


def test_every_role_and_playbook_task_passes_wanted_whole_and_no_per_key_option():
    calls = _calls()
    # role audit (audit, timer), tune, reboot_verify (preflight, reboot, verify: the audit
    # and post_boot_verify)
    assert {m for _f, m, _a in calls} == set(TAKERS), calls
    assert problems(calls) == []


def test_no_task_passes_a_module_its_args_as_one_template():
    assert templated_args(_all_calls()) == []


def test_the_template_check_fails_on_reboot_verifys_audits_as_they_were():
    """reboot_verify's three host_audit tasks took ``__gpuhost_reboot_verify_audit_args``."""
    old = "{{ __gpuhost_reboot_verify_audit_args }}"
    found = problems([("tasks/%s.yml" % name, "host_audit", old)
                      for name in ("preflight", "reboot", "verify")])
    assert len(found) == 3 and all("one template" in line for line in found), found


def test_the_subset_check_fails_on_the_tasks_as_they_were():
    """Role audit's timer task and reboot_verify's verify task before option wanted."""
    timer = {"host": "{{ inventory_hostname }}", "wanted": {
        "gpu_vendor": "{{ gpuhost_gpu_vendor }}", "mrrs_size": "{{ gpuhost_mrrs_size }}",
        "sysctl": "{{ gpuhost_sysctl }}"}}
    verify_task = {"audit": "{{ post.audit }}", "boot_params": "{{ gpuhost_boot_params }}",
                   "mrrs_size": "{{ gpuhost_mrrs_size }}"}
    found = problems([("after_report.yml", "audit_timer", timer),
                      ("verify.yml", "post_boot_verify", verify_task)])
    assert len(found) == 3 and "per-key options boot_params, mrrs_size" in found[2]


def _recording(monkeypatch, module):
    seen = []
    real = module.audit.audit

    def audit(root, wanted=None, **kwargs):
        seen.append(set(k for k, v in (wanted or {}).items() if v is not None))
        return real(root, wanted, **kwargs)
    monkeypatch.setattr(module.audit, "audit", audit)
    return seen


def test_tunes_audits_before_and_after_take_every_wanted_value(tmp_path, monkeypatch):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    seen = _recording(monkeypatch, tune)
    wanted = dict(hosts.common_wanted("gpu01"), gpu_count=8)
    result = tune.tune_run({"root": root, "wanted": wanted,
                            "parts": ["sysctl", "cpuidle", "verify"]})
    assert result["audit_again"] is True and len(seen) == 2
    for keys in seen:
        assert keys == KEYS, KEYS - keys


def test_tunes_wanted_values_are_typed_from_option_wanted(tmp_path):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    ctx = tune.Context(tune._params({"root": root, "wanted": {"mrrs_size": "2048"},
                                     "parts": ["verify"]}), True, None, None)
    assert ctx.wanted["mrrs_size"] == 2048 and ctx.params["mrrs_size"] == 2048
    assert set(ctx.wanted) == KEYS


def test_the_scheduled_audit_takes_every_wanted_value(tmp_path, monkeypatch):
    root = str(tmp_path / "host")
    hosts.seed_host(root)
    os.makedirs(root + "/var/lib/prometheus/node-exporter")
    result = audit_timer.timer_run({"root": root, "host": "gpu01", "wanted": dict(
        hosts.common_wanted("gpu01"), xid_window_days=3, gpu_count=8),
        "textfile": "/var/lib/prometheus/node-exporter/gpuhost_audit.prom"}, runner=None)
    assert set(result["config"]["wanted"]) == KEYS
    assert result["config"]["wanted"]["xid_window_days"] == 3
    seen = _recording(monkeypatch, audit_program)
    audit_program.run(root, audit_program.load_config(root + audit_program.CONFIG_PATH))
    assert seen == [KEYS]


def test_post_boot_verify_judges_the_wanted_values_given_whole(monkeypatch):
    from modrun import run_module

    from ansible_collections.gpuhost.tuning.plugins.modules import post_boot_verify

    seen = {}

    def judged(params, runner=None):
        seen.update(params)
        return {"changed": False, "checks": [], "lines": [], "failures": [], "running": {}}
    monkeypatch.setattr(verify, "post_boot_run", judged)
    run_module(post_boot_verify, {"wanted": {"mrrs_size": 1024}, "systemctl": False})
    assert seen["mrrs_size"] == 1024 and KEYS <= set(seen)
    assert seen["wanted"]["mrrs_size"] == 1024


def test_a_per_key_option_still_works_and_is_deprecated(tmp_path):
    from modrun import run_module

    from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

    root = str(tmp_path / "host")
    hosts.seed_host(root)
    old = run_module(host_audit, {"root": root, "mrrs_size": 512}, allow_deprecations=True)
    new = run_module(host_audit, {"root": root, "wanted": {"mrrs_size": 512}})
    assert [f for f in old["audit"]["findings"] if f["id"] == "pcie_mrrs"] == \
        [f for f in new["audit"]["findings"] if f["id"] == "pcie_mrrs"] == []
    assert "mrrs_size" in str(old["deprecations"]) and not new.get("deprecations")


def test_no_tune_part_declares_a_wanted_value_as_its_own_option():
    """A wanted value has one spec (facts.wanted_spec): before, the snapshot and numa_pin
    parts declared lxc_config_dir again."""
    options = set(name for part in tune.REGISTRY for name in part.options)
    assert not options & KEYS, sorted(options & KEYS)


def test_a_run_in_the_process_leaves_host_tunes_spec_as_it_was():
    """Ansible's validator fills a dict option's default in place: host_tune's spec was one
    module-level dict, so the first run's wanted defaults became option wanted's default
    (the ansible-doc test of host_tune failed after another test's run in its worker)."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec

    argspec.fill(tune.argument_spec(), {"root": "/nonexistent"})
    assert tune.argument_spec()["wanted"]["default"] == {}
    assert tune.COMMON_OPTIONS["wanted"]["default"] == {}
