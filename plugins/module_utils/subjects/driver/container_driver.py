# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA user-space driver inside each GPU container: a reader (a fact, read from
files). Judging it, against the host's kernel module and across the hosts of a report, is
the fleet check ``fleet_drift`` (module_utils/subjects/driver/driver_drift.py).

The user-space driver version each GPU container carries, from the ``libcuda.so.1`` link
in the container's root file system (``libcuda.so.1 -> libcuda.so.590.48.01``). Proxmox
keeps a ZFS subvolume root mounted on the host (``rootfs: local-zfs:subvol-129-disk-0`` ->
``/rpool/data/subvol-129-disk-0``, the pool from ``/etc/pve/storage.cfg``), and a directory
storage's ``.subvol`` under its path; other storage types (LVM, raw images) are only
readable while mounted, so their version is unknown.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path

STORAGE_CFG = "/etc/pve/storage.cfg"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/lib/aarch64-linux-gnu")
LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
_VERSIONED = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)?)$")


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
    for vmid, path in lxc.list_configs(root, config_dir):
        if vmid not in gpu_vmids:
            continue
        if stores is None:
            stores = storages(root)
        config = lxc.LxcConfig.read(path)
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
