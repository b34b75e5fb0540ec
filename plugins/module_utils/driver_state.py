# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a host and in its GPU containers, and the driver upgrade's gate
(module driver_state). Read-only: files under a root, no command run.

Host
- loaded module: ``/proc/driver/nvidia/version`` (``NVRM version: NVIDIA UNIX Open Kernel
  Module for x86_64  580.159.04  Release Build ...``; the proprietary module prints
  ``NVIDIA UNIX x86_64 Kernel Module  590.48.01  <date>``), else
  ``/sys/module/nvidia/version`` (the version only, flavour unknown);
- how it was installed: dpkg's status (Debian's packages, maintainer
  ``Debian NVIDIA Maintainers``, DKMS module ``nvidia-current``; NVIDIA's repository
  packages, maintainer ``NVIDIA <cudatools@nvidia.com>``), or nvidia-installer's own
  records (the ``.run``): its backup log ``/var/lib/nvidia/log``, whose first line is
  ``1.0-<digits> (<version>)`` and second the driver's description, and the
  ``/usr/bin/nvidia-uninstall`` link to nvidia-installer (nvidia-installer's backup.c);
- DKMS: ``dkms.tree_status`` (``/var/lib/dkms``), the NVIDIA module names only;
- kernels: the running one and the one that boots next (the audit's rule, ``facts``);
- fabric manager: needed on NVSwitch hosts, its package version (``fabric.py``).

GPU containers (a config that binds nvidia devices, the audit's rule), read from the root
file system on the host without starting the container (``/etc/pve/storage.cfg`` decides
where it lives, ``drift.rootfs_path``; a root ``pct mount`` mounted at
``/var/lib/lxc/<vmid>/rootfs`` is read there). User space comes from LXC's nvidia mount
hook (``lxc.hook.mount`` ``.../hooks/nvidia``: the host's libraries at start), from
``lxc.mount.entry`` binds of the host's library files or folders, or from the root: a
``.run --no-kernel-module`` (nvidia-installer's log inside it) or packages (dpkg status
inside it). The version is the one the loader would load: ``libcuda.so.1`` followed
inside the root in the folders the loader searches (the default ones and
``/etc/ld.so.conf``'s). CUDA's forward-compatibility libraries (``cuda-compat-*``,
``/usr/local/cuda-*/compat``) are not the user space unless the loader path selects them
(a real H200 container had 580.95.05 there under a 580.159.04 module).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils import dkms as dkms_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import drift as drift_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import fabric as fabric_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils import kernel as kernel_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils import lxc as lxc_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import host_path, read_text

PHASES = ("before_reboot", "after_boot")
# NVIDIA's driver versions: 580.95.05, 535.183.01, 550.54.14, 390.157, 550.54
VERSION_RE = re.compile(r"^[0-9]{3}\.[0-9]{2,3}(\.[0-9]{2})?$")
VERSION_WANTED = ("an NVIDIA driver version NNN.NN.NN or NNN.NN such as 590.48.01 (a Debian "
                  "package version such as 590.48.01-1~deb12u1 without its revision)")

PROC_VERSION = "/proc/driver/nvidia/version"
SYS_VERSION = "/sys/module/nvidia/version"
_NVRM = re.compile(r"NVRM version:.*?\b(Open )?Kernel Module(?:\s+for\s+\S+)?\s+"
                   r"([0-9]+(?:\.[0-9]+)+)")

DPKG_STATUS = "/var/lib/dpkg/status"
RUN_LOG = "/var/lib/nvidia/log"             # nvidia-installer's BACKUP_LOG
RUN_UNINSTALL = "/usr/bin/nvidia-uninstall"  # the .run's link to nvidia-installer
NVIDIA_MAINTAINER = "@nvidia.com"           # NVIDIA <cudatools@nvidia.com>

# Packages of the kernel side (Debian, NVIDIA's Debian and Ubuntu repositories) and of the
# user space; cuda-compat-*, libxnvctrl0 (nvidia-settings) and the like are neither.
KERNEL_PACKAGES = re.compile(
    r"^(nvidia-kernel-dkms|nvidia-open-kernel-dkms|nvidia-kernel-open-dkms|"
    r"nvidia-tesla-[0-9]+-kernel-dkms|nvidia-dkms-[0-9]+(-server)?(-open)?|"
    r"nvidia-kernel-source(-[0-9]+)?(-open)?|nvidia-kernel-common-[0-9]+(-server)?)$")
USERSPACE_PACKAGES = re.compile(
    r"^(libcuda1|libnvidia-ml1|nvidia-smi|nvidia-driver(-bin|-cuda|-libs)?|"
    r"nvidia-driver-[0-9]+(-server)?(-open)?|libnvidia-compute-[0-9]+(-server)?|"
    r"nvidia-utils-[0-9]+(-server)?|nvidia-tesla-[0-9]+-driver|cuda-drivers(-[0-9]+)?|"
    r"libnvidia-cfg1(-[0-9]+)?|nvidia-persistenced|nvidia-cuda-mps)$")
# DKMS names of the NVIDIA module (upstream .run and NVIDIA's Ubuntu packages: nvidia;
# Debian: nvidia-current, nvidia-current-open, nvidia-tesla-<branch>; Ubuntu: nvidia-srv)
DKMS_NAMES = re.compile(r"^nvidia(-current(-open)?|-open|-srv|-tesla(-[0-9]+)?(-open)?)?$")

# Where the loader looks without ld.so.conf (Debian/Ubuntu multiarch, then the rest)
LOADER_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
               "/lib", "/usr/lib", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
# Debian keeps the files in a private folder behind update-alternatives' links
PRIVATE_DIRS = ("/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib/nvidia/current")
LD_SO_CONF = "/etc/ld.so.conf"
LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
_SO_VERSION = re.compile(r"\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$")
_NVIDIA_LIB = re.compile(r"^(libcuda|libnvidia-[A-Za-z0-9_-]+)\.so(\.[0-9.]+)?$")
NVIDIA_HOOK = "/hooks/nvidia"
PCT_MOUNT = "/var/lib/lxc/%s/rootfs"
PYTHON3 = "/usr/bin/python3"
_INCLUDE_MAX = 64   # ld.so.conf files followed at most (includes of includes)


class DriverStateError(ValueError):
    """A bad option (a version that is not one, a container that has no config)."""


def check_version(option, value):
    """Refuse (DriverStateError naming ``option``) what is not an NVIDIA driver version."""
    if not isinstance(value, str) or not VERSION_RE.match(value):
        raise DriverStateError("%s: %r is not %s" % (option, value, VERSION_WANTED))
    return value


def upstream_version(version):
    """The driver version of a Debian package version: ``590.48.01-1~deb12u1`` ->
    ``590.48.01`` (epoch and revision dropped); None when what is left is not one."""
    text = (version or "").split(":", 1)[-1]
    if "-" in text:
        text = text.rsplit("-", 1)[0]
    return text if VERSION_RE.match(text) else None


def so_version(name):
    """``libcuda.so.590.48.01`` -> ``590.48.01``; None for ``libcuda.so.1``."""
    match = _SO_VERSION.search(name or "")
    return match.group(1) if match and VERSION_RE.match(match.group(1)) else None


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


def dpkg_packages(fs_root):
    """Installed packages of the dpkg status under ``fs_root`` (a folder on this machine):
    ``[{name, version, maintainer, source}]``; None when there is no status file. Read a
    line at a time under the stored-output cap (a full host's status is a few MiB)."""
    path = host_path(fs_root, DPKG_STATUS)
    out = []
    fields = {}

    def take():
        if "installed" in fields.get("Status", "").split() and fields.get("Package"):
            out.append({"name": fields["Package"], "version": fields.get("Version", ""),
                        "maintainer": fields.get("Maintainer", ""),
                        "source": fields.get("Source", "").split(" ", 1)[0] or None})

    try:
        with hostfs.open_read(path, "r", hostfs.OUTPUT_LIMIT, encoding="utf-8",
                              errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    take()
                    fields = {}
                elif not line[:1].isspace() and ":" in line:
                    key, _sep, value = line.partition(":")
                    if key in ("Package", "Status", "Version", "Maintainer", "Source"):
                        fields[key] = value.strip()
            take()
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) in (2, 20):  # ENOENT, ENOTDIR
            return None
        raise
    return out


_RUN_VERSION = re.compile(r"(?:^|[\s(])([0-9]+(?:\.[0-9]+){1,3})(?:$|[\s)])")


def run_record(fs_root):
    """nvidia-installer's backup log under ``fs_root``: ``{version, description, path,
    kernel_modules}`` (``kernel_modules``: whether it installed ``.ko`` files, i.e. not
    ``--no-kernel-module``), or None when absent. The first line is ``1.0-5904801
    (590.48.01)``: the version in parentheses (older installers: ``1.0-9742`` only)."""
    path = host_path(fs_root, RUN_LOG)
    try:
        with hostfs.open_read(path, "r", encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
            description = handle.readline().strip()
            kos = False
            for line in handle:
                head, _sep, name = line.partition(": ")
                if head.strip().isdigit() and ".ko" in name and "/lib/modules/" in name:
                    kos = True
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) in (2, 20):
            return None
        raise
    found = [m for m in _RUN_VERSION.findall(first) if len(m) >= 5]
    return {"version": found[-1] if found else None, "description": description or None,
            "path": RUN_LOG, "kernel_modules": kos}


def _packages(found, pattern):
    return [p for p in found or [] if pattern.match(p["name"])]


def _listed(packages):
    return [{"name": p["name"], "version": p["version"]} for p in packages]


def host_installed(root, loaded):
    """``{method, version, packages, evidence}``: how the host's driver was installed."""
    packages = dpkg_packages(root)
    kernel_side = _packages(packages, KERNEL_PACKAGES)
    user_side = _packages(packages, USERSPACE_PACKAGES)
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
        return {"method": "unknown", "version": None, "packages": _listed(ours),
                "evidence": evidence,
                "note": "both nvidia-installer's records and driver packages: remove one"}
    if run:
        return {"method": "run", "version": run["version"], "packages": [],
                "evidence": evidence}
    if ours:
        method = "nvidia-repo" if any(NVIDIA_MAINTAINER in p["maintainer"] for p in ours) \
            else "debian"
        versions = [upstream_version(p["version"]) for p in kernel_side or user_side]
        version = next((v for v in versions if v), None)
        return {"method": method, "version": version, "packages": _listed(ours),
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
            for e in dkms_mod.tree_status(root) if DKMS_NAMES.match(e["name"])]


def next_kernel(root):
    """The kernel that boots next, by the audit's rule (``facts.kernel_facts``)."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils import facts as facts_mod
    return facts_mod.kernel_facts(root).get("next_boot")


def fabric_manager(root):
    needed = bool(fabric_mod.nvswitches(root))
    return {"needed": needed, "version": fabric_mod.package_version(root)[1]}


# --------------------------------------------------------------------------- user space


def _conf_dirs(fs_root, path, seen, out):
    """Folders ``path`` (an ld.so.conf inside the root) lists, includes followed."""
    if path in seen or len(seen) >= _INCLUDE_MAX:
        return
    seen.add(path)
    text = read_text(host_path(fs_root, path))
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line.split(None, 1)[1].strip() if " " in line else ""
            if not pattern.startswith("/"):
                pattern = os.path.join(os.path.dirname(path), pattern)
            folder, name = os.path.split(pattern)
            try:
                names = sorted(hostfs.listdir(host_path(fs_root, folder)))
            except OSError:
                continue
            for entry in names:
                if fnmatch.fnmatch(entry, name):
                    _conf_dirs(fs_root, folder + "/" + entry, seen, out)
        elif line.startswith("/"):
            out.append(line.rstrip("/") or "/")


def loader_dirs(fs_root):
    """The folders the loader searches inside ``fs_root``: ``/etc/ld.so.conf``'s (includes
    followed) first, then the default ones, then Debian's private NVIDIA folders."""
    out = []
    _conf_dirs(fs_root, LD_SO_CONF, set(), out)
    for folder in list(LOADER_DIRS) + list(PRIVATE_DIRS):
        if folder not in out:
            out.append(folder)
    return out


def _resolved_version(fs_root, path):
    """``(version, final path)`` of ``path`` followed inside ``fs_root`` (links resolved
    there, as the loader inside the container would), or ``(None, None)`` when missing."""
    target = kernel_mod.resolve_under(fs_root, path)
    if target is None or not hostfs.isfile(target):
        return None, None
    final = "/" + os.path.relpath(target, os.path.abspath(fs_root)) if fs_root != "/" \
        else target
    return so_version(os.path.basename(final)), final


def libraries(fs_root):
    """``{lib: (version, path as the loader finds it, final file)}`` for libcuda.so.1 and
    libnvidia-ml.so.1: the first folder of the loader's search that holds each."""
    found = {}
    for folder in loader_dirs(fs_root):
        for lib in LIBS:
            if lib in found:
                continue
            path = folder.rstrip("/") + "/" + lib
            version, final = _resolved_version(fs_root, path)
            if final:
                found[lib] = (version, path, final)
    return found


def _bound_sources(root, config):
    """Live ``lxc.mount.entry`` binds of NVIDIA user-space files or folders of the host:
    ``[(source, version or None, evidence paths)]``."""
    out = []
    for entry in config.mount_entries():
        source = entry.get("source") or ""
        if not source.startswith("/") or source.startswith("/dev/"):
            continue
        name = os.path.basename(source.rstrip("/"))
        if _NVIDIA_LIB.match(name) or name == "nvidia-smi":
            version = so_version(name)
            final = source
            if version is None and name != "nvidia-smi":
                version, final = _resolved_version(root, source)
            out.append((source, version, [p for p in (source, final) if p]))
        elif hostfs.isdir(host_path(root, source)):
            version, final = _resolved_version(root, source.rstrip("/") + "/" + LIBS[0])
            if final:
                out.append((source, version, [source.rstrip("/") + "/" + LIBS[0], final]))
    return out


def _hooked(config):
    return any((value.split() or [""])[0].endswith(NVIDIA_HOOK)
               for value in config.get_all("lxc.hook.mount"))


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
    fs_path, reason = drift_mod.rootfs_path(values[0] if values else None, stores)
    if fs_path is not None:
        if _has_tree(host_path(root, fs_path)):
            return fs_path, None
        reason = "%s is not there or empty (not mounted on the host?)" % fs_path
    mounted = PCT_MOUNT % vmid
    if _has_tree(host_path(root, mounted)):
        return mounted, None
    return None, "%s; pct mount %s makes it readable at %s" % (reason, vmid, mounted)


def _has_tree(path):
    if not hostfs.isdir(path):
        return False
    try:
        return bool(hostfs.listdir(path))
    except OSError:
        return False


def container_userspace(root, config, fs_root_path, host_user):
    """``{method, version, packages, evidence}`` of one container (``fs_root_path``: its
    root as a host path, None when unreadable; ``host_user``: ``host_userspace``)."""
    if _hooked(config):
        return {"method": "hook", "version": host_user[0], "packages": [],
                "evidence": [p for p in ("lxc.hook.mount", host_user[1]) if p]}
    bound = _bound_sources(root, config)
    if bound:
        versions = [v for _s, v, _e in bound if v]
        evidence = []
        for _s, _v, paths in bound:
            evidence.extend(p for p in paths if p not in evidence)
        return {"method": "bind-mount", "version": versions[0] if versions else None,
                "packages": [], "evidence": evidence,
                "versions": sorted(set(versions))}
    if fs_root_path is None:
        return {"method": "unknown", "version": None, "packages": [], "evidence": []}
    fs_root = host_path(root, fs_root_path)
    libs = libraries(fs_root)
    lib = libs.get(LIBS[0]) or libs.get(LIBS[1])
    lib_version = lib[0] if lib else None
    evidence = []
    if lib:
        evidence.extend(p for p in (lib[1], lib[2]) if p not in evidence)
    run = run_record(fs_root)
    packages = _packages(dpkg_packages(fs_root), USERSPACE_PACKAGES)
    if run:
        return {"method": "installed-run", "version": lib_version or run["version"],
                "packages": [], "evidence": [RUN_LOG] + evidence}
    if packages:
        versions = [upstream_version(p["version"]) for p in packages]
        return {"method": "installed-deb",
                "version": lib_version or next((v for v in versions if v), None),
                "packages": _listed(packages), "evidence": [DPKG_STATUS] + evidence}
    if lib:
        return {"method": "unknown", "version": lib_version, "packages": [],
                "evidence": evidence}
    return {"method": "none", "version": None, "packages": [], "evidence": []}


def gpu_containers(root, config_dir, vmids=None):
    """``[(vmid, config path, LxcConfig)]``: every GPU container (the audit's rule,
    ``lxc.binds_nvidia``), or those of ``vmids`` (each must have a config)."""
    configs = lxc_mod.list_configs(root, config_dir)
    if vmids:
        known = dict(configs)
        missing = [str(v) for v in vmids if int(v) not in known]
        if missing:
            raise DriverStateError(
                "containers: no config for %s under %s (containers here: %s); %s shows "
                "only this node's containers" % (
                    ", ".join(missing), host_path(root, config_dir),
                    ", ".join(str(v) for v, _p in configs) or "none", config_dir))
        return [(int(v), known[int(v)], lxc_mod.LxcConfig.read(known[int(v)]))
                for v in vmids]
    out = []
    for vmid, path in configs:
        config = lxc_mod.LxcConfig.read(path)
        if lxc_mod.binds_nvidia(config):
            out.append((vmid, path, config))
    return out


def containers_state(root, config_dir, vmids=None):
    """The ``containers`` list of the module's result."""
    stores = None
    host_user = None
    out = []
    for vmid, path, config in gpu_containers(root, config_dir, vmids):
        if stores is None:
            stores = drift_mod.storages(root)
            host_user = host_userspace(root)
        fs_path, reason = root_of(root, vmid, config, stores)
        userspace = container_userspace(root, config, fs_path, host_user)
        userspace["evidence"] = ["/" + os.path.relpath(path, os.path.abspath(root or "/"))
                                 if e == "lxc.hook.mount" else e for e in userspace["evidence"]]
        if userspace["method"] == "bind-mount":
            userspace["evidence"].insert(0, "/" + os.path.relpath(
                path, os.path.abspath(root or "/")))
        python3 = None
        if fs_path is not None:
            python3 = hostfs.exists(host_path(host_path(root, fs_path), PYTHON3))
        out.append({"vmid": str(vmid), "name": config.get("hostname"),
                    "rootfs": fs_path, "readable": fs_path is not None,
                    "reason": None if fs_path is not None else "root not readable: %s" % reason,
                    "userspace": userspace, "python3": python3})
    return out


# --------------------------------------------------------------------------- the gate


def _dkms_has(dkms, target, kernel):
    return [e for e in dkms if e["version"] == target and e["kernel"] == kernel
            and e["state"] == "installed" and e["modules"]]


def _dkms_summary(dkms, kernel):
    on = ["%s %s %s" % (e["module"], e["version"], e["state"]) for e in dkms
          if e["kernel"] == kernel]
    return "; ".join(on) or "nothing"


def _container_refusal(ct, target, phase):
    vmid = ct["vmid"]
    if not ct["readable"]:
        return "%s: %s" % (vmid, ct["reason"])
    user = ct["userspace"]
    method, version = user["method"], user["version"]
    if method == "none":
        return ("%s: no NVIDIA user space (none in its root, no bind mount or nvidia hook), "
                "target %s: stage it" % (vmid, target))
    if method in ("bind-mount", "hook"):
        if version is None:
            return ("%s: %s of the host's user space, but no NVIDIA library found where it "
                    "binds (%s)" % (vmid, method, ", ".join(user["evidence"][1:]) or "-"))
        others = [v for v in user.get("versions") or [version] if v != target]
        if others:
            return ("%s: user space %s, target %s (%s of the host's): stage the host's "
                    "user space" % (vmid, others[0], target, method))
        return None
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
                 phase="before_reboot", containers=None, config_dir=lxc_mod.DEFAULT_CONFIG_DIR):
    """The module's result (``host``, ``containers``, ``gate`` when ``target_version``)."""
    if target_version is not None:
        check_version("target_version", target_version)
    if phase not in PHASES:
        raise DriverStateError("phase: %r is not one of %s" % (phase, ", ".join(PHASES)))
    root = root or "/"
    loaded = loaded_module(root)
    host = {
        "loaded": loaded,
        "installed": host_installed(root, loaded),
        "dkms": host_dkms(root),
        "kernels": {"running": kernel_mod.running_kernel(root),
                    "next": next_kernel_release or next_kernel(root)},
        "fabricmanager": fabric_manager(root),
    }
    state = {"host": host, "containers": containers_state(root, config_dir, containers)}
    if target_version is not None:
        state["gate"] = gate(state, target_version, phase)
    return state
