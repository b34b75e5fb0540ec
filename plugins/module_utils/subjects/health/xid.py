# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA XID and SXID events: what each one needs, and a per-GPU summary over a window.

The catalogue follows the "Resolution Bucket (Immediate Action)" column of NVIDIA's Xid
catalogue for Ampere and newer GPUs (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid
Errors with the Xid Catalog"), folded into five classes of what an operator does:

- ``none``: nothing (IGNORE: informational, a fault of the application that the driver
  already handled, a corrected error);
- ``restart_app``: restart the application that hit it (RESTART_APP, CHECK_UVM);
- ``reset_gpu``: stop the GPU's processes and reset it, or reboot (RESET_GPU and the
  XID 48 and NVLink workflows);
- ``reboot``: reboot the host (RESTART_BM, RESTART_VM);
- ``hardware``: hardware service (CHECK_MECHANICALS).

XID 154 carries its own action in the text ("GPU recovery action changed from 0x0 (None)
to 0x2 (Node Reboot Required)"). An XID that needs a reset or a reboot and comes back three
times or more in the window is a ``hardware`` case: the reset did not cure it (NVIDIA's
investigatory action for those is to contact support). Codes not in the catalogue are
``unknown``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

CLASSES = ("none", "restart_app", "unknown", "reset_gpu", "reboot", "hardware")
CLASS_RANK = dict((name, index) for index, name in enumerate(CLASSES))
CLASS_SEVERITY = {
    "none": "info",
    "restart_app": "low",
    "unknown": "medium",
    "reset_gpu": "high",
    "reboot": "high",
    "hardware": "critical",
}
CLASS_TEXT = {
    "none": "nothing to do",
    "restart_app": "restart the application",
    "unknown": "not in NVIDIA's catalogue",
    "reset_gpu": "reset the GPU",
    "reboot": "reboot the host",
    "hardware": "hardware service",
}
# A reset- or reboot-class XID seen this often in the window on one GPU: hardware service.
REPEAT_HARDWARE = 3

_RA = "restart_app"
_RG = "reset_gpu"

# code -> (class, NVIDIA's short description)
CATALOGUE = {
    8: (_RA, "GPU stopped processing"),
    11: (_RA, "Invalid or corrupted push buffer stream"),
    13: (_RA, "Graphics Engine Exception"),
    14: ("none", "Fake or injected error"),
    25: (_RA, "Invalid or illegal push buffer stream"),
    31: (_RA, "GPU memory page fault"),
    32: (_RA, "Invalid or corrupted push buffer stream"),
    37: ("none", "Driver firmware error"),
    38: ("none", "Driver firmware error"),
    39: (_RA, "Copy Engine Exception"),
    40: (_RA, "Copy Engine Exception"),
    41: (_RA, "Copy Engine Exception"),
    43: ("none", "GPU stopped processing (application fault, GPU healthy)"),
    44: ("none", "Graphics Engine fault during context switch"),
    45: ("none", "Preemptive cleanup, due to previous errors"),
    46: (_RG, "GPU stopped processing"),
    48: (_RG, "Double Bit ECC Error"),
    54: ("hardware", "Auxiliary power is not connected to the GPU board"),
    60: (_RA, "Video processor exception"),
    62: (_RG, "Internal micro-controller halt"),
    63: ("none", "GPU memory remapping event"),
    64: (_RG, "GPU memory remapping failure"),
    66: ("none", "Illegal access by driver"),
    67: ("none", "Illegal access by driver"),
    68: (_RA, "NVDEC0 Exception"),
    69: (_RA, "Graphics Engine class error"),
    70: (_RA, "CE3: Unknown Error"),
    71: (_RA, "CE4: Unknown Error"),
    72: (_RA, "CE5: Unknown Error"),
    74: (_RG, "NVLink Error"),
    75: (_RA, "CE6: Unknown Error"),
    76: (_RA, "CE7: Unknown Error"),
    77: (_RA, "CE8: Unknown Error"),
    79: ("reboot", "GPU has fallen off the bus"),
    80: (_RA, "Corrupted data sent to GPU"),
    82: (_RA, "NVJPG0 Error"),
    83: (_RA, "NVDEC1 Error"),
    84: (_RA, "NVDEC2 Error"),
    85: (_RA, "CE9: Unknown Error"),
    86: (_RA, "OFA Exception"),
    88: (_RA, "NVDEC3 Error"),
    89: (_RA, "NVDEC4 Error"),
    92: ("none", "High single-bit ECC error rate"),
    93: ("none", "Non-fatal violation of provisioned InfoROM wear limit"),
    94: (_RA, "Contained memory error"),
    95: (_RG, "Uncontained memory error"),
    96: (_RA, "NVDEC5 Error"),
    97: (_RA, "NVDEC6 Error"),
    98: (_RA, "NVDEC7 Error"),
    99: (_RA, "NVJPG1 Error"),
    100: (_RA, "NVJPG2 Error"),
    101: (_RA, "NVJPG3 Error"),
    102: (_RA, "NVJPG4 Error"),
    103: (_RA, "NVJPG5 Error"),
    104: (_RA, "NVJPG6 Error"),
    105: (_RA, "NVJPG7 Error"),
    106: ("none", "SMBPBI Test Message"),
    107: ("none", "SMBPBI Test Message Silent"),
    109: (_RG, "Context Switch Timeout Error"),
    110: (_RG, "Security Fault Error"),
    119: (_RG, "GSP RPC Timeout"),
    120: (_RG, "GSP Error"),
    121: ("none", "C2C Error (corrected)"),
    126: (_RA, "CE10: Unknown Error"),
    127: (_RA, "CE11: Unknown Error"),
    128: (_RA, "CE12: Unknown Error"),
    129: (_RA, "CE13: Unknown Error"),
    130: (_RA, "CE14: Unknown Error"),
    131: (_RA, "CE15: Unknown Error"),
    132: (_RA, "CE16: Unknown Error"),
    133: (_RA, "CE17: Unknown Error"),
    134: (_RA, "CE18: Unknown Error"),
    135: (_RA, "CE19: Unknown Error"),
    136: (_RG, "Link Training Failed"),
    137: ("none", "NVLink Privilege Error"),
    139: (_RA, "OFA1 Error"),
    140: (_RG, "ECC Unrecovered Error"),
    141: ("none", "CUDA Fast Path Error"),
    143: (_RG, "GPU Initialization Error"),
    144: (_RG, "NVLink: SAW Error"),
    145: (_RG, "NVLink: RLW Error"),
    146: (_RG, "NVLink: TLW Error"),
    147: (_RG, "NVLink: TREX Error"),
    148: (_RG, "NVLink: NVLPW_CTRL Error"),
    149: (_RG, "NVLink: NETIR Error"),
    150: (_RG, "NVLink: MSE Error"),
    151: ("reboot", "Key rotation Error"),
    154: ("none", "GPU Recovery Action Changed"),
    155: (_RG, "NVLink: SW Defined Error"),
    156: (_RG, "Resource Retirement Event"),
    157: ("none", "Resource Retirement Failure"),
    158: (_RG, "GPU Fatal Timeout"),
    159: (_RA, "CHI Non-Data Error"),
    160: ("none", "Channel Retirement Event"),
    161: ("none", "Channel Retirement Failure"),
    # 162/163: not in the catalogue's public table this file follows; the names are those
    # of NVIDIA's NVSentinel (syslog-health-monitor docs, its shipped cancellation rule).
    162: ("none", "PSHC re-engaged"),
    163: ("unknown", "PSHC disengaged"),
}

# A later event of the key's code on the same GPU cancels the value's events before it (the
# condition it reported has ended). NVSentinel ships one such rule (PR #1270: XID 162, PSHC
# re-engaged, cancels XID 163, PSHC disengaged).
CANCELLED_BY = {163: 162}

# XID 154's recovery actions (the text after "to 0xN (").
_RECOVERY = {
    "none": "none",
    "drain p2p": "reset_gpu",
    "drain and reset": "reset_gpu",
    "gpu reset required": "reset_gpu",
    "node reboot required": "reboot",
}
# Bounded repeats: the cost per place tried is bounded, so a line of many "recovery action
# changed from" is linear to search.
_RECOVERY_RE = re.compile(r"recovery action changed from .{0,80}? to 0x[0-9a-fA-F]{1,16} "
                          r"\(([^)]{0,80})\)")


def classify(code, message=""):
    """``(class, description)`` of XID ``code``; XID 154 by the action in ``message``."""
    if code == 154:
        match = _RECOVERY_RE.search(message or "")
        action = match.group(1).strip().lower() if match else ""
        return _RECOVERY.get(action, "unknown"), "GPU Recovery Action Changed (%s)" % (
            match.group(1) if match else "action not given")
    entry = CATALOGUE.get(code)
    if entry is None:
        return "unknown", "XID %d (not in the catalogue)" % code
    return entry


def classify_sxid(severity_text):
    """NVSwitch SXID: ``Fatal`` ones stop the fabric until the GPUs and switches are reset
    (a reboot in practice), ``Non-fatal`` ones are logged and corrected."""
    if (severity_text or "").strip().lower() == "fatal":
        return "reboot", "NVSwitch fatal error"
    return "none", "NVSwitch non-fatal error"


def worst_class(classes):
    classes = list(classes)
    if not classes:
        return None
    return max(classes, key=lambda c: CLASS_RANK.get(c, 0))


def _cancel(codes):
    """Mark ``{code: entry}`` entries a later event cancels (``CANCELLED_BY``): class
    ``none`` and ``cancelled_by`` naming the code and when; both need times to be ordered."""
    for code, by in CANCELLED_BY.items():
        entry, later = codes.get(code), codes.get(by)
        if entry and later and entry["last"] is not None and later["last"] is not None \
                and later["last"] >= entry["last"]:
            entry["class"] = "none"
            entry["cancelled_by"] = {"code": by, "at": later["last"]}


def summarize(events, now, window_days, boot_time=None):
    """Per-device summary of ``events`` (kernlog's dicts) inside ``[now - window, now]``.

    Returns ``[{address, kind, events, codes: [{code, class, description, count, first,
    last, message, before_boot}], worst}]`` sorted by address; ``kind`` is ``xid`` (a GPU)
    or ``sxid`` (an NVSwitch). Events without a time stamp count as inside the window.
    ``before_boot``: every event of that code happened before ``boot_time`` (the reset or
    reboot it asked for has happened since). ``cancelled_by`` ``{code, at}``: a later event
    ended it (``CANCELLED_BY``; its class is then ``none``).
    """
    start = now - window_days * 86400 if now is not None else None
    groups = {}
    for event in events:
        when = event.get("time")
        if when is not None and start is not None and not (start <= when <= now + 60):
            continue
        key = (event["kind"], event["address"] or "unknown")
        dev = groups.setdefault(key, {})
        code = dev.setdefault(event["code"], {
            "code": event["code"], "class": event["class"], "description": event["description"],
            "count": 0, "first": None, "last": None, "message": event.get("message"),
            "before_boot": True})
        code["count"] += 1
        if CLASS_RANK.get(event["class"], 0) > CLASS_RANK.get(code["class"], 0):
            code["class"] = event["class"]
            code["description"] = event["description"]
        if when is not None:
            code["first"] = when if code["first"] is None else min(code["first"], when)
            if code["last"] is None or when >= code["last"]:
                code["last"] = when
                code["message"] = event.get("message")
        if when is None or boot_time is None or when >= boot_time:
            code["before_boot"] = False
    out = []
    for (kind, address), codes in sorted(groups.items(), key=lambda item: item[0][::-1]):
        _cancel(codes)
        items = sorted(codes.values(), key=lambda c: (-CLASS_RANK.get(c["class"], 0), c["code"]))
        for item in items:
            if item["class"] in ("reset_gpu", "reboot") and item["count"] >= REPEAT_HARDWARE:
                item["class"] = "hardware"
                item["repeated"] = True
        out.append({"address": address, "kind": kind,
                    "events": sum(c["count"] for c in items),
                    "codes": sorted(items, key=lambda c: (-CLASS_RANK.get(c["class"], 0),
                                                          c["code"])),
                    "worst": worst_class(c["class"] for c in items)})
    return out
