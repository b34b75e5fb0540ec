# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Module apply_report, run in the controller's process: the controller's side of
playbooks/apply.yml (load the plan, check a host against it, write the apply report)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import apply_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
    check,
)

# the collection this plugin belongs to (its MANIFEST.json or galaxy.yml says the version)
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _batches(doc, targets):
    """The plan's rollout batches as host lists, each cut to ``targets`` (empty ones
    dropped), then any target the batches do not name as one more batch."""
    named, out = set(), []
    for batch in doc.get("batches") or []:
        hosts = batch.get("hosts") if isinstance(batch, dict) else batch
        if not isinstance(hosts, list):
            return None
        kept = [h for h in hosts if h in targets and h not in named]
        named.update(kept)
        if kept:
            out.append(kept)
    rest = [h for h in targets if h not in named]
    if rest:
        out.append(rest)
    return out


def step_load(params, groups):
    """Step load: the plan read and checked whole (digest, schema, version, age), and what
    the apply play targets: the plan's hosts of the inventory pattern, less those left out
    by name or group, in the plan's batch order."""
    path = params["plan"]
    if not os.path.isfile(path):
        raise AnsibleActionFail("apply: no plan file %s (gpuhost_plan: the path of a "
                                "plan-<digest12>.json that gpuhost.tuning.plan wrote); "
                                "nothing was changed" % path)
    try:
        doc = planfile.load(path)
    except (IOError, OSError) as exc:
        raise AnsibleActionFail("apply: cannot read the plan %s (gpuhost_plan): %s; nothing "
                                "was changed" % (path, exc))
    except ValueError as exc:
        raise AnsibleActionFail("apply: refused: %s (%s); no host was touched"
                                % (exc, path))
    named = re.match(r"^plan-([0-9a-f]{12})\.json$", os.path.basename(path))
    if named and not str(doc.get("digest") or "").startswith(named.group(1)):
        raise AnsibleActionFail("apply: refused: the plan file's name says digest %s, its "
                                "content is plan %s (%s); no host was touched"
                                % (named.group(1), doc.get("digest"), path))
    whole = apply_check.check_plan(doc, time.time(), params["max_age"] * 3600.0,
                                   planfile.collection_version(COLLECTION_ROOT))
    if whole:
        raise AnsibleActionFail("apply: refused: %s (%s); no host was touched" % (whole, path))
    planned = doc.get("hosts") or {}
    inventory = list(params["inventory"])
    skip = set()
    for name in params["skip"]:
        skip.update(groups.get(name) or [name])
    skipped = {}
    for host in sorted(planned):
        if host in skip:
            skipped[host] = "left out by gpuhost_plan_skip"
        elif host not in inventory:
            skipped[host] = "not in the inventory pattern of this run (gpuhost_hosts)"
    targets = [h for h in inventory if h in planned and h not in skipped]
    batches = _batches(doc, set(targets))
    if batches is None:   # batches of sizes only: the inventory's order
        batches = [targets] if targets else []
    order = [h for batch in batches for h in batch]
    return dict(
        changed=False, digest=doc.get("digest"), path=path, hosts=order,
        serial=[len(b) for b in batches] or [1],
        skipped=skipped, not_in_plan=[h for h in inventory if h not in planned],
        plan=dict((h, planned[h]) for h in planned),
        meta=dict((k, doc.get(k)) for k in ("digest", "collection_version", "created_at",
                                            "created_by", "schema")),
        msg="plan %s (%s): %d host(s) to apply, %d left out, %d inventory host(s) not in "
            "the plan" % ((doc.get("digest") or "?")[:12], path, len(order), len(skipped),
                          len([h for h in inventory if h not in planned])))


def _plan_doc(loaded):
    doc = dict(loaded.get("meta") or {})
    doc["hosts"] = loaded.get("plan") or {}
    return doc


def _loaded(task_vars, plan_var):
    loaded = task_vars["hostvars"].raw_get("localhost").get(plan_var)
    if not isinstance(loaded, dict) or "plan" not in loaded:
        raise AnsibleActionFail("apply_report: no loaded plan in localhost's %s (run step "
                                "load first)" % plan_var)
    return loaded


def step_check(params, task_vars):
    """Step check, for the host it runs on: ``refused`` None or the refusal text
    (``apply_check.check_host``; without ``result_var``, only what the plan itself says:
    ``apply_check.check_planned``)."""
    host = task_vars["inventory_hostname"]
    doc = _plan_doc(_loaded(task_vars, params["plan_var"]))
    args = (time.time(), params["max_age"] * 3600.0,
            planfile.collection_version(COLLECTION_ROOT))
    idle = False
    if params["result_var"]:
        now = task_vars.get(params["result_var"])
        refused = apply_check.check_host(doc, host, now, *args)
        idle = refused is None and apply_check.nothing_to_do(now)
    else:
        refused = apply_check.check_planned(doc, host, *args)
    entry = (doc.get("hosts") or {}).get(host) or {}
    return dict(changed=False, refused=refused, nothing_to_do=idle, host=host,
                planned=entry.get("changes") or [],
                msg=refused or ("%s: %s" % (host, apply_check.NOTHING_TO_DO) if idle
                                else "%s: the plan holds" % host))


def step_write(params, task_vars, check_mode):
    """Step write: ``apply-<digest12>.json`` and ``.md`` in ``dest``."""
    loaded = _loaded(task_vars, params["plan_var"])
    doc = _plan_doc(loaded)
    raw_get = task_vars["hostvars"].raw_get
    results = {}
    for host, reason in (loaded.get("skipped") or {}).items():
        results[host] = {"status": "skipped", "reason": reason}
    for host in params["hosts"]:
        record = raw_get(host).get(params["status_var"]) if host in doc["hosts"] else None
        if isinstance(record, dict):
            record = dict(record)
            if params["result_var"] and record.get("status") != "refused":
                record["tune"] = raw_get(host).get(params["result_var"])
            results[host] = record
    rep = apply_check.report(doc, results, loaded.get("not_in_plan") or [],
                             generated_at=files.now(),
                             check_mode=bool(task_vars.get("ansible_check_mode")))
    base = "apply-%s" % (doc.get("digest") or "unknown")[:12]
    text = apply_check.json_text(rep)
    try:
        paths, written = files.write_reports(
            "apply_report", params["dest"],
            {base + ".json": text, base + ".md": apply_check.markdown(rep)},
            check_mode, "gpuhost_report_dir")
    except files.ReportError as exc:
        raise AnsibleActionFail(str(exc))
    return dict(changed=bool(written), files=paths, written=written, counts=rep["counts"],
                finished=rep["finished"], lines=apply_check.lines(rep))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        unused, params = self.validate_argument_spec(argument_spec=apply_check.options(),
                                                     **apply_check.RULES)
        try:
            check(apply_check.rules, params)
        except ValidationError as exc:
            raise AnsibleActionFail("apply_report: %s (nothing was read or written)" % exc)
        if params["step"] == "load":
            result.update(step_load(params, task_vars.get("groups") or {}))
        elif params["step"] == "check":
            result.update(step_check(params, task_vars))
        else:
            result.update(step_write(params, task_vars, self._task.check_mode))
        return result
