# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column Device nodes: what GPU containers bind exists when they start (``devnodes``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_TUNE,
    check,
    column,
    found,
    limit,
)


def _applies(facts, wanted):
    fact = facts.get("device_nodes") or {}
    if not fact.get("containers"):
        return "no container binds an NVIDIA device node"
    if not fact.get("available"):
        return "device nodes not read: %s" % (fact.get("error") or "no listing")
    return None


def _note(facts):
    fact = facts.get("device_nodes") or {}
    notes = ["lxc %s: gid= not checked (%s)" % (ct["vmid"], ct["groups_note"])
             for ct in fact.get("containers") or [] if ct.get("groups_note")]
    return "; ".join(notes) or None


COLUMN = column("device_nodes", "Device nodes", position=113, applies=_applies, note=_note)


def _containers(facts):
    return (facts.get("device_nodes") or {}).get("containers") or []


@check("lxc_device_node_missing", COLUMN, severity="high", order=131)
def lxc_device_node_missing(facts, wanted):
    """A node a GPU container binds is not on the host: a devN entry (or a mount entry
    without ``optional``) stops the container's start, an optional bind starts it without
    the device (CUDA fails inside)."""
    for ct in _containers(facts):
        for node in ct["nodes"]:
            if node.get("kind") != "missing":
                continue
            late = bool(device_nodes.LATE.match(node["path"]))
            effect = ("the container does not start (\"Device %s does not exist\")"
                      % node["path"] if not node["optional"] else
                      "the container starts without it (CUDA fails inside)")
            remedy = ("run nvidia-modprobe -u -c=0 (nvidia-uvm), nvidia-modprobe -m "
                      "(nvidia-modeset) or nvidia-smi (nvidiaN, nvidiactl) now, then pct "
                      "reboot %s; " % ct["vmid"]) if late else (
                "load the driver of %s or remove the %s entry from the config; " % (
                    node["path"], node["how"]))
            if late:
                remedy += ("for every boot a unit ordered Before=pve-guests.service: "
                           "ansible-playbook %s%s -e gpuhost_tune_device_nodes=true "
                           "--tags tune_device_nodes"
                           % (PLAYBOOK_TUNE, limit(wanted.get("host"))))
            yield found(
                "lxc %s %s" % (ct["vmid"], node["path"]),
                "%s binds %s; not on the host" % (node["how"], node["path"]),
                "a character device at %s when the container starts" % node["path"],
                remedy, detail=effect)


@check("lxc_device_node_major", COLUMN, severity="high", order=132)
def lxc_device_node_major(facts, wanted):
    """A bound node that is not a character device, or whose major is not the one its driver
    has in /proc/devices (a node made by a static mknod before the driver's major moved)."""
    for ct in _containers(facts):
        for node in ct["nodes"]:
            kind = node.get("kind")
            if kind in (None, "missing") or node.get("folder"):
                continue
            if kind != "c":
                yield found(
                    "lxc %s %s" % (ct["vmid"], node["path"]),
                    "%s is %s, not a character device" % (
                        node["path"], {"f": "a regular file", "d": "a folder",
                                       "b": "a block device", "l": "a link"}.get(
                                           kind, "another kind of file")),
                    "a character device",
                    "remove %s (an lxc create=file placeholder or a copy), then run "
                    "nvidia-modprobe (or nvidia-smi) so the driver creates it; pct reboot %s"
                    % (node["path"], ct["vmid"]))
                continue
            majors = node.get("majors") or []
            if majors and node.get("major") not in majors:
                yield found(
                    "lxc %s %s" % (ct["vmid"], node["path"]),
                    "%s is %d:%d" % (node["path"], node["major"], node["minor"]),
                    "major %s (%s in /proc/devices)" % (
                        " or ".join(str(m) for m in majors), node.get("driver")),
                    "rm %s; nvidia-modprobe (or nvidia-smi) recreates it with the driver's "
                    "major; drop any static mknod script; pct reboot %s" % (
                        node["path"], ct["vmid"]))


@check("lxc_dev_gid_unknown", COLUMN, severity="medium", order=133)
def lxc_dev_gid_unknown(facts, wanted):
    """A devN entry's ``gid=`` is not a group of the container's own /etc/group (the node
    belongs to no group the container's users are in)."""
    for ct in _containers(facts):
        if not ct.get("groups_source"):
            continue
        for node in ct["nodes"]:
            gid = node.get("gid")
            if gid is None or node.get("group"):
                continue
            yield found(
                "lxc %s %s" % (ct["vmid"], node["path"]),
                "%s gid=%s: no such group in %s" % (node["how"], gid, ct["groups_source"]),
                "gid= of a group in the container (render or video: "
                "getent group render inside it)",
                "pct set %s --%s %s,gid=<the container's render or video gid>; "
                "pct reboot %s" % (ct["vmid"], node["how"], node["path"], ct["vmid"]))


def _late_bound(facts):
    """``{path: [vmids]}`` of late nodes bound by containers that start at boot."""
    out = {}
    for ct in _containers(facts):
        if not ct.get("onboot"):
            continue
        for node in ct["nodes"]:
            if device_nodes.LATE.match(node["path"]):
                out.setdefault(node["path"], []).append(ct["vmid"])
    return out


@check("device_nodes_unit_missing", COLUMN, severity="medium", order=134)
def device_nodes_unit_missing(facts, wanted):
    """Containers that start at boot bind late nodes (nvidia-uvm, nvidia-modeset,
    nvidiaN) and no enabled unit ordered Before=pve-guests.service (nor a udev rule)
    creates them."""
    late = _late_bound(facts)
    if not late:
        return
    units = [u for u in (facts.get("device_nodes") or {}).get("units") or []
             if u.get("enabled") and u.get("before_guests")]
    made = set()
    for unit in units:
        made |= set(unit.get("creates") or [])
    uncovered = sorted(p for p in late if not device_nodes.covers(made, p))
    if not uncovered:
        return
    vmids = sorted(set(v for p in uncovered for v in late[p]))
    others = [u["name"] for u in (facts.get("device_nodes") or {}).get("units") or []
              if u not in units]
    yield found(
        "pve-guests.service",
        "nothing creates %s before pve-guests.service starts containers %s" % (
            ", ".join(uncovered), ", ".join(str(v) for v in vmids)),
        "an enabled unit ordered Before=pve-guests.service running nvidia-modprobe -u -c=0, "
        "nvidia-modprobe -m and nvidia-smi",
        "ansible-playbook %s%s -e gpuhost_tune_device_nodes=true --tags tune_device_nodes "
        "(installs %s)" % (PLAYBOOK_TUNE, limit(wanted.get("host")), device_nodes.UNIT_NAME),
        detail=("units that create nodes but are not enabled or not ordered before "
                "pve-guests.service: %s" % ", ".join(others)) if others else None)


@check("lxc_dev_char_links_missing", COLUMN, severity="medium", order=135)
def lxc_dev_char_links_missing(facts, wanted):
    """A nesting container (Docker inside) binds NVIDIA nodes that have no
    /dev/char/<major>:<minor> link: runc's systemd cgroup driver loses them on
    ``systemctl daemon-reload`` (nvidia-container-toolkit #48)."""
    for ct in _containers(facts):
        if not ct.get("nesting"):
            continue
        bad = ["/dev/char/%d:%d (%s)" % (n["major"], n["minor"], n["path"])
               for n in ct["nodes"] if n.get("kind") == "c"
               and n["path"].startswith("/dev/nvidia") and n.get("char_link") != "ok"]
        if not bad:
            continue
        yield found(
            "lxc %s" % ct["vmid"],
            "features: nesting=1; no /dev/char link for %s" % ", ".join(bad),
            "/dev/char/<major>:<minor> -> the node for every NVIDIA node",
            "nvidia-ctk system create-dev-char-symlinks --create-all on the host and inside "
            "the container (NVIDIA Container Toolkit), or a udev rule; then restart Docker in "
            "lxc %s" % ct["vmid"])
