# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots of everything the tune role manages, and their exact restore.

A snapshot records, under a root: the Max Read Request Size and Device Control word of
every GPU and bridge the tune role touches, the ``disable`` flag of every idle state of
every online CPU (by state name), each managed sysctl, each persistence file, link or
folder the tune role may create (content and mode, or that it does not exist), and the
live ``lxc.cgroup2.cpuset.cpus``/``.mems`` lines of every GPU container (as written, or
that there are none).

Files in ``<root>/var/lib/gpuhost/`` (JSON, one document each)::

    original.json              the first snapshot ever taken; never overwritten
    snapshot-<UTC time>.json   later "before" snapshots, only when the host drifted from
                               the last recorded state (so a re-run of tune writes nothing)
    applied.json               the state tune left (rewritten when it differs); removed by a
                               restore, since the host is no longer in that state

Restore writes the recorded values back through the same readers and writers the tune
modules use (masked MRRS write with read-back, per-CPU idle flags with read-back, sysctls
with read-back), puts files back as recorded (removing those that did not exist), puts
each container's cpuset lines back byte for byte (its other lines as they are now), tries
every item, and reports each.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils import cpu as cpu_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import cpu_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import lxc as lxc_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import pci as pci_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import pci_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import placement_write
from ansible_collections.gpuhost.tuning.plugins.module_utils import sysctl as sysctl_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import sysctl_write
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
    OUTPUT_LIMIT,
    PathError,
    atomic_write,
    host_path,
    inside_root,
    open_read,
    read_bytes,
    under_root,
)

SCHEMA = 1
SNAPSHOT_DIR = "/var/lib/gpuhost"
ORIGINAL = "original.json"
APPLIED = "applied.json"
PREFIX = "snapshot-"
# What the tune role may create; a snapshot records whether each exists and what it holds.
MANAGED_FILES = (
    "/etc/sysctl.d/99-gpuhost-tuning.conf",
    "/etc/systemd/system/gpuhost-tuning.service",
    "/etc/systemd/system/multi-user.target.wants/gpuhost-tuning.service",
    "/etc/gpuhost-tuning",
    "/etc/gpuhost-tuning/boot.json",
    "/usr/local/lib/gpuhost-tuning",
    "/etc/modules-load.d/gpuhost-nvidia-peermem.conf",
    # the device_nodes part (devnodes_write.FILES)
    "/etc/systemd/system/gpuhost-nvidia-device-nodes.service",
    "/etc/systemd/system/multi-user.target.wants/gpuhost-nvidia-device-nodes.service",
)


def managed_files(sysctl_file=None):
    """MANAGED_FILES plus the sysctl file tune writes (when it is another one), so a
    snapshot records an operator's file before tune may take it over."""
    files = list(MANAGED_FILES)
    if sysctl_file and sysctl_file not in files:
        files.append(sysctl_file)
    return files


class SnapshotError(Exception):
    """A snapshot could not be read, written or found; the message names the file."""


# ---------------------------------------------------------------------------------------
# recording


def record_file(root, path):
    """``{"type": "absent"|"file"|"link"|"dir", ...}`` for a host path: files with their
    content as base64, mode and owner; links with their target and owner; folders with
    mode and owner; an absent path with ``parent``, the nearest folder above it that exists
    (a restore removes the folders created below that one, once empty)."""
    full = under_root(root, path, "snapshot file", follow=False)
    if os.path.islink(full):
        st = os.lstat(full)
        return {"type": "link", "target": os.readlink(full), "uid": st.st_uid,
                "gid": st.st_gid}
    if os.path.isdir(full):
        st = os.stat(full)
        return {"type": "dir", "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid,
                "gid": st.st_gid}
    data = read_bytes(full)
    if data is None:
        parent = os.path.dirname(path.rstrip("/")) or "/"
        while parent != "/" and not os.path.isdir(host_path(root, parent)):
            parent = os.path.dirname(parent)
        return {"type": "absent", "parent": parent}
    st = os.stat(full)
    return {"type": "file", "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid,
            "gid": st.st_gid, "content_b64": base64.b64encode(data).decode("ascii")}


def same_file(now, rec):
    """Whether the path is as ``rec`` recorded it (fields a record lacks are not compared:
    snapshots taken before owners were recorded still match)."""
    if now["type"] != rec["type"]:
        return False
    if rec["type"] == "absent":
        return True
    return all(now.get(key) == rec[key]
               for key in ("target", "mode", "uid", "gid", "content_b64") if key in rec)


def record_pcie(root, vendor, classes, include_upstream):
    """``[{address, role, vendor, device, mrrs, devctl}]`` (devices without a PCIe
    capability or SR-IOV VFs are left out: they have no MRRS to restore)."""
    query = pci_write.tune_mrrs(root, size=4096, vendor=vendor, classes=classes,
                                include_upstream=include_upstream, state="query")
    return [dict(address=d["address"], role=d["role"], vendor=d["vendor"], device=d["device"],
                 mrrs=d["before"], devctl=d["devctl_before"])
            for d in query["devices"] if d["before"] is not None]


def record_cpuidle(root):
    """``{"driver": ..., "cpus": {"<cpu>": {"<state name>": disabled}}}`` for online CPUs."""
    states = cpu_mod.read_states(root)
    cpus = {}
    for cpu in sorted(states):
        cpus[str(cpu)] = dict((s["name"], s["disabled"]) for s in states[cpu])
    return {"driver": cpu_mod.cpuidle_driver(root), "cpus": cpus}


def collect(root, sysctl_keys=(), vendor=pci_mod.NVIDIA_VENDOR, classes=pci_mod.GPU_CLASSES,
            include_upstream=True, files=MANAGED_FILES,
            lxc_config_dir=lxc_mod.DEFAULT_CONFIG_DIR):
    """The current state of everything managed (the ``state`` of a snapshot document)."""
    state = {
        "pcie": record_pcie(root, vendor, classes, include_upstream),
        "cpuidle": record_cpuidle(root),
        "sysctl": sysctl_mod.read_many(root, sysctl_keys),
        "files": dict((path, record_file(root, path)) for path in files),
    }
    pins = placement_write.pin_record(root, lxc_config_dir)
    if pins:  # a host without GPU containers records what it recorded before
        state["placement"] = pins
    return state


def summarize(state):
    """A short view of a state for results and reports: MRRS per device, idle state name ->
    CPUs where disabled, sysctls, which files exist."""
    disabled = {}
    for cpu, flags in sorted(state["cpuidle"]["cpus"].items(), key=lambda i: int(i[0])):
        for name, flag in flags.items():
            entry = disabled.setdefault(name, [])
            if flag:
                entry.append(int(cpu))
    return {
        "pcie": dict((d["address"], d["mrrs"]) for d in state["pcie"]),
        "cpuidle_driver": state["cpuidle"]["driver"],
        "cpuidle_cpus": len(state["cpuidle"]["cpus"]),
        "cpuidle_disabled": dict((n, cpu_mod.format_cpu_list(c)) for n, c in disabled.items()),
        "sysctl": dict(state["sysctl"]),
        "files": dict((p, f["type"]) for p, f in state["files"].items()),
        "placement": dict((vmid, dict((key.rsplit(".", 1)[1], _line_value(lines))
                                      for key, lines in keys.items()))
                          for vmid, keys in (state.get("placement") or {}).items()),
    }


def _line_value(lines):
    """The value lxc uses (the last line's), None without a line."""
    if not lines:
        return None
    return lxc_mod.Line(lines[-1], "", None).value


# ---------------------------------------------------------------------------------------
# the snapshot folder


def snapshot_dir(root, folder=SNAPSHOT_DIR):
    try:
        return under_root(root, folder, "snapshot dir")
    except PathError as exc:
        raise SnapshotError(str(exc))


def load(path, root=None):
    """The snapshot document at ``path``, checked (see ``check_document``)."""
    try:
        with open_read(path, "r", OUTPUT_LIMIT) as handle:
            doc = json.load(handle)
    except (IOError, OSError) as exc:
        raise SnapshotError("cannot read snapshot %s: %s" % (path, exc))
    except UnicodeDecodeError as exc:
        raise SnapshotError("snapshot %s is not UTF-8 text: %s" % (path, exc))
    except ValueError as exc:
        raise SnapshotError("snapshot %s is not valid JSON: %s" % (path, exc))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or "state" not in doc:
        raise SnapshotError("%s is not a gpuhost.tuning snapshot (schema %s)" % (path, SCHEMA))
    check_document(doc, path, root)
    return doc


_FILE_TYPES = ("absent", "file", "link", "dir")


def check_document(doc, path, root=None):
    """Every entry of a snapshot checked before a restore acts on any: types, PCI addresses,
    MRRS sizes, CPU numbers, sysctl keys, and file paths that stay under ``root``.
    Raises SnapshotError naming the snapshot and the first bad entry."""
    def bad(what):
        raise SnapshotError("snapshot %s is damaged or was edited: %s; nothing was restored "
                            "(restore another snapshot: tuning_snapshot state=query lists them)"
                            % (path, what))
    state = doc["state"]
    if not isinstance(state, dict):
        bad("state is not a mapping")
    for dev in state.get("pcie") or []:
        if not isinstance(dev, dict) or not isinstance(dev.get("address"), str) or \
                not pci_mod._SYSFS_BDF_RE.match(dev["address"]):
            bad("pcie entry %r has no valid PCI address" % (dev,))
        if dev.get("mrrs") not in pci_write.MRRS_SIZES:
            bad("pcie %s: MRRS %r is not one of %s" % (dev["address"], dev.get("mrrs"),
                                                       list(pci_write.MRRS_SIZES)))
    idle = state.get("cpuidle") or {"cpus": {}}
    if not isinstance(idle, dict) or not isinstance(idle.get("cpus", {}), dict):
        bad("cpuidle is not a mapping of CPU to flags")
    for cpu, flags in (idle.get("cpus") or {}).items():
        if not str(cpu).isdigit() or int(cpu) > 65535 or not isinstance(flags, dict):
            bad("cpuidle CPU %r is not a CPU number with flags" % (cpu,))
        for name, flag in flags.items():
            if not isinstance(name, str) or "/" in name or not isinstance(flag, bool):
                bad("cpuidle CPU %s state %r: flag %r" % (cpu, name, flag))
    sysctls = state.get("sysctl") or {}
    if not isinstance(sysctls, dict):
        bad("sysctl is not a mapping")
    for key, value in sysctls.items():
        try:
            sysctl_mod.key_path("/", key)
            if not isinstance(key, str) or any(c.isspace() or ord(c) < 32 for c in key):
                raise ValueError(key)
        except ValueError:
            bad("sysctl key %r" % (key,))
        if value is not None and (not isinstance(value, str) or "\n" in value):
            bad("sysctl %s value %r" % (key, value))
    files = state.get("files") or {}
    if not isinstance(files, dict):
        bad("files is not a mapping")
    for fpath, rec in files.items():
        if not isinstance(fpath, str) or not fpath.startswith("/") or \
                ".." in fpath.split("/"):
            bad("file path %r is not an absolute host path without '..'" % (fpath,))
        if root is not None:
            try:
                under_root(root, fpath, "snapshot file", follow=False)
            except PathError as exc:
                bad(str(exc))
        if not isinstance(rec, dict) or rec.get("type") not in _FILE_TYPES:
            bad("file %s: type %r is not one of %s" % (fpath, (rec or {}).get("type"),
                                                       ", ".join(_FILE_TYPES)))
        if rec["type"] == "file":
            try:
                base64.b64decode(rec.get("content_b64", ""), validate=True)
                mode = int(rec.get("mode"), 8)
            except (TypeError, ValueError):
                bad("file %s: content or mode unreadable" % fpath)
            if not 0 <= mode <= 0o7777:
                bad("file %s: mode %s" % (fpath, rec["mode"]))
        if rec["type"] == "link" and (not isinstance(rec.get("target"), str)
                                      or not rec["target"] or "\0" in rec["target"]):
            bad("link %s: target %r" % (fpath, rec.get("target")))
        for key in ("uid", "gid"):
            if key in rec and (not isinstance(rec[key], int) or rec[key] < 0):
                bad("%s %s: %s %r" % (rec["type"], fpath, key, rec[key]))
    pins = state.get("placement") or {}
    if not isinstance(pins, dict):
        bad("placement is not a mapping of container to cpuset lines")
    for vmid, keys in pins.items():
        if not str(vmid).isdigit() or not isinstance(keys, dict):
            bad("placement container %r is not a VMID with its cpuset lines" % (vmid,))
        for key, lines in keys.items():
            if key not in placement_write.PIN_KEYS or not isinstance(lines, list):
                bad("placement lxc %s: key %r" % (vmid, key))
            for raw in lines:
                line = lxc_mod.Line(raw, "", None) if isinstance(raw, str) else None
                if line is None or "\n" in raw or line.kind != "kv" or line.key != key:
                    bad("placement lxc %s: %r is not one %s line" % (vmid, raw, key))


def listing(root, folder=SNAPSHOT_DIR):
    """Snapshot file names in the folder: original first, then the others oldest first,
    applied last (names sort by time)."""
    base = snapshot_dir(root, folder)
    try:
        names = os.listdir(base)
    except OSError:
        return []
    later = sorted(n for n in names if n.startswith(PREFIX) and n.endswith(".json"))
    out = [ORIGINAL] if ORIGINAL in names else []
    out += later
    if APPLIED in names:
        out.append(APPLIED)
    return out


def last_recorded(root, folder=SNAPSHOT_DIR):
    """The file name of the newest recorded state (applied, else the newest snapshot, else
    the original), or None."""
    names = listing(root, folder)
    return names[-1] if names else None


def resolve(root, name, folder=SNAPSHOT_DIR):
    """``original``, ``latest`` (newest before-snapshot), a file name in the folder (``.json``
    optional) or a host path -> the file's full path. Raises SnapshotError when missing."""
    base = snapshot_dir(root, folder)
    name = (name or "original").strip()
    if name == "original":
        path = os.path.join(base, ORIGINAL)
    elif name == "latest":
        names = [n for n in listing(root, folder) if n != APPLIED]
        if not names:
            raise SnapshotError("no snapshot in %s: run the tune playbook first" % base)
        path = os.path.join(base, names[-1])
    elif "/" in name:
        path = host_path(root, name)
    elif name in (".", "..") or name.startswith("."):
        raise SnapshotError("snapshot name %r: give original, latest or a file name in %s"
                            % (name, base))
    else:
        path = os.path.join(base, name if name.endswith(".json") else name + ".json")
    if not inside_root(root, path):
        raise SnapshotError("snapshot %s resolves to %s, outside root %s: refused"
                            % (name, os.path.realpath(path), root))
    if not os.path.isfile(path):
        have = ", ".join(listing(root, folder)) or "none"
        raise SnapshotError("snapshot %s not found at %s (snapshots there: %s)"
                            % (name, path, have))
    return path


def _document(kind, root, state):
    return {"schema": SCHEMA, "kind": kind,
            "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "root": root, "state": state}


def _write(path, doc):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    atomic_write(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", mode=0o644,
                 preserve=False)


def _new_name(base):
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = "%s%s.json" % (PREFIX, stamp)
    count = 1
    while os.path.exists(os.path.join(base, name)):
        name = "%s%s-%d.json" % (PREFIX, stamp, count)
        count += 1
    return name


def take(root, kind="before", folder=SNAPSHOT_DIR, check_mode=False, **selection):
    """Record the current state.

    ``kind="before"`` (ahead of any change): the first snapshot ever becomes
    ``original.json``; after that a ``snapshot-<time>.json`` is written only when the state
    differs from the last recorded one. ``kind="applied"`` (after tuning): ``applied.json``
    rewritten when it differs. Returns ``{changed, path (written or null), original, state}``.
    """
    if kind not in ("before", "applied"):
        raise ValueError("invalid snapshot kind %r: use before or applied" % (kind,))
    base = snapshot_dir(root, folder)
    state = collect(root, **selection)
    original = os.path.join(base, ORIGINAL)
    target = None
    if kind == "applied":
        current = os.path.join(base, APPLIED)
        if not os.path.isfile(current) or load(current)["state"] != state:
            target = current
    elif not os.path.isfile(original):
        target = original
    else:
        last = os.path.join(base, last_recorded(root, folder))
        if load(last)["state"] != state:
            target = os.path.join(base, _new_name(base))
    if target and not check_mode:
        _write(target, _document("original" if target == original else kind, root, state))
    return {"changed": target is not None,
            "path": None if target is None else os.path.join(folder, os.path.basename(target)),
            "original": os.path.join(folder, ORIGINAL),
            "state": state}


# ---------------------------------------------------------------------------------------
# restoring


def _restore_pcie(root, devices, check_mode, out, failures):
    for rec in devices:
        entry = {"address": rec["address"], "role": rec["role"], "wanted": rec["mrrs"]}
        try:
            dev = pci_mod.PciDevice(root, rec["address"])
            plan = pci_write.plan_mrrs(dev, rec["mrrs"])
            if not plan["pcie"]:
                raise pci_mod.PciError("PCI device %s has no PCI Express capability now"
                                       % rec["address"])
            entry["before"] = plan["before"]
            if not plan["changed"]:
                entry.update(after=plan["before"], status="ok")
            elif check_mode:
                entry.update(after=rec["mrrs"], status="changed")
            else:
                done = pci_write.set_mrrs(dev, rec["mrrs"])
                entry.update(after=done["after"], status="changed")
        except (pci_mod.PciError, ValueError, OSError) as exc:
            entry.update(status="failed", reason=str(exc))
            failures.append(str(exc))
        out.append(entry)


def _restore_cpuidle(root, recorded, check_mode, out, failures):
    if not recorded["cpus"]:
        return
    if not cpu_mod.cpuidle_available(root):
        out.append({"name": "*", "status": "skipped", "cpus_restored": "",
                    "reason": "no cpuidle driver with states now (%s): idle flags not restored"
                              % (cpu_mod.cpuidle_driver(root) or "no cpuidle folder")})
        return
    current = cpu_mod.read_states(root)
    to_disable, to_enable, offline = {}, {}, []
    per_name = {}
    for cpu_text, flags in recorded["cpus"].items():
        cpu = int(cpu_text)
        if cpu not in current:
            offline.append(cpu)
            continue
        by_name = dict((s["name"], s) for s in current[cpu])
        for name, disabled in flags.items():
            entry = per_name.setdefault(name, {"name": name, "restored": [], "missing": []})
            state = by_name.get(name)
            if state is None:
                entry["missing"].append(cpu)
            elif state["disabled"] != disabled:
                (to_disable if disabled else to_enable).setdefault(cpu, []).append(state)
                entry["restored"].append(cpu)
    errors = []
    for selection, disabled in ((to_disable, True), (to_enable, False)):
        if not selection:
            continue
        try:
            cpu_write.set_states(root, selection, disabled, check_mode=check_mode)
        except cpu_mod.CpuError as exc:
            errors.append(str(exc))
    for name in sorted(per_name):
        entry = per_name[name]
        status = "changed" if entry["restored"] else "ok"
        item = {"name": name, "cpus_restored": cpu_mod.format_cpu_list(entry["restored"]),
                "status": status}
        if entry["missing"]:
            item["status"] = "failed"
            item["reason"] = "idle state %s not found any more on CPUs %s" % (
                name, cpu_mod.format_cpu_list(entry["missing"]))
            failures.append(item["reason"])
        out.append(item)
    if offline:
        out.append({"name": "*", "status": "skipped", "cpus_restored": "",
                    "reason": "CPUs %s are offline now: their idle flags are not restored"
                              % cpu_mod.format_cpu_list(offline)})
    for error in errors:
        out.append({"name": "*", "status": "failed", "cpus_restored": "", "reason": error})
        failures.append(error)


def _restore_sysctl(root, recorded, check_mode, out, failures):
    values = dict((k, v) for k, v in recorded.items() if v is not None)
    for key in sorted(k for k, v in recorded.items() if v is None):
        out.append({"key": key, "before": sysctl_mod.read_sysctl(root, key), "wanted": None,
                    "after": sysctl_mod.read_sysctl(root, key), "status": "ok",
                    "reason": "the key did not exist when the snapshot was taken"})
    for entry in sysctl_write.apply_values(root, values, check_mode=check_mode):
        if entry["status"] == "failed":
            failures.append(entry["reason"])
        out.append(entry)


def _owner(full, rec, link=False):
    """Give ``full`` the recorded owner (when recorded and different)."""
    if "uid" not in rec:
        return
    st = os.lstat(full)
    if (st.st_uid, st.st_gid) != (rec["uid"], rec.get("gid", st.st_gid)):
        (os.lchown if link else os.chown)(full, rec["uid"], rec.get("gid", st.st_gid))


def _created_folders(root, path, stop):
    """The folders between ``path`` and ``stop`` (the nearest folder above ``path`` that
    existed when the snapshot was taken) that exist now, deepest first: folders a tune run
    created (a restore removes those that are empty)."""
    found = []
    folder = os.path.dirname(path.rstrip("/"))
    while folder not in ("/", "") and folder != stop and folder.startswith(stop.rstrip("/") + "/"):
        full = host_path(root, folder)
        if os.path.isdir(full) and not os.path.islink(full):
            found.append(folder)
        folder = os.path.dirname(folder)
    return found


def _empty_created_folders(root, path, stop):
    """``_created_folders`` that hold nothing now (or only other such empty folders)."""
    empty = []
    for folder in _created_folders(root, path, stop):
        try:
            names = os.listdir(host_path(root, folder))
        except OSError:
            break
        if any(folder + "/" + name not in empty for name in names):
            break
        empty.append(folder)
    return empty


def _remove_empty_parents(root, path, stop):
    """Remove the folders between ``path`` and ``stop`` that are empty now; a folder that
    holds anything (the operator's files) stays, and so does every folder above it.
    Returns the host paths removed."""
    removed = []
    for folder in _empty_created_folders(root, path, stop):
        try:
            os.rmdir(host_path(root, folder))
        except OSError:
            break
        removed.append(folder)
    return removed


def _remove_folder(root, path, full):
    """Remove a folder the snapshot records as absent: the files gpuhost.tuning installed
    in it (bootservice.installed_paths) and its empty subfolders. A folder that holds any
    other file stays, with a message naming them."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils import bootservice
    ours = set(bootservice.installed_paths(root))
    left, remove = [], []
    for current, dirs, names in os.walk(full):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            host = path.rstrip("/") + "/" + os.path.relpath(os.path.join(current, name), full)
            (remove if host in ours else left).append(host)
    if left:
        raise IOError("holds %d file(s) that gpuhost.tuning did not install (%s): left in "
                      "place; move them away and run the revert again"
                      % (len(left), ", ".join(sorted(left)[:5])))
    for host in remove:
        os.unlink(host_path(root, host))
    for current, _dirs, _names in sorted(os.walk(full), key=lambda w: -len(w[0])):
        os.rmdir(current)


def _put_file(root, path, rec):
    full = under_root(root, path, "snapshot file", follow=False)
    if os.path.lexists(full):
        if os.path.isdir(full) and not os.path.islink(full):
            if rec["type"] != "dir":
                _remove_folder(root, path, full)
        elif rec["type"] != "file":
            os.unlink(full)
    if rec["type"] == "absent":
        return
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    if rec["type"] == "link":
        os.symlink(rec["target"], full)
        _owner(full, rec, link=True)
    elif rec["type"] == "dir":
        if not os.path.isdir(full):
            os.mkdir(full, 0o700)
        os.chmod(full, int(rec.get("mode", "0755"), 8))
        _owner(full, rec)
    else:
        atomic_write(full, base64.b64decode(rec["content_b64"]), mode=int(rec["mode"], 8),
                     preserve=False)
        _owner(full, rec)


def _restore_files(root, recorded, check_mode, out, failures):
    for path in sorted(recorded):
        rec = recorded[path]
        now = record_file(root, path)
        entry = {"path": path, "before": now["type"], "after": rec["type"]}
        if same_file(now, rec) or (rec["type"] == "dir" and now["type"] == "dir"
                                   and "mode" not in rec):
            entry["status"] = "ok"
        else:
            entry["status"] = "changed"
            if not check_mode:
                try:
                    _put_file(root, path, rec)
                except (IOError, OSError) as exc:
                    entry.update(status="failed", reason="%s: %s" % (path, exc))
                    failures.append(entry["reason"])
        out.append(entry)
    # Folders a tune run created above absent paths go once empty (deepest first, after
    # every path is back), also when the path itself was already removed (boot_service
    # absent runs before the restore). Folders that existed, or hold anything, stay.
    parents = sorted(set((path, rec["parent"]) for path, rec in recorded.items()
                         if rec["type"] == "absent" and rec.get("parent")),
                     key=lambda item: -item[0].count("/"))
    for path, parent in parents:
        if check_mode:
            folders = _empty_created_folders(root, path, parent)
        else:
            try:
                folders = _remove_empty_parents(root, path, parent)
            except (IOError, OSError) as exc:
                failures.append("%s: %s" % (path, exc))
                continue
        for folder in folders:
            if folder not in recorded and not any(e["path"] == folder for e in out):
                out.append({"path": folder, "before": "dir", "after": "absent",
                            "status": "changed", "reason": "empty folder the tune run created"})


def _placement_to_restore(root, folder, path, state):
    """The snapshot's cpuset lines per container, completed from the later before-snapshots
    (oldest first) for containers it does not hold."""
    pins = dict(state.get("placement") or {})
    base = snapshot_dir(root, folder)
    names = [n for n in listing(root, folder) if n != APPLIED]
    here = os.path.basename(path)
    for name in names[names.index(here) + 1:] if here in names else []:
        try:
            later = load(os.path.join(base, name), root)["state"].get("placement") or {}
        except SnapshotError:
            continue
        for vmid, keys in later.items():
            pins.setdefault(vmid, keys)
    return pins


def _applied_placement(root, folder):
    """The cpuset lines per container as the last tune left them (``applied.json``), so
    the revert can tell the tune's lines from an operator's later ones: ``{}`` without it."""
    path = os.path.join(snapshot_dir(root, folder), APPLIED)
    if not os.path.isfile(path):
        return {}
    try:
        return load(path, root)["state"].get("placement") or {}
    except SnapshotError:
        return {}


def revert_placement(root, folder=SNAPSHOT_DIR):
    """``(cpuset lines per container, snapshot path)`` that a revert to the original
    (the role's default) puts back: ``({}, path)`` when there is no snapshot yet."""
    base = snapshot_dir(root, folder)
    path = os.path.join(base, ORIGINAL)
    if not os.path.isfile(path):
        names = [n for n in listing(root, folder) if n != APPLIED]
        if not names:
            return {}, os.path.join(folder, ORIGINAL)
        path = os.path.join(base, names[0])
    state = load(path, root)["state"]
    return (_placement_to_restore(root, folder, path, state),
            os.path.join(folder, os.path.basename(path)))


def restore(root, name="original", folder=SNAPSHOT_DIR, check_mode=False, parts=None,
            lxc_config_dir=lxc_mod.DEFAULT_CONFIG_DIR):
    """Put the host back as snapshot ``name`` recorded it (see ``resolve``).

    ``parts`` limits it to some of ``pcie``, ``cpuidle``, ``sysctl``, ``files``,
    ``placement``. Every item is tried; returns ``{changed, snapshot, taken_at, pcie,
    cpuidle, sysctl, files, placement, failures}`` (each item with ``status`` ok, changed,
    skipped or failed and a ``reason``). After a full restore ``applied.json`` is removed
    (the host is not in the applied state any more).

    A container the snapshot does not hold (one it predates, or a snapshot taken before
    cpuset lines were recorded) gets the lines of the oldest later before-snapshot that
    holds it: the state before the tune run that first saw it.
    """
    path = resolve(root, name, folder)
    doc = load(path, root)
    state = doc["state"]
    parts = set(parts or PARTS)
    result = {"snapshot": os.path.join(folder, os.path.basename(path)),
              "taken_at": doc.get("taken_at"), "pcie": [], "cpuidle": [], "sysctl": [],
              "files": [], "placement": []}
    failures = []
    if "pcie" in parts:
        _restore_pcie(root, state.get("pcie") or [], check_mode, result["pcie"], failures)
    if "cpuidle" in parts:
        _restore_cpuidle(root, state.get("cpuidle") or {"cpus": {}}, check_mode,
                         result["cpuidle"], failures)
    if "sysctl" in parts:
        _restore_sysctl(root, state.get("sysctl") or {}, check_mode, result["sysctl"], failures)
    if "files" in parts:
        _restore_files(root, state.get("files") or {}, check_mode, result["files"], failures)
    if "placement" in parts:
        pins = _placement_to_restore(root, folder, path, state)
        done = placement_write.pin_restore(root, pins, lxc_config_dir, check_mode,
                                           _applied_placement(root, folder))
        result["placement"] = done["containers"]
        failures.extend(done["failures"])
    changed = any(item["status"] == "changed" for key in PARTS for item in result[key])
    applied = os.path.join(snapshot_dir(root, folder), APPLIED)
    if os.path.isfile(applied) and parts >= set(PARTS) and not failures:
        changed = True
        result["removed"] = os.path.join(folder, APPLIED)
        if not check_mode:
            os.unlink(applied)
    result["changed"] = changed
    result["failures"] = failures
    return result


# ---------------------------------------------------------------------------------------
# the tuning_snapshot pass (modules tuning_snapshot and host_tune)

PARTS = ("pcie", "cpuidle", "sysctl", "files", "placement")


def snapshot_spec():
    """Option spec of module tuning_snapshot (its defaults fill ``snapshot_run``'s params)."""
    spec = dict(
        state=dict(type="str", choices=["present", "restore", "query"], default="present"),
        kind=dict(type="str", choices=["before", "applied"], default="before"),
        snapshot=dict(type="str", default="original"),
        parts=dict(type="list", elements="str", choices=list(PARTS), default=list(PARTS)),
        dir=dict(type="path", default=SNAPSHOT_DIR),
        sysctl_keys=dict(type="list", elements="str", default=[], no_log=False),
    )
    spec.update(argspec.device_selection())
    spec["files"] = dict(type="list", elements="path", default=list(MANAGED_FILES))
    spec.update(placement_write.PIN_OPTIONS)
    spec.update(argspec.root())
    return spec


def restore_diff(result):
    """Before (the host now) / after (the snapshot) of every item a restore changed."""
    before, after = [], []
    for item in result["pcie"]:
        if item["status"] == "changed":
            before.append("MRRS %s: %s\n" % (item["address"], item.get("before")))
            after.append("MRRS %s: %s\n" % (item["address"], item.get("after")))
    for item in result["cpuidle"]:
        if item["status"] == "changed":
            before.append("cpuidle %s: current flags on CPUs %s\n"
                          % (item["name"], item["cpus_restored"]))
            after.append("cpuidle %s: snapshot flags on CPUs %s\n"
                         % (item["name"], item["cpus_restored"]))
    for item in result["sysctl"]:
        if item["status"] == "changed":
            before.append("%s = %s\n" % (item["key"], item["before"]))
            after.append("%s = %s\n" % (item["key"], item["after"]))
    for item in result["files"]:
        if item["status"] == "changed":
            before.append("%s: %s\n" % (item["path"], item["before"]))
            after.append("%s: %s\n" % (item["path"], item["after"]))
    for item in result.get("placement") or []:
        if item["status"] == "changed":
            before.append("lxc %s: %s\n" % (item["vmid"], " | ".join(item["before"]) or "none"))
            after.append("lxc %s: %s\n" % (item["vmid"], " | ".join(item["after"]) or "none"))
    return {"before_header": "host (now)", "after_header": result["snapshot"],
            "before": "".join(before), "after": "".join(after)}


def snapshot_run(params, check_mode=False):
    """The whole tuning_snapshot pass for ``params`` (the module's options; missing ones take
    its defaults). Returns the module's result; a failure is returned, not raised
    (``failed`` and ``msg``; see ``snapshot_failure``). A restore carries ``diff``."""
    p = argspec.fill(snapshot_spec(), params)
    root = p["root"]
    try:
        if p["state"] == "query":
            result = {"changed": False}
        elif p["state"] == "present":
            taken = take(root, kind=p["kind"], folder=p["dir"], check_mode=check_mode,
                         sysctl_keys=p["sysctl_keys"], vendor=p["vendor"],
                         classes=p["classes"], include_upstream=p["include_upstream"],
                         files=p["files"], lxc_config_dir=p["lxc_config_dir"])
            result = {"changed": taken["changed"], "path": taken["path"],
                      "original": taken["original"], "summary": summarize(taken["state"])}
        else:
            result = restore(root, name=p["snapshot"], folder=p["dir"],
                             check_mode=check_mode, parts=p["parts"],
                             lxc_config_dir=p["lxc_config_dir"])
            result["diff"] = restore_diff(result)
        result["snapshots"] = listing(root, p["dir"])
    except (SnapshotError, pci_mod.PciError, cpu_mod.CpuError, lxc_mod.LxcError, ValueError,
            OSError) as exc:
        return {"failed": True, "msg": str(exc), "changed": False}
    if result.get("failures"):
        result["failed"] = True
        result["msg"] = "restore of %s incomplete: %d item(s) did not take: %s" % (
            result["snapshot"], len(result["failures"]), "; ".join(result["failures"][:10]))
    return result


def snapshot_failure(result):
    """The failure message of a ``snapshot_run`` result, or None when it took."""
    return result.get("msg") if result.get("failed") else None


# --- the tune parts (module host_tune; protocol in tune.py) -------------------------------

_SNAPSHOT_OPTIONS = dict(placement_write.PIN_OPTIONS,
                         snapshot_dir=dict(type="path", default=SNAPSHOT_DIR))


def _tune_snapshot(ctx, kind, check_mode):
    p = ctx.params
    return snapshot_run(dict(ctx.selection, state="present", kind=kind, dir=p["snapshot_dir"],
                             sysctl_keys=list(p["sysctl"]),
                             files=managed_files(p["sysctl_file"]),
                             lxc_config_dir=p["lxc_config_dir"], root=ctx.root), check_mode)


class BeforePart(object):
    """Record everything the tune parts manage before any of them runs; when it cannot be
    recorded nothing else runs (nothing is changed on a host whose state is unknown)."""

    name = "snapshot"
    owns = ()
    steps = ("snapshot_before",)
    stage = "before"
    options = _SNAPSHOT_OPTIONS

    def run(self, ctx):
        taken = _tune_snapshot(ctx, "before", ctx.check_mode)
        out = {"changed": bool(taken.get("changed")), "detail": {"snapshot_before": taken}}
        msg = snapshot_failure(taken)
        if msg:
            out["failures"] = ["snapshot: %s (nothing was changed)" % msg]
            out["fields"] = {"snapshot": "FAILED: %s" % msg}
        else:
            out["fields"] = {"snapshot": taken.get("path") or (
                "unchanged since the last recorded state; original: %s" % taken.get("original"))}
        return out

    def not_run(self, ctx, status):
        return {"fields": {"snapshot":
                           "unchanged since the last recorded state; original: not taken"}}


class AppliedPart(object):
    """Record the applied state, only when a tune part changed the host (planned in check
    mode)."""

    name = "snapshot"
    owns = ()
    steps = ("snapshot_applied",)
    stage = "after"
    options = _SNAPSHOT_OPTIONS

    def run(self, ctx):
        if not ctx.changed:
            return {}
        if ctx.check_mode:
            taken = {"changed": True, "path": None,
                     "msg": "check mode: applied state not recorded"}
        else:
            taken = _tune_snapshot(ctx, "applied", False)
        out = {"changed": bool(taken.get("changed")), "detail": {"snapshot_applied": taken}}
        if taken.get("failed"):
            out["failures"] = ["snapshot_applied: %s" % str(taken.get("msg") or "failed").strip()]
        return out

    def not_run(self, ctx, status):
        return {}


BEFORE_PART = BeforePart()
APPLIED_PART = AppliedPart()
