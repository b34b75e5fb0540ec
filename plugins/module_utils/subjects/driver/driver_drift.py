# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet check ``fleet_drift``: driver version, VBIOS, running kernel, GPU count and GPU
model across the hosts of one report, and each GPU container's NVIDIA user space against its
host's kernel module (read per host by ``drift.container_facts``: ``containers_nvidia``).

The value most hosts share is the reference; each host that differs is named with its value
(medium). Without such a value (a tie) no host is the odd one out, and the column's note
says so. User space in a container that differs from its host's module is high (CUDA
refuses to start: "driver/library version mismatch")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.fleet_findings import (
    fleet_check,
)

FINDING_ID = "fleet_drift"
ATTRIBUTES = ("driver", "vbios", "kernel", "gpu count", "gpu model")


def _host_values(facts):
    """``{attribute: value}`` of one host's facts (values comparable as text)."""
    nvsmi = facts.get("nvidia_smi") or {}
    smi_gpus = nvsmi.get("gpus") or []
    gpus = facts.get("gpus") or []
    # The PCI id (vendor:device) is there on every host, from sysfs; nvidia-smi's name only
    # where it ran, so the model is compared by id.
    models = sorted(set("%s:%s" % (g.get("vendor"), g.get("device")) for g in gpus))
    vbios = sorted(set(g.get("vbios") for g in smi_gpus if g.get("vbios")))
    return {
        "driver": (facts.get("nvidia") or {}).get("driver_version"),
        "vbios": ", ".join(vbios) or None,
        "kernel": (facts.get("kernel") or {}).get("running"),
        "gpu count": str(len(gpus)) if gpus else None,
        "gpu model": ", ".join(models) or None,
    }


def _majority(values):
    """The value most hosts share (ties: none is the reference)."""
    tally = {}
    for value in values:
        tally[value] = tally.get(value, 0) + 1
    ranked = sorted(tally.items(), key=lambda item: -item[1])
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None, tally
    return ranked[0][0], tally


def fleet_spread(facts):
    """``{attribute: {value: hosts}}`` of the attributes on which the hosts (``{host:
    facts}``) differ."""
    hosts = sorted(facts)
    out = {}
    for attribute in ATTRIBUTES:
        values = dict((h, _host_values(facts[h] or {})[attribute]) for h in hosts)
        values = dict((h, v) for h, v in values.items() if v is not None)
        if len(set(values.values())) >= 2:
            spread = {}
            for host, value in sorted(values.items()):
                spread.setdefault(value, []).append(host)
            out[attribute] = spread
    return out


def fleet_findings(facts):
    """``{host: [finding]}`` of fleet drift for ``{host: facts}``. For each attribute the
    value most hosts share is the reference and every host off it is named; without such a
    value (a tie) no host is the odd one out (:func:`fleet_spread` still shows it). Hosts
    without a value for an attribute (no GPU, no nvidia-smi) are left out of it."""
    out = dict((host, []) for host in facts)
    hosts = sorted(facts)
    for attribute, spread in sorted(fleet_spread(facts).items()):
        tally = dict((value, len(names)) for value, names in spread.items())
        reference, _tally = _majority([v for v, n in tally.items() for _i in range(n)])
        if reference is None:
            continue
        for value, names in sorted(spread.items()):
            if value == reference:
                continue
            others = ", ".join("%s on %d host%s" % (v, n, "" if n == 1 else "s")
                               for v, n in sorted(tally.items()) if v != value)
            for host in names:
                out[host].append({
                    "id": FINDING_ID, "severity": "medium", "subject": attribute,
                    "current": value, "expected": reference,
                    "remedy": "bring %s to the fleet's %s %s (%s)" % (
                        host, attribute, reference, others),
                    "reboot_required": False,
                    "detail": "fleet: %s" % others})
    for host in hosts:
        one = facts[host] or {}
        driver = (one.get("nvidia") or {}).get("driver_version")
        for ct in one.get("containers_nvidia") or []:
            if driver and ct.get("version") and ct["version"] != driver:
                out[host].append({
                    "id": FINDING_ID, "severity": "high", "subject": "lxc %s" % ct["vmid"],
                    "current": "user space %s (%s)" % (ct["version"], ct.get("library")),
                    "expected": "user space %s (the host's kernel module)" % driver,
                    "remedy": "install the NVIDIA %s user-space driver in container %s "
                              "(NVIDIA-Linux-x86_64-%s.run --no-kernel-module), or CUDA "
                              "fails with 'driver/library version mismatch'"
                              % (driver, ct["vmid"], driver),
                    "reboot_required": False})
    return out


def judge(documents, context):
    """Found by the report over its documents: a host whose driver, VBIOS, kernel, GPU
    count or GPU model differs from most hosts' medium (subject: the attribute); a GPU
    container whose user-space driver differs from the host's kernel module high
    (subject ``lxc <vmid>``). The column: the worst with the count, ok when there was
    something to compare, the host's own cell (one host: nothing to compare) otherwise."""
    del context
    facts = dict((doc["host"], doc.get("facts") or {}) for doc in documents)
    found = fleet_findings(facts)
    spread = fleet_spread(facts)
    ties = [a for a, values in sorted(spread.items())
            if _majority([v for v, names in values.items() for _h in names])[0] is None]
    note = "against the %d hosts of this report" % len(documents)
    if ties:
        note += "; no majority for %s" % ", ".join(
            "%s (%s)" % (a, ", ".join(sorted(spread[a]))) for a in ties)
    compared = len(documents) >= 2 or any(f.get("containers_nvidia") for f in facts.values())
    cells = {}
    for doc in documents:
        old = (doc.get("checks") or {}).get(FINDING_ID) or {}
        label = old.get("label") or FLEET_DRIFT.label
        if found.get(doc["host"]):
            cells[doc["host"]] = {"label": label, "note": note}  # status: the worst found
        elif compared:
            cells[doc["host"]] = {"label": label, "status": "ok", "count": 0, "note": note}
        elif old:
            cells[doc["host"]] = dict(old, note="one host: nothing to compare")
    return found, cells


FLEET_DRIFT = fleet_check(FINDING_ID, judge, order=123, severities=("medium", "high"),
                          column=("Fleet drift", 125))
