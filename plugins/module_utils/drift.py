# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version drift: across the hosts of one audit run, and between a host's NVIDIA kernel
module and the user-space driver inside its GPU containers.

Per host (a fact, read from files): the user-space driver version each GPU container
carries, from the ``libcuda.so.1`` link in the container's root file system
(``libcuda.so.1 -> libcuda.so.590.48.01``). Proxmox keeps a ZFS subvolume root mounted on
the host (``rootfs: local-zfs:subvol-129-disk-0`` -> ``/rpool/data/subvol-129-disk-0``,
the pool from ``/etc/pve/storage.cfg``), and a directory storage's ``.subvol`` under its
path; other storage types (LVM, raw images) are only readable while mounted, so their
version is unknown.

Across hosts (the report, :func:`fleet_findings`): driver version, VBIOS, running kernel,
GPU count and GPU model. The value most hosts share is the reference; each host that
differs is named with its value. User space in a container that differs from its host's
module is named for that host (CUDA refuses to start: "driver/library version mismatch").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils import lxc as lxc_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import host_path

STORAGE_CFG = "/etc/pve/storage.cfg"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu")
LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
_VERSIONED = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)?)$")

FINDING_ID = "fleet_drift"
ATTRIBUTES = ("driver", "vbios", "kernel", "gpu count", "gpu model")


def storages(root):
    """``{storage id: {type, pool, path, mountpoint}}`` from ``/etc/pve/storage.cfg``."""
    out = {}
    current = None
    try:
        with hostfs.open_read(host_path(root, STORAGE_CFG), "r", encoding="utf-8",
                              errors="replace") as handle:
            for line in handle:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if not line[:1].isspace() and ":" in line:
                    kind, _sep, name = line.partition(":")
                    current = out.setdefault(name.strip(), {"type": kind.strip()})
                elif current is not None:
                    key, _sep, value = line.strip().partition(" ")
                    current[key] = value.strip()
    except (IOError, OSError):
        return {}
    return out


def rootfs_path(rootfs, stores):
    """Host path of a container's root file system, or ``(None, reason)``."""
    volume = (rootfs or "").split(",", 1)[0]
    storage, _sep, name = volume.partition(":")
    if not name:
        if volume.startswith("/"):
            return volume, None
        return None, "rootfs %r not understood" % rootfs
    store = stores.get(storage)
    if store is None:
        return None, "storage %s not in %s" % (storage, STORAGE_CFG)
    if store["type"] == "zfspool" and store.get("pool"):
        base = store.get("mountpoint") or "/" + store["pool"]
        return base.rstrip("/") + "/" + name, None
    if store["type"] in ("dir", "nfs", "cifs", "cephfs") and name.endswith(".subvol"):
        return (store.get("path") or "").rstrip("/") + "/images/" + name, None
    return None, "rootfs on %s storage %s is not readable from the host while stopped" % (
        store["type"], storage)


def userspace_version(root, fs_path):
    """``(version, library path)`` of the NVIDIA user-space driver under ``fs_path`` (a
    host path), or ``(None, None)``."""
    for folder in LIB_DIRS:
        for lib in LIBS:
            path = host_path(root, fs_path.rstrip("/") + folder + "/" + lib)
            try:
                target = hostfs.readlink(path)
            except OSError:
                continue
            match = _VERSIONED.search(target)
            if match:
                return match.group(1), folder + "/" + lib
    return None, None


def container_facts(root, config_dir, gpu_vmids):
    """``[{vmid, rootfs, path, version, library, note}]`` for the GPU containers."""
    stores = None
    out = []
    for vmid, path in lxc_mod.list_configs(root, config_dir):
        if vmid not in gpu_vmids:
            continue
        if stores is None:
            stores = storages(root)
        config = lxc_mod.LxcConfig.read(path)
        values = config.get_all("rootfs")
        rootfs = values[0] if values else None
        fs_path, reason = rootfs_path(rootfs, stores)
        version = library = None
        if fs_path is not None:
            if not hostfs.isdir(host_path(root, fs_path)):
                reason = "%s not mounted on the host" % fs_path
            else:
                version, library = userspace_version(root, fs_path)
                if version is None:
                    reason = "no libcuda.so.1 under %s" % fs_path
        out.append({"vmid": vmid, "rootfs": rootfs, "path": fs_path, "version": version,
                    "library": library, "note": reason})
    return out


# -----------------------------------------------------------------------------------------
# across hosts


def _host_values(audit):
    """``{attribute: value}`` of one host's audit (values comparable as text)."""
    nvsmi = audit.get("nvidia_smi") or {}
    smi_gpus = nvsmi.get("gpus") or []
    gpus = audit.get("gpus") or []
    # The PCI id (vendor:device) is there on every host, from sysfs; nvidia-smi's name only
    # where it ran, so the model is compared by id.
    models = sorted(set("%s:%s" % (g.get("vendor"), g.get("device")) for g in gpus))
    vbios = sorted(set(g.get("vbios") for g in smi_gpus if g.get("vbios")))
    return {
        "driver": (audit.get("nvidia") or {}).get("driver_version"),
        "vbios": ", ".join(vbios) or None,
        "kernel": (audit.get("kernel") or {}).get("running"),
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


def fleet_spread(audits):
    """``{attribute: {value: hosts}}`` of the attributes on which the hosts differ."""
    hosts = sorted(audits)
    out = {}
    for attribute in ATTRIBUTES:
        values = dict((h, _host_values(audits[h] or {})[attribute]) for h in hosts)
        values = dict((h, v) for h, v in values.items() if v is not None)
        if len(set(values.values())) >= 2:
            spread = {}
            for host, value in sorted(values.items()):
                spread.setdefault(value, []).append(host)
            out[attribute] = spread
    return out


def fleet_findings(audits):
    """``{host: [finding]}`` of fleet drift for ``{host: audit}``. For each attribute the
    value most hosts share is the reference and every host off it is named; without such a
    value (a tie) no host is the odd one out (:func:`fleet_spread` still shows it). Hosts
    without a value for an attribute (no GPU, no nvidia-smi) are left out of it."""
    out = dict((host, []) for host in audits)
    hosts = sorted(audits)
    for attribute, spread in sorted(fleet_spread(audits).items()):
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
        audit = audits[host] or {}
        driver = (audit.get("nvidia") or {}).get("driver_version")
        for ct in audit.get("containers_nvidia") or []:
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


def apply_to_documents(documents, audits):
    """Add each host's fleet drift findings to its report document (``report.host_document``
    dicts, changed in place): the findings, re-ranked, and the ``fleet_drift`` column's
    status (ok, or the worst severity with the count), which ``host_audit`` left n/a."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils import audit as audit_mod
    audits = dict((doc["host"], (audits or {}).get(doc["host"]) or {}) for doc in documents)
    found = fleet_findings(audits)
    spread = fleet_spread(audits)
    ties = [a for a, values in sorted(spread.items())
            if _majority([v for v, names in values.items() for _h in names])[0] is None]
    note = "against the %d hosts of this report" % len(documents)
    if ties:
        note += "; no majority for %s" % ", ".join(
            "%s (%s)" % (a, ", ".join(sorted(spread[a]))) for a in ties)
    for doc in documents:
        mine = found.get(doc["host"]) or []
        checks = doc.setdefault("checks", {})
        old = checks.get(FINDING_ID) or {}
        label = old.get("label") or "Fleet drift"
        if mine:
            doc["findings"] = audit_mod.sort_findings(list(doc.get("findings") or []) + mine)
            worst = min(mine, key=lambda f: audit_mod.SEVERITY_RANK[f["severity"]])["severity"]
            checks[FINDING_ID] = {"label": label, "status": worst, "count": len(mine),
                                  "note": note}
        elif len(documents) >= 2 or any(
                (audits.get(d["host"]) or {}).get("containers_nvidia") for d in documents):
            checks[FINDING_ID] = {"label": label, "status": "ok", "count": 0, "note": note}
        elif old:
            checks[FINDING_ID] = dict(old, note="one host: nothing to compare")
    return documents
