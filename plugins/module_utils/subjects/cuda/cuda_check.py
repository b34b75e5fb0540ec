# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The opt-in CUDA pass (role audit, ``gpuhost_audit_cuda: true``): what ``cuda_probe``
found on the live host and in its running GPU containers, judged here.

The probe results reach the audit as ``facts["cuda"]`` (gathered in the same call by
host_audit's ``cuda_probe``, or given as its ``cuda`` option); an audit of a capture never
probes, so these checks find nothing there. The findings sit in
existing report columns: a failed CUDA init under GPU driver, a slow copy under PCIe link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import (
    gpu_driver_check,
    pcie_link_check,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    PLAYBOOK_TUNE,
    check,
    found,
    limit,
)

DEFAULT_MIN_PCT = 70


def _where(result):
    vmid = result.get("vmid")
    return "lxc %s" % vmid if vmid is not None else "host"


@check("cuda_init_failed", gpu_driver_check.COLUMN, severity="critical", order=56)
def cuda_init_failed(facts, wanted):
    """Critical: CUDA does not initialise on the host or in a running GPU container (the
    probe failed, did not return in its time limit, or was killed by a signal), or it
    initialises but sees none of the GPUs there (a result given to the audit is judged
    against the tree's own GPUs too)."""
    for res in facts.get("cuda") or []:
        # The module's failure message: present exactly when the probe failed (the role
        # registers the results with failed_when false).
        if not res.get("msg"):
            blind = _sees_none(facts, res)
            if blind:
                yield found(_where(res), blind, "cuInit 0 and a context on every GPU",
                            "check that the GPUs' device nodes are there and allowed "
                            "(ansible-playbook %s%s repairs them) and that nothing hides "
                            "them (CUDA_VISIBLE_DEVICES)" % (PLAYBOOK_REBOOT,
                                                             limit(wanted.get("host"))))
            continue
        init = res.get("init") or {}
        step = " (in step: %s)" % res["step"] if res.get("step") else ""
        if res.get("timed_out"):
            current = "no answer in %s s%s: killed" % (res.get("time_limit"), step)
        elif res.get("signal"):
            current = "killed by %s%s" % (res["signal"], step)
        elif init.get("code"):
            current = "cuInit %s %s" % (init["code"], init.get("name"))
        else:
            current = (res.get("msg") or "CUDA probe failed").split(": ", 1)[-1]
            if res.get("cause"):
                current = current.split("; cause: ")[0]     # the cause is the remedy
        remedy = res.get("cause") or "see the probe's message"
        if res.get("vmid") is not None:
            remedy += ("; ansible-playbook %s%s repairs the containers' device rules and "
                       "checks CUDA in each" % (PLAYBOOK_REBOOT, limit(wanted.get("host"))))
        yield found(_where(res), current, "cuInit 0 and a context on every GPU", remedy,
                    detail=res.get("msg"))


def _sees_none(facts, res):
    """What a probe that initialised but saw no GPU says (None when it saw one, or when no
    GPU is there to see): a result given to the audit (host_audit's ``cuda``) is judged
    against the tree's own GPUs, not only against the probe's own error. The host's CUDA
    should see every GPU the driver lists (``gpu_count.driver``; where that cannot be read,
    those bound to nvidia and the host's, ``gpu_count.bus``: GPUs on vfio-pci are not the
    driver's); a GPU container was probed because it has GPUs, so it should see one."""
    if res.get("devices") or (res.get("init") or {}).get("code") not in (0, None):
        return None
    if res.get("init") is None:
        return None
    if res.get("vmid") is not None:
        return "cuInit 0 but CUDA sees no GPU in the container (cuDeviceGetCount 0)"
    count = facts.get("gpu_count") or {}
    if count.get("driver"):
        return "cuInit 0 but CUDA sees 0 of the %s GPUs the driver lists" % count["driver"]
    if count.get("driver") is None and count.get("bus"):
        return "cuInit 0 but CUDA sees 0 of the %s GPUs bound to nvidia on the bus" % (
            count["bus"])
    return None


def _host_mark(dev, wanted):
    """The model's published host<->device pass mark for ``dev`` where its link can carry
    it (the link's ceiling at least the mark), else None (the link percentage judges)."""
    mark = policy.copy_marks(dev.get("name"), wanted.get("copy_rate_marks"))
    if not mark or not mark.get("host_gbs"):
        return None
    if dev.get("link_gbs") is not None and dev["link_gbs"] < mark["host_gbs"]:
        return None
    return mark


@check("pcie_bandwidth_low", pcie_link_check.COLUMN, severity="high", order=57)
def pcie_bandwidth_low(facts, wanted):
    """High: a GPU's measured pinned copy rate is below its model's published pass mark
    (policy.COPY_RATE_MARKS, the operator's ``copy_rate_marks``), or, for a model without
    one or on a link too slow for it, below ``bandwidth_min_pct`` of its link."""
    floor = wanted.get("bandwidth_min_pct") or DEFAULT_MIN_PCT
    for res in facts.get("cuda") or []:
        if res.get("vmid") is not None:
            continue            # the host's measurement is the one for the link
        for dev in res.get("devices") or []:
            mark = _host_mark(dev, wanted)
            low = []
            for direction, label in (("h2d", "H2D"), ("d2h", "D2H")):
                pct, gbs = dev.get(direction + "_pct"), dev.get(direction + "_gbs")
                if (gbs is not None and gbs < mark["host_gbs"]) if mark is not None else (
                        pct is not None and pct < floor):
                    low.append("%s %.1f GB/s%s" % (label, gbs, "" if pct is None
                                                   else " = %.1f %%" % pct))
            if not low:
                continue
            if mark is not None:
                expected = "at least %g GB/s each way (%s pass mark: %s)" % (
                    mark["host_gbs"], mark["model"], mark["source"])
            else:
                expected = "at least %s %% of the link each way" % floor
            yield found(
                dev["pci_bus_id"],
                "%s of %.1f GB/s (%s)" % (
                    ", ".join(low), dev.get("link_gbs") or 0, dev.get("link")),
                expected,
                "check this GPU's MRRS (pcie_mrrs), link (pcie_link_degraded) and the bridges "
                "above it, the IOMMU mode (iommu=pt), and which NUMA node copies; re-measure "
                "with gpuhost.tuning.cuda_probe bandwidth: true",
                detail=dev.get("name"))


def peer_path(facts, res, pair):
    """``(ceiling GB/s or None, "NVLink"/"PCIe ...")`` of the path a peer copy takes: NVLink
    where both GPUs have active links in the ``nvlink`` fact (the smaller of their links'
    added speeds: through an NVSwitch each GPU reaches any peer at its own ceiling), else
    PCIe, the slower of the two GPUs' links (traffic crosses both)."""
    links = dict((g.get("address"), g) for g in (facts.get("nvlink") or {}).get("gpus") or [])
    ends = [links.get(pair.get("from_bus_id")), links.get(pair.get("to_bus_id"))]
    if all(e and e.get("active") for e in ends):
        speeds = [e.get("gbs") for e in ends]
        return (min(speeds) if None not in speeds else None), "NVLink"
    devs = dict((d.get("pci_bus_id"), d) for d in res.get("devices") or [])
    ends = [devs.get(pair.get("from_bus_id")) or {}, devs.get(pair.get("to_bus_id")) or {}]
    speeds = [e.get("link_gbs") for e in ends]
    if None in speeds:
        return None, "PCIe"
    slow = min(ends, key=lambda e: e["link_gbs"])
    return slow["link_gbs"], "PCIe %s" % (slow.get("link") or "link")


def _peer_mark(dev, ceiling, wanted):
    """The model's published peer pass mark where the path can carry it, else None."""
    mark = policy.copy_marks((dev or {}).get("name"), wanted.get("copy_rate_marks"))
    if not mark or not mark.get("peer_gbs"):
        return None
    if ceiling is None or ceiling < mark["peer_gbs"]:
        return None
    return mark


@check("gpu_peer_bandwidth_low", pcie_link_check.COLUMN, severity="high", order=69)
def gpu_peer_bandwidth_low(facts, wanted):
    """High: a GPU -> GPU copy of the peer matrix (the host's probe, ``peers``) is below
    the sending GPU's model's published peer pass mark (``peer_gbs`` of
    policy.COPY_RATE_MARKS or the operator's ``copy_rate_marks``: Azure fails NVLink copies
    below 335 GB/s on H100/H200) where the pair's path can carry the mark, else below
    ``bandwidth_min_pct`` of that path. Subject ``<from> -> <to>``."""
    floor = wanted.get("bandwidth_min_pct") or DEFAULT_MIN_PCT
    for res in facts.get("cuda") or []:
        if res.get("vmid") is not None:
            continue            # the host's matrix is the one for the links
        devs = dict((d.get("pci_bus_id"), d) for d in res.get("devices") or [])
        for pair in res.get("peers") or []:
            gbs = pair.get("gbs")
            if not pair.get("access") or gbs is None:
                continue        # no peer access: p2p_* say why; no copy, no rate
            ceiling, path = peer_path(facts, res, pair)
            dev = devs.get(pair.get("from_bus_id"))
            mark = _peer_mark(dev, ceiling, wanted)
            if mark is not None:
                if gbs >= mark["peer_gbs"]:
                    continue
                expected = "at least %g GB/s (%s peer pass mark: %s)" % (
                    mark["peer_gbs"], mark["model"], mark["source"])
            elif ceiling:
                if 100.0 * gbs / ceiling >= floor:
                    continue
                expected = "at least %s %% of the path (%s, %.1f GB/s)" % (floor, path,
                                                                           ceiling)
            else:
                continue        # neither a mark nor a known ceiling to judge by
            if ceiling:
                pct = " = %.1f %% of %s %.1f GB/s" % (100.0 * gbs / ceiling, path, ceiling)
            else:
                pct = " (%s)" % path
            yield found(
                "%s -> %s" % (pair.get("from_bus_id"), pair.get("to_bus_id")),
                "GPU %s -> GPU %s %.1f GB/s%s" % (pair.get("from"), pair.get("to"), gbs, pct),
                expected,
                "check the pair's NVLinks (nvlink_inactive, nvlink_errors; nvidia-smi topo "
                "-m), the fabric manager on NVSwitch hosts, ACS and the IOMMU on the PCIe "
                "path (p2p_acs_redirect, p2p_iommu_translated); re-measure with "
                "gpuhost.tuning.cuda_probe peer: true",
                detail=(dev or {}).get("name"))


# Launch latency: the median round trip after a sleep against the same GPU's back-to-back
# median. Every launch after a sleep pays a deep idle state's exit (C2 on EPYC: about
# 100 us), so it moves the median; a woken thread's scheduling does not (measured on the
# lent H200, a VM without guest idle states, 3 runs of 2000: p50 12.9-17.2 us after a 1 ms
# sleep against 9.2-9.8 back to back, while the p99 went from 13-17 to 44-55 us).
LATENCY_RATIO = 2.0         # p50 after a sleep above this many times p50 back to back ...
LATENCY_MARGIN_US = 30.0    # ... and at least this much above it


def _count(value):
    return len(value) if isinstance(value, (list, tuple)) else int(value or 0)


def latency_causes(facts, wanted):
    """The host-side causes of a slow first launch after an idle gap that the facts show,
    most likely first (empty when none shows)."""
    cpu = facts.get("cpu") or {}
    idle = cpu.get("cpuidle") or {}
    causes = []
    ref = wanted.get("cpuidle_deeper_than") or "C1"
    states = idle.get("states") or []
    limit_us = None
    for state in states:
        if state.get("name") == ref:
            limit_us = state.get("latency_us")
    deep = [s for s in states if limit_us is not None and s.get("latency_us") is not None
            and s["latency_us"] > limit_us
            and _count(s.get("cpus")) - _count(s.get("cpus_disabled")) > 0]
    if deep:
        causes.append("idle states deeper than %s enabled (%s): a sleeping core wakes from "
                      "them before it can launch (cpuidle_deep_state; ansible-playbook %s%s)"
                      % (ref, ", ".join("%s %s us" % (s["name"], s["latency_us"])
                                        for s in deep), PLAYBOOK_TUNE,
                         limit(wanted.get("host"))))
    freq = cpu.get("cpufreq") or {}
    ramping = ("powersave", "conservative", "ondemand", "schedutil")
    slow = [g for g in freq.get("governors") or [] if g in ramping]
    if slow and freq.get("driver") != "amd-pstate-epp":
        causes.append("cpufreq governor %s lowers the clock of an idle core"
                      % "/".join(slow))
    epp = freq.get("epp") or []
    epp = [e for e in ([epp] if isinstance(epp, str) else epp) if e != "performance"]
    if epp and not slow:
        causes.append("energy-performance preference %s ramps an idle core up slowly"
                      % "/".join(epp))
    return causes


@check("gpu_launch_latency_high", gpu_driver_check.COLUMN, severity="medium", order=58)
def gpu_launch_latency_high(facts, wanted):
    """Medium: an empty kernel's launch-and-synchronise round trip after the calling thread
    slept is far slower (median) than the same GPU's back-to-back round trip: the host, not
    the GPU, adds the time (opt-in CUDA pass)."""
    for res in facts.get("cuda") or []:
        for dev in res.get("devices") or []:
            lat = dev.get("latency") or {}
            asleep, busy = lat.get("sleeping") or {}, lat.get("back_to_back") or {}
            if asleep.get("p50_us") is None or busy.get("p50_us") is None:
                continue
            if asleep["p50_us"] <= max(LATENCY_RATIO * busy["p50_us"],
                                       busy["p50_us"] + LATENCY_MARGIN_US):
                continue
            causes = latency_causes(facts, wanted)
            where = dev["pci_bus_id"] if res.get("vmid") is None else "%s (lxc %s)" % (
                dev["pci_bus_id"], res["vmid"])
            yield found(
                where,
                "launch+sync p50 %.1f us after a %s us sleep, %.1f us back to back (p99 %.1f "
                "against %.1f us)" % (asleep["p50_us"], lat.get("gap_us"), busy["p50_us"],
                                      asleep.get("p99_us"), busy.get("p99_us")),
                "median after a sleep at most %.0fx back to back (and %.0f us above it)"
                % (LATENCY_RATIO, LATENCY_MARGIN_US),
                "; ".join(causes) if causes else
                "no idle-state or frequency cause in the facts: check the BIOS power "
                "profile (global C-states, DF C-states) and which NUMA node the caller "
                "runs on",
                detail=dev.get("name"))
