# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpuhost.tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark-only aggregate callback (not part of the collection).

Counts task executions per host (ok, changed, skipped, failed, unreachable; a looped task
counts once, as in the recap, and its items are counted apart as module round trips) and
times every task from its start to its last host result, then writes JSON to
$GPUHOST_BENCH_STATS. bench/run.sh enables it (ANSIBLE_CALLBACK_PLUGINS, ANSIBLE_CALLBACKS_ENABLED).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: bench_stats
    type: aggregate
    short_description: task executions per host and per-task wall time, as JSON
    description: Writes a JSON file named by GPUHOST_BENCH_STATS when the run ends.
    requirements: [enabled in callbacks_enabled]
"""


# Actions that never reach a host (action plugins without a module round trip).
CONTROLLER_ONLY = {"set_fact", "debug", "fail", "assert", "validate_argument_spec", "meta",
                   "include_tasks", "include_role", "include_vars", "add_host", "group_by",
                   "set_stats", "pause"}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_stats"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._t0 = time.monotonic()
        self._hosts = {}
        self._tasks = []
        self._current = None

    def _task_start(self, task):
        now = time.monotonic()
        action = task.action
        if action.rsplit(".", 1)[-1] in CONTROLLER_ONLY:
            where = "controller"
        elif task.delegate_to:
            where = "delegated"
        else:
            where = "host"
        self._current = {
            "name": task.get_name(),
            "action": action,
            "where": where,
            "run_once": bool(task.run_once),
            "start": round(now - self._t0, 4),
            "end": round(now - self._t0, 4),
            "results": 0,
            "skipped": 0,
        }
        self._tasks.append(self._current)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task)

    def _counts(self, result):
        return self._hosts.setdefault(result.host.get_name(), {
            "ok": 0, "changed": 0, "skipped": 0, "failed": 0, "unreachable": 0, "items": 0})

    def _count(self, result, status):
        counts = self._counts(result)
        counts[status] += 1
        if status == "ok" and result.result.get("changed", False):
            counts["changed"] += 1
        if self._current is None:  # ad-hoc runs have no task start event
            self._task_start(result.task)
        self._current["end"] = round(time.monotonic() - self._t0, 4)
        self._current["results"] += 1
        if status == "skipped":
            self._current["skipped"] += 1

    def v2_runner_on_ok(self, result):
        self._count(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")

    def _item(self, result):
        counts = self._counts(result)
        counts["items"] += 1

    def v2_runner_item_on_ok(self, result):
        self._item(result)

    def v2_runner_item_on_failed(self, result):
        self._item(result)

    def v2_runner_item_on_skipped(self, result):
        self._item(result)

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("GPUHOST_BENCH_STATS")
        if not path:
            return
        for task in self._tasks:
            task["seconds"] = round(task["end"] - task["start"], 4)
        data = {
            "seconds": round(time.monotonic() - self._t0, 4),
            "hosts": self._hosts,
            "tasks": self._tasks,
        }
        with open(path, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
