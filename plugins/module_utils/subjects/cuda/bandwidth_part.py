# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``bandwidth`` tune part (module host_tune): pinned host-to-device and device-to-host
copy rates of every GPU, measured with the CUDA probe (``subjects/cuda/cuda.py``) before the tune
parts
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

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import measured
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate

NAME = "bandwidth"
# A change within this share of the rate before is noise ("same").
SAME_PCT = 2.0
DIRECTIONS = (("h2d", "host->GPU"), ("d2h", "GPU->host"))

# The part's options, each declared once: host_tune's argument spec, the description
# host_tune's DOCUMENTATION and role tune show, and the role's variable (``role_var``; none:
# the role does not pass it). scripts/role-specs.py writes host_tune's DOCUMENTATION and role
# tune's defaults, argument spec and host_tune call from these (engines/tune/tune_registry.py).
OPTIONS = dict(
    bandwidth_size_mb=dict(
        type="int", default=256, role_var="gpuhost_tune_bandwidth_size_mb",
        description="Size of each copy of the C(bandwidth) part, in MiB (1 to 65536); each GPU "
                    "needs this much free memory plus 64 MiB, or it is skipped with the "
                    "reason."),
    bandwidth_repeats=dict(
        type="int", default=5, role_var="gpuhost_tune_bandwidth_repeats",
        description="Copies per direction of the C(bandwidth) part (1 to 1000); the best "
                    "counts."),
    bandwidth_timeout=dict(
        type="int", default=cuda.DEFAULT_TIMEOUT, role_var="gpuhost_tune_bandwidth_timeout",
        description="Seconds each measurement of the C(bandwidth) part may take to initialise "
                    "CUDA and list the GPUs (1 to 3600); the copies get the time they take at "
                    "1 GB/s on top. The measurement runs in a child process, killed at its "
                    "limit; one that did not return (or that a signal killed) fails the part "
                    "naming the limit and the step."),
    cuda_library=dict(
        type="str", default=cuda.DEFAULT_LIBRARY,
        description="The CUDA driver library the C(bandwidth) and C(latency) parts load (a "
                    "name on the library path or a file path)."),
)


def library(option, value):
    """The driver library option: a name or a path, never empty (the probe would load the
    running program)."""
    if not value:
        validate.fail(option, value, "a library name like libcuda.so.1 or a path")


def rules(p):
    """The option values the probe can use (host_tune's rules and the part before it
    measures, for ``tune.tune_run`` called directly); raises validate.ValidationError."""
    validate.int_range("bandwidth_size_mb", p.get("bandwidth_size_mb"), 1, 65536)
    validate.int_range("bandwidth_repeats", p.get("bandwidth_repeats"), 1, 1000)
    validate.int_range("bandwidth_timeout", p.get("bandwidth_timeout"), 1, 3600)
    if "cuda_library" in p:
        library("cuda_library", p["cuda_library"])


def measure(params, runner):
    """One probe run with copies, as the part's options say, in a child process bounded by
    ``bandwidth_timeout`` plus the copies' share (``cuda.time_limit``); never raises."""
    return cuda.probe_host(runner, library=params["cuda_library"] or cuda.DEFAULT_LIBRARY,
                           bandwidth=True, size_mb=params["bandwidth_size_mb"],
                           repeats=params["bandwidth_repeats"], root=params["root"],
                           timeout=params.get("bandwidth_timeout") or cuda.DEFAULT_TIMEOUT)


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


def check_mode_note(params):
    return ("check mode: no copies (each takes %d MiB of every GPU's memory)"
            % params["bandwidth_size_mb"])


def _rows(before, after, _ctx):
    return rows(before, after)


class _Measurement(object):
    """The part's measurement for ``measured.parts``."""

    name = NAME
    options = OPTIONS
    worse = "lower"
    role_doc = [
        "Measure pinned host-to-GPU and GPU-to-host copy rates of every GPU before the "
        "changes and after them (tag C(tune_bandwidth)); the report shows per GPU "
        "C(before -> after) in GB/s with the share of its PCIe link. A lower rate is "
        "reported and warned about, not a failure; a CUDA error fails the host.",
        "Live host only (gpuhost_root C(/)); elsewhere, without the NVIDIA driver library "
        "and in check mode it is reported as not measured."]
    rules = staticmethod(rules)
    measure = staticmethod(measure)
    rows = staticmethod(_rows)
    check_mode_note = staticmethod(check_mode_note)


BEFORE_PART, AFTER_PART = measured.parts(_Measurement)
