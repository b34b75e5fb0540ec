# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi -q -x``: run once per audit on a live host, parsed with xml.etree.

What only the driver knows and no file shows: persistence mode, ECC mode (current and
pending), ECC error counts, retired pages, remapped rows, clock event (throttle) reasons,
power limits, performance state, fabric state, the driver's recovery action, VBIOS and
serial, memory used and the processes on each GPU (``<processes><process_info>``: ``pid``,
``type``, ``process_name``, ``used_memory``; real H200 layout in tests/fixtures/nvidia).

The XML differs between driver branches and GPUs, and a real file holds ``N/A`` in many
places (a VM, a GPU without the feature), so every reader here takes a missing element or
``N/A`` as None, never as an error:

- clock reasons: ``clocks_event_reasons`` / ``clocks_event_reason_*`` (535 and later),
  ``clocks_throttle_reasons`` / ``clocks_throttle_reason_*`` before;
- power: ``gpu_power_readings`` with ``current_power_limit`` (530 and later),
  ``power_readings`` with ``power_limit`` / ``enforced_power_limit`` before;
- ECC counts: ``sram_*`` / ``dram_*`` children of ``volatile`` and ``aggregate`` (550 and
  later), ``single_bit`` / ``double_bit`` with a ``total`` before;
- retired pages: ``pending_retirement`` (``pending_blacklist`` on old drivers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

OUTPUT_NAME = "nvidia-smi-q-x.xml"
COMMAND = ["nvidia-smi", "-q", "-x"]

# Clock event reasons that are no problem: an idle GPU and clocks set on purpose.
BENIGN_CLOCK_REASONS = ("gpu_idle", "applications_clocks_setting")

_ADDR = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
                   r"(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$")
_UNKNOWN = ("N/A", "NOT SUPPORTED", "UNKNOWN ERROR", "INSUFFICIENT PERMISSIONS",
            "REQUESTED FUNCTIONALITY HAS BEEN DEPRECATED")
_NUMBER = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)")


class NvsmiError(Exception):
    """The text is not nvidia-smi's XML log."""


def normalize_bus_id(text):
    """``00000000:00:06.0`` (nvidia-smi) / ``0000:00:06.0`` / ``00:06.0`` -> ``0000:00:06.0``
    (the sysfs form, lower case); None when it is not an address."""
    match = _ADDR.match((text or "").strip())
    if not match:
        return None
    return "%04x:%02x:%02x.%d" % (int(match.group("domain") or "0", 16),
                                  int(match.group("bus"), 16), int(match.group("dev"), 16),
                                  int(match.group("fn")))


def _text(node, path):
    """Stripped text at ``path`` below ``node``; None for missing, empty or N/A."""
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if not value or value.upper().strip("[]") in _UNKNOWN:
        return None
    return value


def _number(value):
    """``700.00 W`` -> 700.0, ``12`` -> 12; None for anything else."""
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    number = float(match.group(1))
    return int(number) if number.is_integer() and "." not in match.group(1) else number


def _yes(value):
    """``Yes``/``Enabled``/``Active`` -> True, ``No``/``Disabled``/``Not Active`` -> False."""
    if value is None:
        return None
    low = value.strip().lower()
    if low in ("yes", "enabled", "active", "true", "on"):
        return True
    if low in ("no", "disabled", "not active", "false", "off"):
        return False
    return None


def _sum_children(node, want):
    """Sum of the numeric children of ``node`` whose tag ``want(tag)`` accepts; None when
    none of them holds a number."""
    if node is None:
        return None
    total = None
    for child in list(node):
        if not want(child.tag):
            continue
        value = _number(_text(node, child.tag))
        if isinstance(value, (int, float)):
            total = (total or 0) + int(value)
    return total


def _ecc_counts(node):
    """``(correctable, uncorrectable)`` of one ``volatile`` or ``aggregate`` element, both
    layouts."""
    if node is None:
        return None, None
    if node.find("double_bit") is not None or node.find("single_bit") is not None:
        return (_number(_text(node, "single_bit/total")),
                _number(_text(node, "double_bit/total")))
    unc = _sum_children(node, lambda tag: "uncorrectable" in tag)
    corr = _sum_children(node, lambda tag: "correctable" in tag and "uncorrectable" not in tag)
    return corr, unc


def _clock_reasons(gpu):
    """``(active reasons, every reason read)`` by short name (``sw_power_cap``)."""
    for group, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                          ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        node = gpu.find(group)
        if node is None:
            continue
        active = []
        seen = []
        for child in list(node):
            name = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
            state = _yes(_text(node, child.tag))
            if state is None:
                continue
            seen.append(name)
            if state:
                active.append(name)
        return active, seen
    return [], []


def _clock_counters(gpu):
    """``clocks_event_reasons_counters`` (535 and later): microseconds each reason held the
    clocks down since the driver loaded, by short name (``hw_therm_slowdown``; drivers spell
    some ``hw_thermal_slowdown``, ``hw_power_braking``); None when the log has none."""
    node = gpu.find("clocks_event_reasons_counters")
    if node is None:
        return None
    prefix = "clocks_event_reasons_counters_"
    out = {}
    for child in list(node):
        value = _number(_text(node, child.tag))
        if isinstance(value, (int, float)):
            name = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
            out[name] = value
    return out


def _power(gpu):
    node = gpu.find("gpu_power_readings")
    if node is None:
        node = gpu.find("power_readings")
    if node is None:
        return {"limit_w": None, "default_limit_w": None, "max_limit_w": None,
                "draw_w": None, "management": None}
    limit = None
    for tag in ("current_power_limit", "enforced_power_limit", "power_limit"):
        limit = _number(_text(node, tag))
        if limit is not None:
            break
    draw = None
    for tag in ("power_draw", "instant_power_draw", "average_power_draw"):
        draw = _number(_text(node, tag))
        if draw is not None:
            break
    return {
        "limit_w": limit,
        "default_limit_w": _number(_text(node, "default_power_limit")),
        "max_limit_w": _number(_text(node, "max_power_limit")),
        "draw_w": draw,
        "management": _text(node, "power_management"),
    }


def _gpu(gpu):
    address = normalize_bus_id(gpu.get("id")) or normalize_bus_id(_text(gpu, "pci/pci_bus_id"))
    vol_corr, vol_unc = _ecc_counts(gpu.find("ecc_errors/volatile"))
    agg_corr, agg_unc = _ecc_counts(gpu.find("ecc_errors/aggregate"))
    active, seen = _clock_reasons(gpu)
    pending_pages = _text(gpu, "retired_pages/pending_retirement")
    if pending_pages is None:
        pending_pages = _text(gpu, "retired_pages/pending_blacklist")
    sbe_pages = _number(_text(gpu, "retired_pages/multiple_single_bit_retirement/retired_count"))
    dbe_pages = _number(_text(gpu, "retired_pages/double_bit_retirement/retired_count"))
    return {
        "address": address,
        "name": _text(gpu, "product_name"),
        "memory_total_mib": _number(_text(gpu, "fb_memory_usage/total")),
        "memory_used_mib": _number(_text(gpu, "fb_memory_usage/used")),
        "minor": _number(_text(gpu, "minor_number")),
        "architecture": _text(gpu, "product_architecture"),
        "serial": _text(gpu, "serial"),
        "uuid": _text(gpu, "uuid"),
        "vbios": _text(gpu, "vbios_version"),
        "persistence_mode": _yes(_text(gpu, "persistence_mode")),
        "mig_mode": _text(gpu, "mig_mode/current_mig"),
        "performance_state": _text(gpu, "performance_state"),
        "ecc_mode": _text(gpu, "ecc_mode/current_ecc"),
        "ecc_mode_pending": _text(gpu, "ecc_mode/pending_ecc"),
        "ecc_volatile_correctable": vol_corr,
        "ecc_volatile_uncorrectable": vol_unc,
        "ecc_aggregate_correctable": agg_corr,
        "ecc_aggregate_uncorrectable": agg_unc,
        "sram_threshold_exceeded": _yes(_text(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")),
        "retired_pages_sbe": sbe_pages,
        "retired_pages_dbe": dbe_pages,
        "retired_pages_pending": _yes(pending_pages),
        "remapped_rows_correctable": _number(_text(gpu, "remapped_rows/remapped_row_corr")),
        "remapped_rows_uncorrectable": _number(_text(gpu, "remapped_rows/remapped_row_unc")),
        "remapped_rows_pending": _yes(_text(gpu, "remapped_rows/remapped_row_pending")),
        "remapped_rows_failure": _yes(_text(gpu, "remapped_rows/remapped_row_failure")),
        "clock_reasons_active": active,
        "clock_reasons_read": seen,
        "clock_event_counters_us": _clock_counters(gpu),
        # T.Limit: degrees C left before the slowdown limit (negative: past it)
        "temperature_c": _number(_text(gpu, "temperature/gpu_temp")),
        "temperature_margin_c": _number(_text(gpu, "temperature/gpu_temp_tlimit")),
        "memory_temperature_c": _number(_text(gpu, "temperature/memory_temp")),
        # the memory's own limit, absolute, as drivers up to 5xx print it (470: 95 C); the
        # real H200's 580 prints only gpu_temp_max_mem_tlimit_threshold (0 C on the T.Limit
        # scale, which memory_temp is not on): None there
        "memory_temperature_limit_c": _number(_text(gpu, "temperature/gpu_temp_max_mem_threshold")),
        "power": _power(gpu),
        "fabric_state": _text(gpu, "fabric/state"),
        "fabric_status": _text(gpu, "fabric/status"),
        # None, Reset, Reboot, Drain P2P, Drain and Reset (550 and later; subjects/recovery)
        "recovery_action": _text(gpu, "gpu_recovery_action"),
        "processes": _processes(gpu),
    }


def _processes(gpu):
    """``[{pid, type, name, used_mib}]`` of ``<processes><process_info>`` (empty when none
    run; ``type`` C compute, G graphics, C+G both)."""
    out = []
    for proc in gpu.findall("processes/process_info"):
        pid = _number(_text(proc, "pid"))
        out.append({"pid": pid if isinstance(pid, int) else None,
                    "type": _text(proc, "type"), "name": (_text(proc, "process_name") or "")[:200],
                    "used_mib": _number(_text(proc, "used_memory"))})
    return out


def parse(text):
    """``{driver_version, cuda_version, attached_gpus, timestamp, gpus: [...]}`` of the XML
    log ``text``. Raises NvsmiError when it is not one."""
    if not text or not text.strip():
        raise NvsmiError("empty nvidia-smi output")
    try:
        top = ET.fromstring(text.strip().encode("utf-8"))
    except ET.ParseError as exc:
        raise NvsmiError("nvidia-smi output is not XML (%s)" % exc)
    if top.tag != "nvidia_smi_log":
        raise NvsmiError("nvidia-smi output has root element <%s>, not <nvidia_smi_log>"
                         % top.tag)
    return {
        "timestamp": _text(top, "timestamp"),
        "driver_version": _text(top, "driver_version"),
        "cuda_version": _text(top, "cuda_version"),
        "attached_gpus": _number(_text(top, "attached_gpus")),
        "gpus": [_gpu(gpu) for gpu in top.findall("gpu")],
    }


def run(runner):
    """Run ``nvidia-smi -q -x`` through ``runner`` when the tool is there:
    ``(xml text or None, {source, tool, rc, error})``."""
    tool = runner.which("nvidia-smi")
    if not tool:
        return None, {"source": None, "tool": None, "error": "nvidia-smi not installed"}
    rc, out, err = runner.run([tool] + COMMAND[1:], check=False, timeout=QUERY_TIMEOUT_S)
    if rc != 0:
        detail = (err or out or "").strip().splitlines()
        return None, {"source": "command", "tool": tool, "rc": rc,
                      "error": "nvidia-smi -q -x exited %s%s" % (
                          rc, ": " + detail[-1] if detail else "")}
    return out, {"source": "command", "tool": tool, "rc": rc, "error": None}


def facts(outputs):
    """The ``nvidia_smi`` audit fact from a :class:`cmdout.CommandOutputs`: the parsed log
    plus ``available``, ``source``, ``seconds`` (command time on a live host) and
    ``error``."""
    text = outputs.get(OUTPUT_NAME, run)
    info = outputs.info.get(OUTPUT_NAME) or {}
    out = {"available": False, "source": info.get("source"), "seconds": info.get("seconds"),
           "error": info.get("error"), "driver_version": None, "cuda_version": None,
           "gpus": []}
    if text is None:
        return out
    try:
        parsed = parse(text)
    except NvsmiError as exc:
        out["error"] = str(exc)
        return out
    out.update(parsed)
    out["available"] = True
    return out
