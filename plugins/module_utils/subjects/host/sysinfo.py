# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small host readers nobody else owns: sysctls by key, transparent hugepages, the NVIDIA
driver version, module parameters and modprobe.d options, the CPU vendor, kernel module
availability.

Every function reads files under ``root`` and returns None (or an empty value) for a file
that is not there: a missing file is a fact, never an error.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

_NVRM = re.compile(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")


def nvidia_driver_version(root):
    """The loaded NVIDIA kernel module version (``590.48.01``), or None.

    ``/proc/driver/nvidia/version`` first line reads ``NVRM version: NVIDIA UNIX x86_64
    Kernel Module  590.48.01  <date>`` (open modules: ``... Open Kernel Module for x86_64
    590.48.01 ...``); ``/sys/module/nvidia/version`` is the fallback.
    """
    text = read_text(host_path(root, "/proc/driver/nvidia/version"))
    if text:
        match = _NVRM.search(text)
        if match:
            return match.group(1)
    version = read_text(host_path(root, "/sys/module/nvidia/version"))
    return version or None


def module_param(root, module, param):
    """``/sys/module/<module>/parameters/<param>`` as text, or None when not there."""
    module = module.replace("-", "_")
    return read_text(host_path(root, "/sys/module/%s/parameters/%s" % (module, param)))


def param_true(value):
    """Kernel bool/int parameter text (``Y``, ``N``, ``1``, ``0``) -> True/False/None."""
    if value is None:
        return None
    value = value.strip().lower()
    if value in ("y", "1", "yes", "on", "true"):
        return True
    if value in ("n", "0", "no", "off", "false"):
        return False
    return None


# The modprobe.d file role boot_config writes the nvidia_uvm option to (the default of
# host_audit's nvidia_uvm_modprobe_file and of role common's gpuhost_nvidia_uvm_modprobe_file).
UVM_MODPROBE_FILE = "/etc/modprobe.d/gpuhost-nvidia-uvm.conf"
MODPROBE_DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/lib/modprobe.d", "/usr/lib/modprobe.d")


def modprobe_options(root, module):
    """Options configured for ``module`` in modprobe.d: ``{param: value}`` and the files.

    Returns ``{"options": {...}, "files": [host paths]}``; files that set nothing for the
    module are not listed. Later files win, as modprobe reads them (sorted by name, /etc
    first for a name present in several folders).
    """
    module = module.replace("-", "_")
    chosen = {}
    for folder in MODPROBE_DIRS:
        try:
            names = sorted(hostfs.listdir(host_path(root, folder)))
        except OSError:
            continue
        for name in names:
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = folder + "/" + name
    options = {}
    files = []
    for name in sorted(chosen):
        path = chosen[name]
        text = read_text(host_path(root, path)) or ""
        found = False
        for line in text.replace("\\\n", " ").splitlines():
            fields = line.split("#", 1)[0].split()
            if (len(fields) >= 2 and fields[0] == "options"
                    and fields[1].replace("-", "_") == module):
                for item in fields[2:]:
                    key, _sep, value = item.partition("=")
                    options[key] = value
                    found = True
        if found:
            files.append(path)
    return {"options": options, "files": files}


def cpu_identity(root):
    """``{vendor, model_name, flags}`` of the first CPU in ``/proc/cpuinfo`` (None when absent).

    Reads only the first processor block (``/proc/cpuinfo`` of 128 threads is 200 KB).
    """
    out = {"vendor": None, "model_name": None, "flags": []}
    path = host_path(root, "/proc/cpuinfo")
    try:
        handle = hostfs.open_read(path, "r", encoding="utf-8", errors="replace")
    except (IOError, OSError):
        return out
    with handle:
        for line in handle:
            if not line.strip():
                if out["vendor"] is not None:
                    break
                continue
            key, _sep, value = line.partition(":")
            key = key.strip()
            value = value.strip()
            if key == "vendor_id":
                out["vendor"] = value
            elif key == "model name":
                out["model_name"] = value
            elif key == "flags":
                out["flags"] = value.split()
    return out


def module_available(root, release, name):
    """True when module ``name`` is loadable for kernel ``release``: listed in its
    ``modules.dep`` or present as ``<name>.ko[.xz|.zst|.gz]`` under ``updates/`` or
    ``extra/`` (where DKMS and out-of-tree packages install, sometimes before depmod ran).
    None when the kernel's module folder is not there (nothing can be said)."""
    if not release:
        return None
    folder = host_path(root, "/lib/modules/%s" % release)
    if not hostfs.isdir(folder):
        return None
    wanted = set(name.replace("-", "_") + suffix
                 for suffix in (".ko", ".ko.xz", ".ko.zst", ".ko.gz"))
    dep = read_text(os.path.join(folder, "modules.dep"))
    if dep:
        for line in dep.splitlines():
            module_path = line.split(":", 1)[0]
            if os.path.basename(module_path).replace("-", "_") in wanted:
                return True
    for sub in ("updates", "extra"):
        for _dirpath, _dirs, files in hostfs.walk(os.path.join(folder, sub)):
            for filename in files:
                if filename.replace("-", "_") in wanted:
                    return True
    return False
