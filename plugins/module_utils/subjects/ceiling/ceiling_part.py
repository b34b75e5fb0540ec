# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``ceiling`` tune part (module host_tune): each GPU's compute and memory ceiling
(FP32, BF16, FP8 TFLOPS and the device-to-device copy rate, the CUDA probe's ``ceiling``:
subjects/cuda/cuda_ceiling.py) measured before the tune parts change the host and again
after them, so the tune report shows per GPU and part ``before -> after`` with the share of
the datasheet (ceiling_models.py). Power limits, clocks and the host's load are what move it.

Off unless asked (host_tune's ``parts``; role ``gpuhost_tune_ceiling``): it loads every GPU
fully for about ``ceiling_seconds`` per part and takes up to 2 x ``ceiling_mb`` MiB of each
GPU's free memory. It changes nothing. Live host only, as the ``bandwidth`` part
(subjects/cuda/measured.py): under another root, without the driver library and in check
mode it measures nothing and says why. A lower figure after tuning is reported (row
``lower`` and a warning), never a failure; a kernel whose result was wrong is its row's
``failed``, and a CUDA error is the part's failure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.ceiling import (
    ceiling_models,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import (
    bandwidth_part,
    cuda,
    measured,
)

NAME = "ceiling"
# A change within this share of the figure before is noise ("same"): a healthy GPU's runs
# differ by a few percent.
SAME_PCT = 3.0

# The part's options, each declared once (as bandwidth_part.OPTIONS says); the driver
# library is the bandwidth part's.
OPTIONS = dict(
    ceiling_seconds=dict(
        type="float", default=cuda.CEILING_SECONDS, role_var="gpuhost_tune_ceiling_seconds",
        description="About how long each part of the C(ceiling) measurement (memory, FP32, "
                    "BF16, FP8) runs per GPU, its timed runs together (0.1 to 60 s)."),
    ceiling_mb=dict(
        type="int", default=cuda.CEILING_MB, role_var="gpuhost_tune_ceiling_mb",
        description="Size of each buffer of the C(ceiling) part's device-to-device copy, in "
                    "MiB (64 to 65536); two are taken per GPU, less where less memory is "
                    "free."),
    cuda_library=bandwidth_part.OPTIONS["cuda_library"],
)


def rules(p):
    """The option values the probe can use; raises validate.ValidationError."""
    if p.get("ceiling_seconds") is not None and not 0.1 <= float(p["ceiling_seconds"]) <= 60:
        validate.fail("ceiling_seconds", p["ceiling_seconds"], "0.1 to 60 seconds")
    if "ceiling_mb" in p:
        validate.int_range("ceiling_mb", p.get("ceiling_mb"), 64, 65536)
    if "cuda_library" in p:
        bandwidth_part.library("cuda_library", p["cuda_library"])


def measure(params, runner):
    """One probe run with the ceiling, as the part's options say, in a child process
    bounded by the probe's limit for it (``cuda.time_limit``); never raises."""
    return cuda.probe_host(runner, library=params["cuda_library"] or cuda.DEFAULT_LIBRARY,
                           root=params["root"], ceiling=True,
                           ceiling_seconds=params.get("ceiling_seconds")
                           or cuda.CEILING_SECONDS,
                           ceiling_mb=params.get("ceiling_mb") or cuda.CEILING_MB)


def cell(dev, part):
    """``612.3 TFLOPS (61.9 % of datasheet)``; None when not measured."""
    ceiling = (dev or {}).get("ceiling") or {}
    value = ceiling_models.figure(ceiling.get(part), part)
    if value is None:
        return None
    text = "%s %s" % (ceiling_models.shown(value), ceiling_models.UNITS[part])
    sheet = ceiling_models.datasheet(ceiling_models.model_row((dev or {}).get("name")), part)
    if sheet:
        text += " (%.1f %% of datasheet)" % (100.0 * value / sheet)
    return text


def _why_not(dev, part):
    if dev is None:
        return "not found"
    ceiling = dev.get("ceiling") or {}
    result = ceiling.get(part)
    if isinstance(result, dict):
        if result.get("checked") is False:
            return "wrong result: %s" % (result.get("error") or "not checked")
        if result.get("skipped"):
            return result["skipped"]
    return ceiling.get("skipped") or dev.get("skipped") or "not measured"


def _figure(dev, part):
    return ceiling_models.figure(((dev or {}).get("ceiling") or {}).get(part), part)


def rows(before, after):
    """``(item, before, after, status, note)`` per GPU and part, and the drops
    (``item before -> after``) for the warning."""
    out, drops = [], []
    old = dict((d["pci_bus_id"], d) for d in before.get("devices") or [] if d.get("pci_bus_id"))
    new = dict((d["pci_bus_id"], d) for d in after.get("devices") or [] if d.get("pci_bus_id"))
    order = [d["pci_bus_id"] for d in after.get("devices") or [] if d.get("pci_bus_id")]
    order += [bdf for bdf in old if bdf not in new]
    for bdf in order:
        b, a = old.get(bdf), new.get(bdf)
        name = (a or b or {}).get("name") or "GPU"
        for part in ceiling_models.PARTS:
            item = "%s %s" % (bdf, ceiling_models.LABELS[part])
            bv, av = _figure(b, part), _figure(a, part)
            wrong = [w for w, d in (("before", b), ("after", a))
                     if isinstance(((d or {}).get("ceiling") or {}).get(part), dict)
                     and d["ceiling"][part].get("checked") is False]
            if wrong:
                out.append((item, cell(b, part), cell(a, part), "failed", "%s: %s; %s" % (
                    wrong[0], _why_not(a if wrong[0] == "after" else b, part), name)))
                continue
            if bv is None and av is None:
                out.append((item, None, None, "skipped", "%s; %s" % (_why_not(a or b, part),
                                                                     name)))
                continue
            if av is None:
                out.append((item, cell(b, part), None, "skipped",
                            "after: %s; %s" % (_why_not(a, part), name)))
                continue
            if bv is None:
                out.append((item, None, cell(a, part), "measured",
                            "before: %s; %s" % (_why_not(b, part), name)))
                continue
            change = 100.0 * (av - bv) / bv if bv else 0.0
            status = "same" if abs(change) <= SAME_PCT else (
                "higher" if change > 0 else "lower")
            out.append((item, cell(b, part), cell(a, part), status,
                        "%+.1f %%; %s" % (change, name)))
            if status == "lower":
                drops.append("%s %s -> %s %s (%+.1f %%)" % (
                    item, ceiling_models.shown(bv), ceiling_models.shown(av),
                    ceiling_models.UNITS[part], change))
    return out, drops


def check_mode_note(params):
    return ("check mode: no ceiling measured (it loads every GPU fully for about %g s per "
            "part)" % (params.get("ceiling_seconds") or cuda.CEILING_SECONDS))


def _rows(before, after, _ctx):
    return rows(before, after)


class _Measurement(object):
    """The part's measurement for ``measured.parts``."""

    name = NAME
    options = OPTIONS
    worse = "lower"
    role_doc = [
        "Measure each GPU's compute and memory ceiling (FP32, BF16, FP8 TFLOPS with PTX "
        "kernels the driver compiles, the device-to-device copy rate) before the changes and "
        "after them (tag C(tune_ceiling)); the report shows per GPU and part C(before -> "
        "after) with the share of the model's datasheet. A lower figure is reported and "
        "warned about, not a failure; a CUDA error fails the host.",
        "Loads every GPU fully for about 4 x C(gpuhost_tune_ceiling_seconds) per GPU: run it "
        "on an idle host. Live host only (gpuhost_root C(/)); elsewhere, without the NVIDIA "
        "driver library and in check mode it is reported as not measured."]
    rules = staticmethod(rules)
    measure = staticmethod(measure)
    rows = staticmethod(_rows)
    check_mode_note = staticmethod(check_mode_note)


BEFORE_PART, AFTER_PART = measured.parts(_Measurement)
