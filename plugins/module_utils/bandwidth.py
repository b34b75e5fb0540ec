# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``bandwidth`` tune part (module host_tune): pinned host-to-device and device-to-host
copy rates of every GPU, measured with the CUDA probe (``cuda.py``) before the tune parts
change the host and again after them, so the tune report shows what the tuning bought:
per GPU and direction ``before -> after`` in GB/s with the share of the GPU's link.

Off unless asked (host_tune's ``parts``; role ``gpuhost_tune_bandwidth``): every copy takes
``bandwidth_size_mb`` MiB of each GPU's memory for a moment. It changes nothing. Live host
only: under another root, without the CUDA driver library, and in check mode it measures
nothing and says why in its row. A lower rate after tuning is reported (row ``lower`` and a
warning), never a failure; a CUDA error (``cuInit`` or a copy failing) is the part's failure,
naming the code, its name and the usual cause.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils import validate

NAME = "bandwidth"
# A change within this share of the rate before is noise ("same").
SAME_PCT = 2.0
DIRECTIONS = (("h2d", "host->GPU"), ("d2h", "GPU->host"))

OPTIONS = dict(
    bandwidth_size_mb=dict(type="int", default=256),
    bandwidth_repeats=dict(type="int", default=5),
    bandwidth_timeout=dict(type="int", default=cuda.DEFAULT_TIMEOUT),
    cuda_library=dict(type="str", default=cuda.DEFAULT_LIBRARY),
)


def is_live(root):
    """True when ``root`` is the running host (its GPUs can be measured)."""
    return (root or "/").rstrip("/") == ""


def check_options(params):
    """Error text for options the probe cannot use, or None (host_tune refuses them before
    the pass starts; this covers ``tune.tune_run`` called directly)."""
    try:
        validate.bandwidth_options(params)
    except validate.ValidationError as exc:
        return str(exc)
    return None


def measure(params, runner):
    """One probe run with copies, as the part's options say, in a child process bounded by
    ``bandwidth_timeout`` plus the copies' share (``cuda.time_limit``); never raises."""
    return cuda.probe_host(runner, library=params["cuda_library"] or cuda.DEFAULT_LIBRARY,
                           bandwidth=True, size_mb=params["bandwidth_size_mb"],
                           repeats=params["bandwidth_repeats"], root=params["root"],
                           timeout=params.get("bandwidth_timeout") or cuda.DEFAULT_TIMEOUT)


def library_missing(result):
    """True when the probe could not load the driver library at all (no NVIDIA driver); a
    probe that hung or crashed before cuInit answered is a failure, not this."""
    return bool(result and result.get("error") and result.get("init") is None
                and not result.get("timed_out") and not result.get("signal"))


def cell(dev, direction):
    """``55.3 GB/s (87.8 % of link)``; None when that copy was not measured."""
    gbs = (dev or {}).get(direction + "_gbs")
    if gbs is None:
        return None
    pct = dev.get(direction + "_pct")
    return "%.1f GB/s (%s)" % (gbs, "%.1f %% of link" % pct if pct is not None
                               else "link unknown")


def _why_not(dev):
    """Why a GPU has no rate: its skip reason or its error."""
    if dev is None:
        return "not found"
    if dev.get("skipped"):
        return dev["skipped"]
    err = dev.get("error")
    if err:
        return "%s returned %s %s" % (err.get("step"), err.get("code"), err.get("name"))
    return "not measured"


def _link_note(dev):
    name = dev.get("name") or "GPU"
    if dev.get("link") and dev.get("link_gbs"):
        return "%s, %s: %.1f GB/s per direction" % (name, dev["link"], dev["link_gbs"])
    return "%s, link speed not readable" % name


def compare(before_gbs, after_gbs):
    """``(status, "+12.3 %")`` for a rate before and after."""
    if not before_gbs:
        return "measured", ""
    change = 100.0 * (after_gbs - before_gbs) / before_gbs
    if abs(change) <= SAME_PCT:
        status = "same"
    else:
        status = "higher" if change > 0 else "lower"
    return status, "%+.1f %%" % change


def rows(before, after):
    """``(item, before, after, status, note)`` per GPU and direction, and the drops
    (``item before -> after``) for the warnings."""
    out, drops = [], []
    old = dict((d["pci_bus_id"], d) for d in before.get("devices") or [] if d["pci_bus_id"])
    new = dict((d["pci_bus_id"], d) for d in after.get("devices") or [] if d["pci_bus_id"])
    order = [d["pci_bus_id"] for d in (after.get("devices") or []) if d["pci_bus_id"]]
    order += [bdf for bdf in old if bdf not in new]
    for bdf in order:
        b, a = old.get(bdf), new.get(bdf)
        note = _link_note(a or b)
        for direction, label in DIRECTIONS:
            item = "%s %s" % (bdf, label)
            bg = (b or {}).get(direction + "_gbs")
            ag = (a or {}).get(direction + "_gbs")
            if bg is None and ag is None:
                out.append((item, None, None, "skipped",
                            "%s; %s" % (_why_not(a or b), note)))
                continue
            if ag is None:
                out.append((item, cell(b, direction), None, "skipped",
                            "after: %s; %s" % (_why_not(a), note)))
                continue
            if bg is None:
                out.append((item, None, cell(a, direction), "measured",
                            "before: %s; %s" % (_why_not(b), note)))
                continue
            status, change = compare(bg, ag)
            out.append((item, cell(b, direction), cell(a, direction), status,
                        "%s; %s" % (change, note)))
            if status == "lower":
                drops.append("%s %.1f -> %.1f GB/s (%s)" % (item, bg, ag, change))
    return out, drops


class BandwidthBefore(object):
    """Measure before the tune parts change the host; the after object reads it from the
    context. Fails (stopping the pass before any change) only on unusable options."""

    name = NAME
    owns = ()
    steps = ("bandwidth_before",)
    stage = "before"
    options = OPTIONS
    default_on = False

    def run(self, ctx):
        ctx.bandwidth_before = None
        problem = check_options(ctx.params)
        if problem:
            return {"failures": ["bandwidth_before: %s" % problem],
                    "rows": [("bandwidth", None, None, "failed", problem)]}
        if not is_live(ctx.root) or ctx.check_mode:
            return {}
        ctx.bandwidth_before = measure(ctx.params, ctx.runner)
        return {"detail": {"bandwidth_before": ctx.bandwidth_before}}

    def not_run(self, ctx, status):
        return {}


class BandwidthAfter(object):
    """Measure again after the tune parts; rows before -> after per GPU and direction."""

    name = NAME
    owns = ()
    steps = ("bandwidth_after",)
    stage = "after"
    options = OPTIONS
    default_on = False

    def run(self, ctx):
        if not is_live(ctx.root):
            return {"rows": [("bandwidth", None, None, "skipped",
                              "root %s is not the live host: no GPU to measure there"
                              % ctx.root)]}
        if ctx.check_mode:
            return {"rows": [("bandwidth", None, None, "not measured",
                              "check mode: no copies (each takes %d MiB of every GPU's "
                              "memory)" % ctx.params["bandwidth_size_mb"])]}
        before = getattr(ctx, "bandwidth_before", None)
        if before is None:
            return {}
        if library_missing(before):
            return {"rows": [("bandwidth", None, None, "skipped", before["error"])]}
        after = measure(ctx.params, ctx.runner)
        out = {"detail": {"bandwidth_after": after}, "failures": [], "rows": []}
        for when, result, step in (("before", before, "bandwidth_before"),
                                   ("after", after, "bandwidth_after")):
            msg = cuda.failure_message(result)
            if msg:
                out["failures"].append("%s: %s" % (step, msg))
                out["rows"].append(("bandwidth %s tuning" % when, None, None, "failed", msg))
        table, drops = rows(before, after)
        out["rows"].extend(table)
        if drops and ctx.warn:
            ctx.warn("bandwidth: lower after tuning: %s" % "; ".join(drops))
        return out

    def not_run(self, ctx, status):
        if status == "off":
            return {}
        return {"rows": [("bandwidth", None, None, status, "")]}


BEFORE_PART = BandwidthBefore()
AFTER_PART = BandwidthAfter()
