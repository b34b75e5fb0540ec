# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One GPU reset: ``nvidia-smi -r -i <bus>`` bounded in time, and what its answer means.

The driver's answers, as NVIDIA's tool prints them (``parse`` sorts them into OUTCOMES):

- success, exit 0: ``GPU 00000000:1A:00.0 was successfully reset.`` (quoted with the exit
  status in NVIDIA/NVSentinel issue #1690 and pull request #1692, 2026-08);
- in use, exit 255 (R535 and later): ``The following GPUs could not be reset:`` then
  ``  GPU 00000000:1A:00.0: In use by another client`` and ``1 device is currently being used
  by one or more other processes (e.g. Fabric Manager, CUDA application, ...). Please first
  kill all processes using this device and all compute applications running in the
  system.`` (NVSentinel #1690); older drivers: ``Unable to reset this GPU because it's being
  used by some other process (e.g. CUDA application, graphics application like X server,
  monitoring application like other instance of nvidia-smi). Please first kill all
  processes using this GPU ...`` then ``Terminating early due to previous errors.`` (the
  text users post from R3xx-R470 drivers). Neither names the processes: the caller reads
  them from ``nvidia-smi -q -x`` (``<processes>``), the driver's own list per GPU;
- not supported: ``Resetting GPU 00000000:01:00.0 is not supported.`` (GeForce and other
  boards without the reset path; NVML's NVML_ERROR_NOT_SUPPORTED), and ``GPU Reset couldn't
  run because GPU 00000000:01:00.0 is the primary GPU.``;
- NVLink peers required: nvidia-smi(1) (option ``-r``, the R550 page) says that when Fabric
  Manager is not running, or a GPU predates the Ampere architecture, every GPU with an
  NVLink connection to the one reset must be reset in the same command, and that a
  ``-i`` list that is not the complete NVLink set gets "an error identifying the additional
  GPUs that must be included"; on Ampere NVSwitch systems Fabric Manager facilitates an
  individual reset, and on Hopper and later NVSwitch systems (HGX H100/H200) that
  dependency is removed, so one GPU resets alone. An answer naming other GPUs together with
  NVLink is ``peers_required`` with their addresses; this ladder never widens the reset by
  itself (that would stop other GPUs' guests): the host is marked for the gated reboot;
- anything else (``GPU is lost``, a driver that does not answer, an unknown text):
  ``failed`` with the text; a reset that does not return in its limit is killed with its
  process group (``runner``) and is ``timed_out``: never waited on.

Persistence mode counts as a client of the GPU (NVSentinel #1692: with
nvidia-persistenced holding the GPU the reset is refused as in use; ``nvidia-smi -pm 0 -i``
first, then the reset succeeds): ``set_persistence`` turns it off for the one GPU before the
reset and back on after, as that pull request does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandTimeout,
    QUERY_TIMEOUT_S,
)

# Seconds a reset may take before it is killed and reported: a healthy reset returns in a
# few seconds (NVSentinel's measurements: under 10 s), a GPU stuck in the driver never.
RESET_TIMEOUT_S = 120
OUTCOMES = ("reset", "in_use", "not_supported", "peers_required", "timed_out", "failed")

_BUS = r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_SUCCESS = re.compile(r"^GPU (%s) was successfully reset\.?\s*$" % _BUS, re.M)
_IN_USE = re.compile(r"In use by another client|being used by (?:some other process|one or "
                     r"more other processes)|currently in use", re.I)
_NOT_SUPPORTED = re.compile(r"Resetting GPU (%s) is not supported|is not supported|"
                            r"is the primary GPU" % _BUS, re.I)
_ANY_BUS = re.compile(r"\b(%s)\b" % _BUS)


def normalize(bus):
    """``00000000:1A:00.0`` / ``1a:00.0`` -> ``0000:1a:00.0``."""
    parts = bus.strip().split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    domain, rest = int(parts[0], 16), parts[1:]
    dev, fn = rest[1].split(".")
    return "%04x:%02x:%02x.%s" % (domain, int(rest[0], 16), int(dev, 16), fn)


def reset_argv(nvidia_smi, address):
    return [nvidia_smi, "-r", "-i", address]


def parse(rc, out, err, address):
    """``{outcome, message, peers}`` of one ``nvidia-smi -r -i address`` answer (OUTCOMES;
    ``peers``: other GPUs the driver says must be reset with it)."""
    text = "\n".join(t for t in ((out or "").strip(), (err or "").strip()) if t)
    target = normalize(address)
    message = " ".join(text.split())[:1000] or "no output"
    result = {"outcome": "failed", "message": message, "peers": []}
    done = [normalize(m) for m in _SUCCESS.findall(text)]
    if rc == 0 and target in done:
        result["outcome"] = "reset"
    elif _IN_USE.search(text):
        result["outcome"] = "in_use"
    elif _NOT_SUPPORTED.search(text):
        result["outcome"] = "not_supported"
    elif "nvlink" in text.lower():
        peers = sorted(set(normalize(b) for b in _ANY_BUS.findall(text)) - set([target]))
        if peers:
            result.update(outcome="peers_required", peers=peers)
    elif rc == 0 and not done:
        result["message"] = "exited 0 without naming %s as reset: %s" % (address, message)
    return result


def reset(runner, nvidia_smi, address, timeout=RESET_TIMEOUT_S):
    """Reset GPU ``address``, killed after ``timeout`` s: ``parse``'s result plus
    ``command``, ``rc`` and ``seconds``. Never raises for what the tool answers."""
    argv = reset_argv(nvidia_smi, address)
    started = time.monotonic()
    try:
        rc, out, err = runner.run(argv, check=False, timeout=timeout)
    except CommandTimeout:
        return {"outcome": "timed_out", "peers": [], "rc": None, "command": " ".join(argv),
                "seconds": round(time.monotonic() - started, 3),
                "message": "%s did not return in %s s: killed (a GPU stuck in the driver; "
                           "the gated reboot clears it)" % (" ".join(argv), timeout)}
    result = parse(rc, out, err, address)
    result.update(rc=rc, command=" ".join(argv), seconds=round(time.monotonic() - started, 3))
    return result


def set_persistence(runner, nvidia_smi, address, enabled):
    """``nvidia-smi -pm 1|0 -i address`` (bounded): ``None`` when it worked, else the
    problem as text."""
    argv = [nvidia_smi, "-pm", "1" if enabled else "0", "-i", address]
    try:
        rc, out, err = runner.run(argv, check=False, timeout=QUERY_TIMEOUT_S)
    except CommandTimeout as exc:
        return str(exc)
    if rc != 0:
        return "%s exited %s: %s" % (" ".join(argv), rc, " ".join((err or out or "").split()))
    return None
