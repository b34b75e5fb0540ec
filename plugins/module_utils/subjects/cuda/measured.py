# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tune part that measures and changes nothing (``bandwidth``, ``latency``): one object
before the tune parts change the host and one after them, which makes the rows.

A measurement is a module-level object with ``name``, ``options`` (its host_tune options,
each declared once: spec, ``description``, ``role_var``, as ``engines/tune/tune_registry.py``
says), ``rules(params)`` (raises validate.ValidationError on a value the probe cannot use;
host_tune runs it before the pass, the before object again for a direct call),
``measure(params, runner)`` (a CUDA probe result; never raises), ``rows(before, after, ctx)``
(``(rows, worse)``: the before -> after rows and the items that got worse, for the warning),
``check_mode_note(params)``, ``worse`` (how the warning says it: ``lower``, ``slower``) and
``role_doc`` (its role switch's description). ``parts(measurement)`` gives the
two registry objects. Off by default; live host only: under another root and in check mode
nothing is measured and the after object's row says why; without the driver library it is
skipped; a CUDA failure (a hang and a crash included) fails the part naming the code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate


def is_live(root):
    """True when ``root`` is the running host (its GPUs can be measured)."""
    return (root or "/").rstrip("/") == ""


def library_missing(result):
    """True when the probe could not load the driver library at all (no NVIDIA driver); a
    probe that hung or crashed before cuInit answered is a failure, not this."""
    return bool(result and result.get("error") and result.get("init") is None
                and not result.get("timed_out") and not result.get("signal"))


def check(measurement, params):
    """Error text for option values ``measurement`` cannot use, or None."""
    try:
        measurement.rules(params)
    except validate.ValidationError as exc:
        return str(exc)
    return None


class MeasureBefore(object):
    """Measure before the tune parts; the after object reads it from the context. Fails
    (stopping the pass before any change) only on unusable options."""

    stage = "before"
    owns = ()
    default_on = False

    def __init__(self, measurement):
        self.m = measurement
        self.name = measurement.name
        self.role_doc = measurement.role_doc
        self.options = measurement.options
        self.rules = measurement.rules
        self.steps = (self.name + "_before",)

    def run(self, ctx):
        setattr(ctx, self.steps[0], None)
        problem = check(self.m, ctx.params)
        if problem:
            return {"failures": ["%s: %s" % (self.steps[0], problem)],
                    "rows": [(self.name, None, None, "failed", problem)]}
        if not is_live(ctx.root) or ctx.check_mode:
            return {}
        result = self.m.measure(ctx.params, ctx.runner)
        setattr(ctx, self.steps[0], result)
        return {"detail": {self.steps[0]: result}}

    def not_run(self, ctx, status):
        return {}


class MeasureAfter(object):
    """Measure again after the tune parts; the rows before -> after."""

    stage = "after"
    owns = ()
    default_on = False

    def __init__(self, measurement):
        self.m = measurement
        self.name = measurement.name
        self.role_doc = measurement.role_doc
        self.options = measurement.options
        self.rules = measurement.rules
        self.steps = (self.name + "_after",)

    def run(self, ctx):
        name = self.name
        if not is_live(ctx.root):
            return {"rows": [(name, None, None, "skipped",
                              "root %s is not the live host: no GPU to measure there"
                              % ctx.root)]}
        if ctx.check_mode:
            return {"rows": [(name, None, None, "not measured",
                              self.m.check_mode_note(ctx.params))]}
        before = getattr(ctx, name + "_before", None)
        if before is None:
            return {}
        if library_missing(before):
            return {"rows": [(name, None, None, "skipped", before["error"])]}
        after = self.m.measure(ctx.params, ctx.runner)
        out = {"detail": {self.steps[0]: after}, "failures": [], "rows": []}
        for when, result in (("before", before), ("after", after)):
            msg = cuda.failure_message(result)
            if msg:
                out["failures"].append("%s_%s: %s" % (name, when, msg))
                out["rows"].append(("%s %s tuning" % (name, when), None, None, "failed", msg))
        table, worse = self.m.rows(before, after, ctx)
        out["rows"].extend(table)
        if worse and ctx.warn:
            ctx.warn("%s: %s after tuning: %s" % (name, self.m.worse, "; ".join(worse)))
        return out

    def not_run(self, ctx, status):
        if status == "off":
            return {}
        return {"rows": [(self.name, None, None, status, "")]}


def parts(measurement):
    """The ``(before, after)`` registry objects of ``measurement``."""
    return MeasureBefore(measurement), MeasureAfter(measurement)
