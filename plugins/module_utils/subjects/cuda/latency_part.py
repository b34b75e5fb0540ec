# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``latency`` tune part (module host_tune): the round trip of an empty GPU kernel
launch plus synchronise on every GPU, measured with the CUDA probe (``subjects/cuda/cuda.py``,
``latency``) before the tune parts change the host and again after verify, so the tune
report shows what the CPU-side fixes (idle states, NUMA balancing, placement) bought: per GPU
p50 and p99 in microseconds, with the calling thread sleeping between launches (what a
serving loop does, and where a deep idle state shows) and back to back, ``before -> after``
and ``better``/``worse``/``same``, and which parts ran between the two measurements.

Off unless asked (host_tune's ``parts``; role ``gpuhost_tune_latency``), switchable apart
from ``bandwidth``. It changes nothing and allocates nothing that stays. Live host only:
under another root, without the CUDA driver library, and in check mode it measures nothing
and says why in its row. A slower round trip after tuning is reported (row ``worse`` and a
warning), never a failure; a CUDA error is the part's failure, naming the code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import bandwidth_part
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import measured
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate

NAME = "latency"
# A change of at most this share of the value before, or of at most SAME_US, is noise.
SAME_PCT = 10.0
SAME_US = 2.0
MODES = (("sleeping", "after a sleep"), ("back_to_back", "back to back"))

# The part's options, each declared once (as bandwidth_part.OPTIONS says); the driver
# library is the bandwidth part's.
OPTIONS = dict(
    latency_count=dict(
        type="int", default=200, role_var="gpuhost_tune_latency_count",
        description="Round trips per mode (after a sleep, back to back) of the C(latency) part "
                    "(1 to 100000), after a warm-up of a tenth as many."),
    latency_gap_us=dict(
        type="int", default=1000, role_var="gpuhost_tune_latency_gap_us",
        description="How long the C(latency) part's thread sleeps before each launch of the "
                    "\"after a sleep\" mode, in microseconds (0 to 1000000); 1 ms is longer "
                    "than the target residency of every idle state an EPYC offers, so a core "
                    "that may enter them does."),
    cuda_library=bandwidth_part.OPTIONS["cuda_library"],
)


def rules(p):
    """The option values the probe can use: round trips per mode and the sleep before each,
    a library (host_tune's rules, the part before it measures, and module cuda_probe, whose
    options of the same names are the same measurement); raises validate.ValidationError."""
    if "latency_count" in p:
        validate.int_range("latency_count", p.get("latency_count"), 1, 100000)
    if "latency_gap_us" in p:
        validate.int_range("latency_gap_us", p.get("latency_gap_us"), 0, 1000000)
    if "cuda_library" in p:
        bandwidth_part.library("cuda_library", p["cuda_library"])


def measure(params, runner):
    """One probe run with the latency measurement, as the part's options say, in a child
    process bounded by the probe's default limit plus every round trip at its sleep and
    ``cuda.MAX_LAUNCH_US`` (``cuda.time_limit``); never raises."""
    return cuda.probe_host(runner, library=params["cuda_library"] or cuda.DEFAULT_LIBRARY,
                           latency=True, latency_count=params["latency_count"],
                           latency_gap_us=params["latency_gap_us"], root=params["root"])


def cell(stats):
    """``p50 9.8 / p99 12.4 us``; None when not measured."""
    if not stats or stats.get("p50_us") is None:
        return None
    return "p50 %.1f / p99 %.1f us" % (stats["p50_us"], stats["p99_us"])


def _change(before, after):
    """``(status, "+12.3 %")`` of one percentile: lower is better."""
    delta = after - before
    pct = 100.0 * delta / before if before else 0.0
    if abs(delta) <= SAME_US or abs(pct) <= SAME_PCT:
        return "same", "%+.1f %%" % pct
    return ("better" if delta < 0 else "worse"), "%+.1f %%" % pct


def compare(before, after):
    """``(status, note)`` for two :func:`cuda_child.latency_stats`: the status is the median's
    (``better``, ``worse`` or ``same`` within the margin): every launch after a sleep pays a
    core's wake-up, so the median shows it, while one preempted round trip moves the p99 of
    a few hundred; the note gives both changes."""
    status, change = _change(before["p50_us"], after["p50_us"])
    return status, "p50 %s, p99 %s" % (change, _change(before["p99_us"], after["p99_us"])[1])


def _why_not(dev):
    if dev is None:
        return "not found"
    lat = dev.get("latency") or {}
    if lat.get("skipped"):
        return lat["skipped"]
    return bandwidth_part._why_not(dev)


def between(ran):
    """What ran between the two measurements: ``sysctl (changed), cpuidle (no change)``."""
    if not ran:
        return "no tune part ran between the measurements"
    return "between: " + ", ".join("%s (%s)" % (name, "changed" if changed else "no change")
                                   for name, changed in ran)


def rows(before, after, ran=()):
    """``(item, before, after, status, note)`` per GPU and mode, and the slowdowns for the
    warnings."""
    out, worse = [], []
    old = dict((d["pci_bus_id"], d) for d in before.get("devices") or [] if d["pci_bus_id"])
    new = dict((d["pci_bus_id"], d) for d in after.get("devices") or [] if d["pci_bus_id"])
    order = [d["pci_bus_id"] for d in (after.get("devices") or []) if d["pci_bus_id"]]
    order += [bdf for bdf in old if bdf not in new]
    parts = between(ran)
    for bdf in order:
        b, a = old.get(bdf), new.get(bdf)
        gap = ((a or b).get("latency") or {}).get("gap_us")
        for mode, label in MODES:
            item = "%s launch+sync %s" % (bdf, label if mode != "sleeping"
                                          else "after a %s us sleep" % gap)
            bs = ((b or {}).get("latency") or {}).get(mode)
            as_ = ((a or {}).get("latency") or {}).get(mode)
            if not bs and not as_:
                out.append((item, None, None, "skipped", _why_not(a or b)))
                continue
            if not as_:
                out.append((item, cell(bs), None, "skipped", "after: %s" % _why_not(a)))
                continue
            if not bs:
                out.append((item, None, cell(as_), "measured", "before: %s" % _why_not(b)))
                continue
            status, note = compare(bs, as_)
            out.append((item, cell(bs), cell(as_), status, "%s; %s" % (note, parts)))
            if status == "worse":
                worse.append("%s %s -> %s" % (item, cell(bs), cell(as_)))
    return out, worse


def _rows(before, after, ctx):
    return rows(before, after, getattr(ctx, "ran", ()))


class _Measurement(object):
    """The part's measurement for ``measured.parts``."""

    name = NAME
    options = OPTIONS
    worse = "slower"
    role_doc = [
        "Measure the round trip of an empty kernel launch plus synchronise on every GPU, "
        "after a sleep of gpuhost_tune_latency_gap_us and back to back, before the changes "
        "and after verify (tag C(tune_latency); apart from gpuhost_tune_bandwidth); the "
        "report shows per GPU C(before -> after) p50 and p99 in microseconds, C(better), "
        "C(worse) or C(same), and which parts ran in between. Slower is warned about, not a "
        "failure; a CUDA error fails the host.",
        "Live host only (gpuhost_root C(/)); elsewhere, without the NVIDIA driver library "
        "and in check mode it is reported as not measured."]
    rules = staticmethod(rules)
    measure = staticmethod(measure)
    rows = staticmethod(_rows)

    @staticmethod
    def check_mode_note(_params):
        return "check mode: no kernel launched"


BEFORE_PART, AFTER_PART = measured.parts(_Measurement)
