# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVLink state and error counters: the ``nvlink`` fact.

NVLink is not in ``nvidia-smi -q -x``; ``nvidia-smi nvlink -s`` prints each GPU's links and
``nvidia-smi nvlink -e`` their error counters (since the driver loaded, or since
``nvidia-smi nvlink -re``). Each runs once per audit on a live host, bounded by the
runner's ``timeout=``, and only where NVLink can be: 2 or more GPUs in ``-q -x`` and
NVSwitch functions on the bus (``fabric``), a fabric state in ``-q -x``, or an NVLink part
(SXM, NVL, HBM3, H200, B200/B300, GB200/GB300). A capture stores both outputs under
``/.gpuhost-capture/`` like ``-q -x``. Their format (NVIDIA's, driver 470 to 580)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
    \t Link 0: 26.562 GB/s          (-s: active, its speed)
    \t Link 1: <inactive>
    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
    \t Link 0: Replay Errors: 0     (-e: one counter a line, a blank line between links)
    \t Link 0: Recovery Errors: 0
    \t Link 0: CRC Errors: 0

A GPU without NVLink prints nothing (an H200 with no peer, driver 580.159.04: both
commands exit 0 with empty output), which is no NVLink, not inactive links.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health.nvsmi import (
    normalize_bus_id,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    CommandTimeout,
)

STATUS_NAME = "nvidia-smi-nvlink-s.txt"
ERRORS_NAME = "nvidia-smi-nvlink-e.txt"
TIMEOUT_S = 30
NVLINK_PARTS = re.compile(r"SXM|NVL|HBM3|H200|H20\b|B200|B300|GB200|GB300|GH200", re.I)

# Numbers through bounded.INT (a longer one is no match: the line is skipped, never a
# ValueError that cost the whole section); lines are stripped before matching and
# no pattern has two unbounded repeats that can take the same characters, so each is
# linear in the line (nvidia-smi's lines are short; a planted capture's need not be).
_GPU = re.compile(r"^GPU[ \t]{1,8}(%s):[ \t]{0,8}(.*)$" % bounded.INT)
_UUID = re.compile(r"\(UUID:[ \t]{0,8}([^()]{1,128})\)$")
_LINK = re.compile(r"^Link[ \t]{1,8}(%s):[ \t]{0,8}(.*)$" % bounded.INT)
_RATE = re.compile(r"^([0-9]{1,12}(?:\.[0-9]{1,12})?)[ \t]{0,8}GB/s$")
_COUNTER = re.compile(r"^(.{1,200}?):[ \t]{0,8}(%s)$" % bounded.INT)
# Counters judged: every ``... Errors`` count and ``... failed ...`` events; BER and
# "Effective" counts (after forward error correction, Blackwell) are left out.
_JUDGED = re.compile(r"errors$|failed", re.I)
SEVERE = re.compile(r"recovery|failed", re.I)


def wanted(nvsmi_fact, fabric_fact):
    """``(True, why)`` when the host can have NVLink (run the two commands), else
    ``(False, why not)``."""
    gpus = (nvsmi_fact or {}).get("gpus") or []
    if not (nvsmi_fact or {}).get("available"):
        return False, "no nvidia-smi data"
    if len(gpus) < 2:
        return False, "fewer than 2 GPUs in nvidia-smi"
    if (fabric_fact or {}).get("needed"):
        return True, "NVSwitch on the bus"
    if any(g.get("fabric_state") not in (None, "N/A") for g in gpus):
        return True, "fabric state in nvidia-smi -q -x"
    if any(NVLINK_PARTS.search(g.get("name") or "") for g in gpus):
        return True, "NVLink GPU model"
    return False, "no NVSwitch, fabric state or NVLink GPU model (PCIe-only)"


def _blocks(text):
    """``[(index, name, uuid, [(link, rest)])]`` of one output."""
    out = []
    for line in (text or "").splitlines():
        bare = line.strip()
        gpu = _GPU.match(bare)
        if gpu and not line[:1].isspace():
            name, uuid = gpu.group(2), ""
            tail = _UUID.search(name)
            if tail:
                name, uuid = name[:tail.start()], tail.group(1)
            out.append((int(gpu.group(1)), name.strip(), uuid.strip(), []))
            continue
        link = _LINK.match(bare)
        if link and out:
            out[-1][3].append((int(link.group(1)), link.group(2).strip()))
    return out


def parse_status(text):
    """``[{index, name, uuid, links: [{link, state, gbs}]}]``; state ``active``,
    ``inactive`` or ``unknown`` (a status this parser does not know: not active)."""
    gpus = []
    for index, name, uuid, links in _blocks(text):
        rows = []
        for link, rest in links:
            rate = _RATE.match(rest)
            if rate:
                rows.append({"link": link, "state": "active", "gbs": float(rate.group(1))})
            elif "inactive" in rest.lower():
                rows.append({"link": link, "state": "inactive", "gbs": None})
            else:
                rows.append({"link": link, "state": "unknown", "gbs": None, "text": rest})
        gpus.append({"index": index, "name": name, "uuid": uuid, "links": rows})
    return gpus


def parse_errors(text):
    """``[{index, uuid, counters: {link: {name: count}}}]``."""
    gpus = []
    for index, _name, uuid, links in _blocks(text):
        counters = {}
        for link, rest in links:
            match = _COUNTER.match(rest)
            if match:
                counters.setdefault(link, {})[match.group(1).strip()] = int(match.group(2))
        gpus.append({"index": index, "uuid": uuid, "counters": counters})
    return gpus


def judged(counters):
    """``{link: {name: count}}`` of the non-zero judged counters."""
    out = {}
    for link, values in sorted(counters.items()):
        bad = dict((name, count) for name, count in values.items()
                   if count and _JUDGED.search(name) and not name.lower().startswith(
                       "effective"))
        if bad:
            out[link] = bad
    return out


def _produce(args, name):
    def produce(runner):
        tool = runner.which("nvidia-smi")
        if not tool:
            return None, {"source": None, "error": "nvidia-smi not installed"}
        try:
            rc, out, err = runner.run([tool] + args, check=False, timeout=TIMEOUT_S)
        except CommandTimeout as exc:
            return None, {"source": "command", "error": str(exc)}
        except (CommandError, OSError) as exc:
            return None, {"source": "command", "error": str(exc)}
        if rc != 0:
            detail = (err or out or "").strip().splitlines()
            return None, {"source": "command", "rc": rc, "error": "%s exited %s%s" % (
                name, rc, ": " + detail[-1] if detail else "")}
        return out, {"source": "command", "rc": rc, "error": None}
    return produce


def facts(outputs, nvsmi_fact, fabric_fact):
    """The ``nvlink`` fact: ``{checked, reason, available, error, gpus: [{address, index,
    name, links, active, inactive, gbs, errors}]}`` (``gbs``: the active links' speeds
    added, the GPU's NVLink ceiling per direction)."""
    run, why = wanted(nvsmi_fact, fabric_fact)
    out = {"checked": run, "reason": why, "available": False, "error": None, "gpus": []}
    if not run:
        return out
    status = outputs.get(STATUS_NAME, _produce(["nvlink", "-s"], "nvidia-smi nvlink -s"))
    errors = outputs.get(ERRORS_NAME, _produce(["nvlink", "-e"], "nvidia-smi nvlink -e"))
    if status is None:
        out["error"] = (outputs.info.get(STATUS_NAME) or {}).get("error")
        return out
    by_uuid = dict((g.get("uuid"), g) for g in nvsmi_fact.get("gpus") or [] if g.get("uuid"))
    smi = nvsmi_fact.get("gpus") or []
    counters = dict((g["uuid"] or g["index"], g["counters"])
                    for g in parse_errors(errors or ""))
    if errors is None:
        out["error"] = (outputs.info.get(ERRORS_NAME) or {}).get("error")
    for gpu in parse_status(status):
        match = by_uuid.get(gpu["uuid"]) or (smi[gpu["index"]] if gpu["index"] < len(smi)
                                             else {})
        links = gpu["links"]
        out["gpus"].append({
            "address": normalize_bus_id(match.get("address")) or "GPU %d" % gpu["index"],
            "index": gpu["index"], "name": gpu["name"] or match.get("name"),
            "links": len(links),
            "active": [ln["link"] for ln in links if ln["state"] == "active"],
            # the GPU's NVLink ceiling per direction: its active links' speeds added
            "gbs": round(sum(ln["gbs"] for ln in links if ln["state"] == "active"), 3),
            "inactive": [ln["link"] for ln in links if ln["state"] != "active"],
            "errors": judged(counters.get(gpu["uuid"] or gpu["index"], {})),
        })
    out["available"] = True
    return out
