# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host and in its GPU containers, and the driver upgrade's gate
(module driver_state). Read-only: files under a root; no command run but ``modinfo`` for
a ``.ko.zst`` module (``kmod_info``).

Host
- loaded module: ``/proc/driver/nvidia/version`` (``NVRM version: NVIDIA UNIX Open Kernel
  Module for x86_64  580.159.04  Release Build ...``; the proprietary module prints
  ``NVIDIA UNIX x86_64 Kernel Module  590.48.01  <date>``), else
  ``/sys/module/nvidia/version`` (the version only, flavour unknown);
- how it was installed: Debian's packages, NVIDIA's repository packages or the ``.run``
  (``driver_records``: dpkg's status and nvidia-installer's own records);
- DKMS: ``dkms.tree_status`` (``/var/lib/dkms``), the NVIDIA module names only;
- what the next kernel loads (``kmod_info``): the module file modprobe picks
  (``modules.dep``, else depmod's order, ``updates`` first) and the version its ELF
  ``.modinfo`` holds - dkms 3.0.10 can leave the old ``.ko`` where the tree says the new
  one is installed, and only the file decides what boots;
- kernels: the running one and the one that boots next (the audit's rule, ``facts``);
- fabric manager: needed on NVSwitch hosts, its package version
(``subjects/fabric_manager/fabric_manager.py``).

GPU containers (a config that binds nvidia devices, the audit's rule), read from the root
file system on the host without starting the container (``/etc/pve/storage.cfg`` decides
where it lives, ``drift.rootfs_path``; a root ``pct mount`` mounted at
``/var/lib/lxc/<vmid>/rootfs`` is read there). User space comes from LXC's nvidia mount
hook (``lxc.hook.mount`` ``.../hooks/nvidia``: the host's libraries at start), from
``lxc.mount.entry`` binds of the host's library files or folders, or from the root: a
``.run --no-kernel-module`` (nvidia-installer's log inside it) or packages (dpkg status
inside it). The version is the one the loader would load (``driver_records.libraries``:
a real H200 container had CUDA's compat libraries at 580.95.05 under a 580.159.04 module,
off the loader path, so not its user space).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import container_driver
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager import (
    fabric_manager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import kmod_info
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_records import (
    bound_sources,
    check_version,
    dpkg_packages,
    DPKG_STATUS,
    driver_packages,
    driver_side,
    DriverStateError,
    KERNEL_PACKAGES,
    libraries,
    LIBS,
    listed,
    loader_dirs,
    mixed_versions,
    NVIDIA_MAINTAINER,
    nvidia_libraries,
    renamed_source,
    RUN_LOG,
    run_record,
    RUN_UNINSTALL,
    upstream_version,
    USERSPACE_PACKAGES,
    versioned_binds,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

PHASES = ("before_reboot", "after_boot")

PROC_VERSION = "/proc/driver/nvidia/version"
SYS_VERSION = "/sys/module/nvidia/version"
_NVRM = re.compile(r"NVRM version:.*?\b(Open )?Kernel Module(?:\s+for\s+\S+)?\s+"
                   r"([0-9]+(?:\.[0-9]+)+)")
# DKMS names of the NVIDIA module (upstream .run and NVIDIA's Ubuntu packages: nvidia;
# Debian: nvidia-current, nvidia-current-open, nvidia-tesla-<branch>; Ubuntu: nvidia-srv)
DKMS_NAMES = re.compile(r"^nvidia(-current(-open)?|-open|-srv|-tesla(-[0-9]+)?(-open)?)?$")

NVIDIA_HOOK = "/hooks/nvidia"
PCT_MOUNT = "/var/lib/lxc/%s/rootfs"
PYTHON3 = "/usr/bin/python3"


# --------------------------------------------------------------------------- host


def loaded_module(root):
    """``{version, flavour, source}`` of the loaded nvidia module (all None when none)."""
    text = read_text(host_path(root, PROC_VERSION))
    if text:
        match = _NVRM.search(text)
        if match:
            return {"version": match.group(2),
                    "flavour": "open" if match.group(1) else "proprietary",
                    "source": PROC_VERSION}
    text = read_text(host_path(root, SYS_VERSION))
    if text:
        return {"version": text.split()[0], "flavour": None, "source": SYS_VERSION}
    return {"version": None, "flavour": None, "source": None}


def host_installed(root, loaded):
    """``{method, version, packages, evidence}``: how the host's driver was installed."""
    packages = dpkg_packages(root)
    kernel_side = driver_side(packages, KERNEL_PACKAGES)
    user_side = driver_side(packages, USERSPACE_PACKAGES)
    ours = kernel_side + user_side
    run = run_record(root)
    evidence = []
    if run:
        evidence.append(RUN_LOG)
        if hostfs.lexists(host_path(root, RUN_UNINSTALL)):
            evidence.append(RUN_UNINSTALL)
    if ours:
        evidence.append(DPKG_STATUS)
    if run and ours:
        return {"method": "unknown", "version": None, "packages": listed(ours),
                "evidence": evidence,
                "note": "both nvidia-installer's records and driver packages: remove one"}
    if run:
        return {"method": "run", "version": run["version"], "packages": [],
                "evidence": evidence}
    if ours:
        method = "nvidia-repo" if any(NVIDIA_MAINTAINER in p["maintainer"] for p in ours) \
            else "debian"
        versions = [upstream_version(p["version"]) for p in kernel_side + user_side]
        version = next((v for v in versions if v), None)
        return {"method": method, "version": version, "packages": listed(ours),
                "evidence": evidence}
    if loaded.get("version"):
        return {"method": "unknown", "version": None, "packages": [], "evidence": [],
                "note": "a module is loaded but no package or installer record says how "
                        "it was installed"}
    return {"method": "none", "version": None, "packages": [], "evidence": []}


def host_dkms(root):
    """The NVIDIA DKMS modules: ``[{module, version, kernel, arch, state, modules}]``
    (``modules``: the installed ``.ko`` host paths)."""
    return [{"module": e["name"], "version": e["version"], "kernel": e["kernel"],
             "arch": e["arch"], "state": e["state"], "modules": e.get("modules") or []}
            for e in dkms.tree_status(root) if DKMS_NAMES.match(e["name"])]


def next_modules(root, modules, kernel, runner=None):
    """What ``kernel`` (the one that boots next) would load of the NVIDIA DKMS modules
    installed for it: ``kmod_info.picked`` for each module name (dkms.conf's, else the
    installed files'), the file modprobe picks and the version it holds."""
    names = []
    for entry in modules:
        if entry["kernel"] != kernel or entry["state"] != "installed":
            continue
        conf = dkms.read_conf(root, entry["module"], entry["version"], kernel)
        found = [m["dest"] for m in conf["modules"]] if conf and conf.get("modules") else \
            [kmod_info.module_name(p) for p in entry["modules"]]
        names.extend(n for n in found if n and n not in names)
    return kmod_info.picked(root, kernel, names, runner) if names else []


def next_kernel(root):
    """The kernel that boots next, by the audit's rule (``boot_facts.kernel_facts``)."""
    return boot_facts.kernel_facts(root).get("next_boot")


def fabric_manager_state(root):
    needed = bool(fabric_manager.nvswitches(root))
    return {"needed": needed, "version": fabric_manager.package_version(root)[1]}


# --------------------------------------------------------------------------- user space


def _hook(config):
    """``(hooked, note)``: LXC's nvidia mount hook set and active. The hook (lxc's
    hooks/nvidia) exits at once, mounting nothing, when ``NVIDIA_VISIBLE_DEVICES`` is
    unset, empty or ``void`` (``lxc.environment``; an image's legacy ``CUDA_VERSION`` is
    not read here)."""
    if not any((value.split() or [""])[0].endswith(NVIDIA_HOOK)
               for value in config.get_all("lxc.hook.mount")):
        return False, None
    env = dict(v.split("=", 1) for v in config.get_all("lxc.environment") if "=" in v)
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    if visible is None or visible.strip() in ("", "void"):
        return False, ("lxc.hook.mount runs the nvidia hook but NVIDIA_VISIBLE_DEVICES is %s: "
                       "the hook mounts nothing" % ("unset" if visible is None else
                                                    repr(visible)))
    return True, None


def host_userspace(root):
    """``(version, path)`` of the host's own libcuda.so.1 (what the nvidia hook mounts)."""
    libs = libraries(root)
    lib = libs.get(LIBS[0]) or libs.get(LIBS[1])
    return (lib[0], lib[1]) if lib else (None, None)


def root_of(root, vmid, config, stores):
    """``(host path, reason)`` of a container's root file system: its storage's path
    (``drift.rootfs_path``: ZFS subvolume, directory storage's ``.subvol``), else where
    ``pct mount`` puts it. The reason says why it cannot be read."""
    values = config.get_all("rootfs")
    fs_path, reason = container_driver.rootfs_path(values[0] if values else None, stores)
    if fs_path is not None:
        if _has_tree(host_path(root, fs_path)):
            return fs_path, None
        reason = "%s is not there or empty (not mounted on the host?)" % fs_path
    mounted = PCT_MOUNT % vmid
    if _has_tree(host_path(root, mounted)):
        return mounted, None
    return None, "%s; pct mount %s makes it readable at %s" % (reason, vmid, mounted)


def container_root(root, fs_path):
    """The folder on this machine of a container root (host path ``fs_path``), links on
    the way resolved inside the host's root: reads under it then resolve inside the
    container's root (``hostfs``' innermost root), never through a link of the host tree
    that leads out of it."""
    return hostfs.realpath(host_path(root, fs_path))


def _has_tree(path):
    if not hostfs.isdir(path):
        return False
    try:
        return bool(hostfs.listdir(path))
    except OSError:
        return False


def container_userspace(root, config, fs_root_path, host_user, host_libs=None):
    """``{method, version, packages, evidence}`` of one container (``fs_root_path``: its
    root as a host path, None when unreadable; ``host_user``: ``host_userspace``;
    ``host_libs``: the host's ``nvidia_libraries``, which the nvidia hook mounts)."""
    hooked, note = _hook(config)
    if hooked:
        libs = host_libs or []
        return {"method": "hook", "version": host_user[0], "packages": [],
                "evidence": [p for p in ("lxc.hook.mount", host_user[1]) if p],
                "libraries": libs, "mixed": mixed_versions(libs, [])}
    found = _userspace_below(root, config, fs_root_path)
    if note:
        found["note"] = note
    return found


def _userspace_below(root, config, fs_root_path):
    """``container_userspace`` without the hook: bind mounts, then the root."""
    bound = bound_sources(root, config)
    if bound:
        versions = [v for _s, v, _e, _m in bound if v]
        evidence = []
        for _s, _v, paths, _m in bound:
            evidence.extend(p for p in paths if p not in evidence)
        return {"method": "bind-mount", "version": versions[0] if versions else None,
                "packages": [], "evidence": evidence,
                "versions": sorted(set(versions)),
                "versioned": [dict(b, missing=any(s == b["source"] and m
                                                  for s, _v, _e, m in bound))
                              for b in versioned_binds(config)]}
    if fs_root_path is None:
        return {"method": "unknown", "version": None, "packages": [], "evidence": []}
    fs_root = container_root(root, fs_root_path)
    dirs = loader_dirs(fs_root)
    libs = libraries(fs_root, dirs)
    lib = libs.get(LIBS[0]) or libs.get(LIBS[1])
    lib_version = lib[0] if lib else None
    evidence = []
    if lib:
        evidence.extend(p for p in (lib[1], lib[2]) if p not in evidence)
    run = run_record(fs_root)
    installed = dpkg_packages(fs_root)
    packages = driver_side(installed, USERSPACE_PACKAGES)
    every = {"libraries": nvidia_libraries(fs_root, dirs)}
    every["mixed"] = mixed_versions(every["libraries"], driver_packages(installed))
    if run:
        return dict(every, method="installed-run", version=lib_version or run["version"],
                    packages=[], evidence=[RUN_LOG] + evidence)
    if packages:
        versions = [upstream_version(p["version"]) for p in packages]
        return dict(every, method="installed-deb",
                    version=lib_version or next((v for v in versions if v), None),
                    packages=listed(packages), evidence=[DPKG_STATUS] + evidence)
    if lib:
        return dict(every, method="unknown", version=lib_version, packages=[],
                    evidence=evidence)
    return {"method": "none", "version": None, "packages": [], "evidence": []}


def gpu_containers(root, config_dir, vmids=None):
    """``[(vmid, config path, LxcConfig)]``: every GPU container (the audit's rule,
    ``lxc.binds_nvidia``), or those of ``vmids`` (each must have a config)."""
    configs = lxc.list_configs(root, config_dir)
    if vmids:
        known = dict(configs)
        missing = [str(v) for v in vmids if int(v) not in known]
        if missing:
            raise DriverStateError(
                "containers: no config for %s under %s (containers here: %s); %s shows "
                "only this node's containers" % (
                    ", ".join(missing), host_path(root, config_dir),
                    ", ".join(str(v) for v, _p in configs) or "none", config_dir))
        return [(int(v), known[int(v)], lxc.LxcConfig.read(known[int(v)]))
                for v in vmids]
    out = []
    for vmid, path in configs:
        config = lxc.LxcConfig.read(path)
        if lxc.binds_nvidia(config):
            out.append((vmid, path, config))
    return out


def containers_state(root, config_dir, vmids=None):
    """The ``containers`` list of the module's result."""
    stores = None
    host_user = host_libs = None
    out = []
    for vmid, path, config in gpu_containers(root, config_dir, vmids):
        if stores is None:
            stores = container_driver.storages(root)
            host_user = host_userspace(root)
            host_libs = nvidia_libraries(root)
        fs_path, reason = root_of(root, vmid, config, stores)
        try:
            userspace = container_userspace(root, config, fs_path, host_user, host_libs)
        except (IOError, OSError) as exc:  # a FIFO, a file over its cap: named, not read
            fs_path, reason = None, "%s (under %s)" % (exc, fs_path)
            userspace = {"method": "unknown", "version": None, "packages": [],
                         "evidence": []}
        userspace["evidence"] = ["/" + os.path.relpath(path, os.path.abspath(root or "/"))
                                 if e == "lxc.hook.mount" else e for e in userspace["evidence"]]
        if userspace["method"] == "bind-mount":
            userspace["host_version"] = host_user[0]
            userspace["evidence"].insert(0, "/" + os.path.relpath(
                path, os.path.abspath(root or "/")))
        python3 = None
        if fs_path is not None:
            python3 = hostfs.exists(host_path(container_root(root, fs_path), PYTHON3))
        out.append({"vmid": str(vmid), "name": config.get("hostname"),
                    "rootfs": fs_path, "readable": fs_path is not None,
                    "reason": None if fs_path is not None else "root not readable: %s" % reason,
                    "userspace": userspace, "python3": python3})
    return out


# --------------------------------------------------------------------------- the gate


def _dkms_has(modules, target, kernel):
    return [e for e in modules if e["version"] == target and e["kernel"] == kernel
            and e["state"] == "installed" and e["modules"]]


def _dkms_summary(modules, kernel):
    on = ["%s %s %s" % (e["module"], e["version"], e["state"]) for e in modules
          if e["kernel"] == kernel]
    return "; ".join(on) or "nothing"


REWRITE_HINT = "driver_stage with rewrite_bind_mounts: true rewrites it to the staged version"


def _bind_refusals(vmid, user, target):
    """What is wrong with a container's versioned bind mounts (``versioned_binds``): one
    naming another version needs rewriting, one the host lacks binds nothing."""
    out = []
    host = user.get("host_version")
    for bind in user.get("versioned") or []:
        source, version = bind["source"], bind["version"]
        if bind.get("missing") and version == target:
            out.append("%s: lxc.mount.entry binds %s, which is not on the host (LXC skips an "
                       "optional bind, so the container gets no such library): stage the "
                       "host's user space at %s" % (vmid, source, target))
        elif bind.get("missing"):
            out.append("%s: lxc.mount.entry binds %s, which is not on the host (LXC skips an "
                       "optional bind, so the container gets no such library; the host's "
                       "user space is %s): rewrite the entry to %s (%s)" % (
                           vmid, source, host or "not found", renamed_source(source, target),
                           REWRITE_HINT))
        elif version != target:
            out.append("%s: lxc.mount.entry binds %s (%s), target %s: rewrite the entry to "
                       "%s (%s)" % (vmid, source, version, target, renamed_source(source, target),
                                    REWRITE_HINT))
    return out


def _container_refusal(ct, target, phase):
    vmid = ct["vmid"]
    if not ct["readable"]:
        return "%s: %s" % (vmid, ct["reason"])
    user = ct["userspace"]
    method, version = user["method"], user["version"]
    if method == "none":
        return ("%s: no NVIDIA user space (none in its root, no bind mount or nvidia hook), "
                "target %s: stage it" % (vmid, target))
    binds = _bind_refusals(vmid, user, target)
    if binds:
        return "; ".join(binds)
    if method in ("bind-mount", "hook"):
        if user.get("mixed"):
            return ("%s: mixed NVIDIA user space on the host, which the nvidia hook mounts: "
                    "%s; nvidia-smi and CUDA fail with a version mismatch: stage the host's "
                    "user space at %s" % (vmid, ", ".join(user["mixed"]), target))
        if version is None:
            return ("%s: %s of the host's user space, but no NVIDIA library found where it "
                    "binds (%s)" % (vmid, method, ", ".join(user["evidence"][1:]) or "-"))
        others = [v for v in user.get("versions") or [version] if v != target]
        if others:
            return ("%s: user space %s, target %s (%s of the host's): stage the host's "
                    "user space" % (vmid, others[0], target, method))
        return None
    if user.get("mixed"):
        return ("%s: mixed NVIDIA user space in its root (%s): %s; nvidia-smi and CUDA "
                "fail with a version mismatch: reinstall all of it at %s and remove what "
                "is left of the others" % (vmid, method, ", ".join(user["mixed"]), target))
    if version != target:
        return "%s: user space %s, target %s (%s): stage it" % (
            vmid, version or "of unknown version", target, method)
    return None


def gate(state, target, phase):
    """``{ok, refusals}`` for ``target`` in ``phase`` (see the module's documentation)."""
    refusals = []
    host = state["host"]
    if phase == "before_reboot":
        kernel = host["kernels"]["next"]
        if not kernel:
            refusals.append("host: the kernel that boots next is not known: give next_kernel")
        elif not _dkms_has(host["dkms"], target, kernel):
            refusals.append(
                "host: nvidia %s not installed by DKMS for the next kernel %s (.ko files and "
                "state installed; there: %s): stage it" % (
                    target, kernel, _dkms_summary(host["dkms"], kernel)))
        else:
            name = _dkms_has(host["dkms"], target, kernel)[0]["module"]
            for item in host.get("next_modules") or []:
                refusal = kmod_info.judge(item, target, kernel, name)
                if refusal:
                    refusals.append(refusal)
    else:
        loaded = host["loaded"]
        if loaded["version"] != target:
            refusals.append("host: loaded module %s, target %s%s" % (
                loaded["version"] or "none", target,
                " (%s)" % loaded["source"] if loaded["source"] else
                " (no %s)" % PROC_VERSION))
    fm = host["fabricmanager"]
    if fm["needed"] and fm["version"] != target:
        refusals.append("host: fabric manager %s, target %s (NVSwitch host): stage "
                        "nvidia-fabricmanager %s" % (fm["version"] or "not installed",
                                                     target, target))
    for ct in state["containers"]:
        refusal = _container_refusal(ct, target, phase)
        if refusal:
            refusals.append(refusal)
    return {"ok": not refusals, "refusals": refusals}


# --------------------------------------------------------------------------- all of it


def driver_state(root="/", target_version=None, next_kernel_release=None,
                 phase="before_reboot", containers=None, config_dir=lxc.DEFAULT_CONFIG_DIR,
                 runner=None):
    """The module's result (``host``, ``containers``, ``gate`` when ``target_version``).
    ``runner``: for ``modinfo`` on a ``.ko.zst`` only (everything else is read here)."""
    if target_version is not None:
        check_version("target_version", target_version)
    if phase not in PHASES:
        raise DriverStateError("phase: %r is not one of %s" % (phase, ", ".join(PHASES)))
    root = root or "/"
    loaded = loaded_module(root)
    installed = host_dkms(root)
    upcoming = next_kernel_release or next_kernel(root)
    host = {
        "loaded": loaded,
        "installed": host_installed(root, loaded),
        "dkms": installed,
        "kernels": {"running": kernels.running_kernel(root), "next": upcoming},
        "next_modules": next_modules(root, installed, upcoming, runner) if upcoming else [],
        "fabricmanager": fabric_manager_state(root),
    }
    state = {"host": host, "containers": containers_state(root, config_dir, containers)}
    if target_version is not None:
        state["gate"] = gate(state, target_version, phase)
    return state
