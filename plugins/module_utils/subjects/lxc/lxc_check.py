# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column LXC: GPU containers' device rules against /proc/devices, and onboot."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    check,
    column,
    found,
    limit,
)

COLUMN = column(
    "lxc", "LXC", position=110,
    applies=lambda facts, wanted: None if facts.get("lxc") else "no containers in %s" % (
        wanted.get("lxc_config_dir")))


def _subject(ct):
    return "lxc %s" % ct["vmid"]


@check("lxc_stale_majors", COLUMN, severity="high", order=70)
def lxc_stale_majors(facts, wanted):
    """Allow rules for majors /proc/devices no longer registers (a driver moved)."""
    for ct in facts.get("lxc") or []:
        if not ct["stale_majors"]:
            continue
        replace = []
        for drv in ct.get("missing_majors") or []:
            replace.append("c %d:* rwm (%s)" % (drv["major"], drv["driver"]))
        yield found(
            _subject(ct),
            "allows %s, not registered in /proc/devices" % ", ".join(
                "c %d:*" % m for m in ct["stale_majors"]),
            "allow rules for the majors /proc/devices registers now%s" % (
                ": " + ", ".join(replace) if replace else ""),
            "pct stop %s; in %s replace the lxc.cgroup2.devices.allow rules for %s with "
            "the current majors (grep nvidia /proc/devices); pct start %s; or "
            "ansible-playbook %s%s" % (
                ct["vmid"], ct.get("path"), ", ".join(str(m) for m in ct["stale_majors"]),
                ct["vmid"], PLAYBOOK_REBOOT, limit(wanted.get("host"))),
            detail="stale majors: %s" % ", ".join(str(m) for m in ct["stale_majors"]))


@check("lxc_gpu_majors_missing", COLUMN, severity="high", order=80)
def lxc_gpu_majors_missing(facts, wanted):
    for ct in facts.get("lxc") or []:
        if not ct.get("missing_majors"):
            continue
        yield found(
            _subject(ct),
            "no allow rule for %s" % ", ".join(
                "%s (%d)" % (m["driver"], m["major"]) for m in ct["missing_majors"]),
            ", ".join("c %d:* rwm" % m["major"] for m in ct["missing_majors"]),
            "pct stop %s; add %s to %s; pct start %s" % (
                ct["vmid"], "; ".join("lxc.cgroup2.devices.allow: c %d:* rwm" % m["major"]
                                      for m in ct["missing_majors"]),
                ct.get("path"), ct["vmid"]))


@check("lxc_onboot", COLUMN, severity="low", order=150)
def lxc_onboot(facts, wanted):
    for ct in facts.get("lxc") or []:
        if ct.get("gpu") and not ct.get("onboot"):
            yield found(
                _subject(ct), "onboot: 0", "onboot: 1",
                "pct set %s --onboot 1 (else it stays down after every reboot)" % ct["vmid"])


def _legacy_hierarchy(facts):
    """True when the running kernel was booted into systemd's legacy or hybrid cgroup
    hierarchy (``systemd.unified_cgroup_hierarchy=0``), where LXC still applies v1 keys."""
    params = procfs.cmdline_params((facts.get("kernel") or {}).get("cmdline"))
    value = params.get("systemd.unified_cgroup_hierarchy", "1")
    return str(value).strip().lower() in ("0", "false", "no", "off")


@check("lxc_cgroup_v1_keys", COLUMN, severity="high", severities=("high", "low"), order=71)
def lxc_cgroup_v1_keys(facts, wanted):
    """``lxc.cgroup.*`` lines: LXC ignores them on a unified-hierarchy host (the default since
    Proxmox VE 7; VE 9's systemd 257 boots v1 only when forced), so device rules written there
    allow nothing. High when a GPU container's device rule is only there, low otherwise."""
    if _legacy_hierarchy(facts):
        return
    for ct in facts.get("lxc") or []:
        lines = ct.get("cgroup_v1_lines")
        if not lines:
            continue
        yield found(
            _subject(ct),
            "%s ignored (cgroup v1 keys on a cgroup2-only host)" % "; ".join(lines),
            "the same settings as lxc.cgroup2.* keys",
            "pct stop %s; in %s rename each lxc.cgroup. key to lxc.cgroup2. (sed -i "
            "'s/^lxc\\.cgroup\\./lxc.cgroup2./' %s); pct start %s" % (
                ct["vmid"], ct.get("path"), ct.get("path"), ct["vmid"]),
            detail="v1 lines: %d" % len(lines),
            severity="high" if ct.get("gpu") and _v1_only_majors(ct, lines) else "low")


def _v1_only_majors(ct, lines):
    """Majors a v1 ``devices.allow`` line allows that no cgroup2 rule of ``ct`` does: what the
    container loses (rules written under both keys lose nothing)."""
    out = []
    for line in lines:
        key, _sep, value = line.partition(": ")
        rule = lxc.parse_rule(value) if key == lxc.ALLOW_KEY_V1 else None
        if rule and rule["major"] not in (ct.get("allowed_majors") or []):
            out.append(rule["major"])
    return out
