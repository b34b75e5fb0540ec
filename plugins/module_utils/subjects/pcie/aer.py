# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe Advanced Error Reporting counters from sysfs, per GPU and every bridge above it.

The kernel (``drivers/pci/pcie/aer.c``) keeps per-device counters since boot (or since the
device was enumerated) and shows them in three files of every function with an AER
capability, one ``NAME count`` line per error type, then a total line::

    RxErr 0
    BadTLP 3
    ...
    TOTAL_ERR_COR 3

``aer_dev_correctable`` (total ``TOTAL_ERR_COR``), ``aer_dev_nonfatal``
(``TOTAL_ERR_NONFATAL``) and ``aer_dev_fatal`` (``TOTAL_ERR_FATAL``); an error bit without a
name prints as ``dev_cor_errs_bit[N] count`` when its count is not zero. Root ports also
have ``aer_rootport_total_err_cor``, ``..._fatal`` and ``..._nonfatal``: every error message
the port received from itself and from everything below it (one number each).

Nothing here writes. Counters are kept raw in the audit so that two audits compare
(the fleet check ``pcie_aer_change``, module_utils/subjects/pcie/aer_change.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import read_text

KINDS = ("fatal", "nonfatal", "correctable")
DEV_FILES = {"correctable": "aer_dev_correctable", "nonfatal": "aer_dev_nonfatal",
             "fatal": "aer_dev_fatal"}
TOTAL_NAMES = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL",
               "fatal": "TOTAL_ERR_FATAL"}
ROOTPORT_FILES = {"correctable": "aer_rootport_total_err_cor",
                  "nonfatal": "aer_rootport_total_err_nonfatal",
                  "fatal": "aer_rootport_total_err_fatal"}
KIND_LABEL = {"fatal": "fatal", "nonfatal": "non-fatal", "correctable": "correctable"}
# Correctable errors at or above this many since boot make the finding medium, below low.
CORRECTABLE_MEDIUM = 100

_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_\[\]]*)\s+(\d+)\s*$")


class AerFormatError(ValueError):
    """An AER file does not hold ``NAME count`` lines."""


def parse_counters(text, where="aer file"):
    """``aer_dev_*`` text -> ``(counters, total)``: ``{name: count}`` in file order without
    the total line, and the ``TOTAL_ERR_*`` count (None when the line is missing: an older
    kernel; then the sum of the counters stands in). Raises AerFormatError on other text."""
    counters = {}
    total = None
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        match = _LINE.match(line.strip())
        if not match:
            raise AerFormatError("%s: unexpected line %r (want 'NAME count')" % (where, line))
        name, count = match.group(1), int(match.group(2))
        if name.startswith("TOTAL_ERR_"):
            total = count
        else:
            counters[name] = count
    return counters, total


def read_device(dev):
    """AER counters of one PciDevice: None when it has no ``aer_dev_*`` files (no AER
    capability, or a kernel without AER), else ``{kind: {total, counters}}`` for the three
    kinds plus ``rootport_total`` (``{kind: count}``, root ports only, else None)."""
    found = False
    out = {}
    for kind in KINDS:
        path = os.path.join(dev.path, DEV_FILES[kind])
        text = read_text(path)
        if text is None:
            out[kind] = None
            continue
        found = True
        counters, total = parse_counters(text, path)
        out[kind] = {"total": total if total is not None else sum(counters.values()),
                     "counters": counters}
    rootport = {}
    for kind in KINDS:
        text = read_text(os.path.join(dev.path, ROOTPORT_FILES[kind]))
        if text is not None:
            try:
                rootport[kind] = int(text.split()[0])
            except (ValueError, IndexError):
                raise AerFormatError("%s: not a number: %r" % (
                    os.path.join(dev.path, ROOTPORT_FILES[kind]), text))
    if not found and not rootport:
        return None
    out["rootport_total"] = rootport or None
    return out


def collect(root, vendor=pci.NVIDIA_VENDOR, classes=pci.GPU_CLASSES):
    """The audit's ``pcie_aer`` facts: one entry per GPU and per bridge above a GPU (each
    once, GPUs first, in address order): ``{address, role (gpu|bridge), port_type, gpus
    (the GPUs at or below it), below (the devices of this list below it), available, fatal,
    nonfatal, correctable, rootport_total}``; each kind ``{total, counters}`` or None."""
    entries = {}
    order = []
    gpus = pci.select_devices(root, vendor, classes)
    for gpu in gpus:
        chain = [(gpu, "gpu")] + [(b, "bridge") for b in gpu.upstream()]
        for index, (dev, role) in enumerate(chain):
            if dev.address not in entries:
                entries[dev.address] = {"dev": dev, "role": role, "gpus": [], "below": set()}
                order.append(dev.address)
            entries[dev.address]["gpus"].append(gpu.address)
            entries[dev.address]["below"].update(d.address for d, _r in chain[:index])
    out = []
    for address in sorted(order, key=lambda a: (entries[a]["role"] != "gpu", a)):
        item = entries[address]
        dev = item["dev"]
        counts = read_device(dev)
        try:
            port_type = dev.port_type
        except (pci.PciError, OSError, ValueError, IndexError):
            port_type = None
        entry = {"address": address, "role": item["role"], "port_type": port_type,
                 "gpus": sorted(set(item["gpus"])), "below": sorted(item["below"]),
                 "available": counts is not None}
        for kind in KINDS:
            entry[kind] = (counts or {}).get(kind)
        entry["rootport_total"] = (counts or {}).get("rootport_total")
        out.append(entry)
    return out


def totals(entry):
    """``{kind: total}`` of one entry (0 for a kind the device does not report)."""
    return dict((kind, (entry.get(kind) or {}).get("total") or 0) for kind in KINDS)


def unexplained(entry, entries):
    """``{kind: count}`` a root port's totals hold beyond what it and the devices below it
    that the audit read count themselves (errors of functions the audit does not read, such
    as a GPU's audio function, or of devices without counters). Empty for other ports."""
    root_totals = entry.get("rootport_total")
    if not root_totals:
        return {}
    below = set(entry.get("below") or ())
    below = [e for e in entries if e is entry or e["address"] in below]
    out = {}
    for kind in KINDS:
        own = sum(totals(e)[kind] for e in below)
        extra = (root_totals.get(kind) or 0) - own
        if extra > 0:
            out[kind] = extra
    return out


def _named(entry, kind):
    counters = (entry.get(kind) or {}).get("counters") or {}
    return ", ".join("%s %d" % (name, count) for name, count in counters.items() if count)


def severity(counts):
    """Finding severity for ``{kind: count}``: fatal or non-fatal -> high; correctable only
    -> medium from CORRECTABLE_MEDIUM on, else low; None when all are 0."""
    if counts.get("fatal") or counts.get("nonfatal"):
        return "high"
    if counts.get("correctable", 0) >= CORRECTABLE_MEDIUM:
        return "medium"
    if counts.get("correctable"):
        return "low"
    return None


def describe(entry, entries):
    """``(severity, current, detail)`` of one entry, or None when it counted no error."""
    counts = totals(entry)
    extra = unexplained(entry, entries)
    combined = dict((k, counts[k] + extra.get(k, 0)) for k in KINDS)
    level = severity(combined)
    if level is None:
        return None
    parts = []
    for kind in KINDS:
        if counts[kind]:
            named = _named(entry, kind)
            parts.append("%d %s%s" % (counts[kind], KIND_LABEL[kind],
                                      " (%s)" % named if named else ""))
    for kind in KINDS:
        if extra.get(kind):
            parts.append("%d %s reported to this root port by devices below it" % (
                extra[kind], KIND_LABEL[kind]))
    role = "GPU" if entry["role"] == "gpu" else "%s above %s" % (
        (entry.get("port_type") or "bridge").replace("_", " "), ", ".join(entry["gpus"]))
    return level, "; ".join(parts) + " since boot", role


REMEDY_UNCORRECTABLE = (
    "uncorrectable PCIe errors drop or poison transactions: a fatal one resets the link and "
    "the GPU's CUDA contexts die (XID 79, fallen off the bus). Find the source and type with "
    "journalctl -k | grep -i aer; reseat the GPU and its riser or cable, check the slot "
    "power and the BIOS PCIe speed setting (forcing one generation lower trades bandwidth "
    "for a stable link); counters reset at reboot, so compare with the next audit")
REMEDY_CORRECTABLE = (
    "correctable errors are retried by the link (RxErr, BadTLP, BadDLLP, replays): nothing "
    "is lost but each retry costs bandwidth and a growing count marks a marginal link "
    "(riser, cable, slot). Compare with the previous audit (the report shows the change); "
    "if it keeps growing, reseat the card or riser, or force a lower PCIe speed in the BIOS "
    "(less bandwidth, a clean link)")


def item(severity_name, subject, current, expected, remedy, detail=None):
    """A finding without its id (the check registry adds it): the shape of
    ``platform.findings.found``."""
    out = {"severity": severity_name, "subject": subject, "current": current,
           "expected": expected, "remedy": remedy, "reboot_required": False}
    if detail:
        out["detail"] = detail
    return out


def findings(entries):
    """``pcie_aer_errors`` findings (without their id) of the ``pcie_aer`` facts."""
    out = []
    for entry in entries or []:
        described = describe(entry, entries)
        if described is None:
            continue
        level, current, role = described
        remedy = REMEDY_UNCORRECTABLE if level == "high" else REMEDY_CORRECTABLE
        out.append(item(level, entry["address"], current,
                        "no uncorrectable and few correctable PCIe errors", remedy,
                        detail=role))
    return out
