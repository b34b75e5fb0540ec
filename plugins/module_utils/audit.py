# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read-only host audit: facts from sysfs, procfs and files under a root, and ranked
findings against the wanted values of role ``common``.

Nothing here writes or runs a command, so the same code audits a live host and an unpacked
capture of one. A missing file is a fact (None, an empty list), never an error; a reader that
fails unexpectedly is recorded in ``errors`` and the rest of the audit goes on.

``collect(root, wanted)`` -> facts; ``findings(facts, wanted)`` -> ranked findings;
``audit(root, wanted)`` -> both plus the per-check status the reports show.
:class:`ReadRecorder` notes every path the readers touch, which is what a capture packs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import builtins
import gzip
import hashlib
import io
import os
import re
import stat
import tarfile
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    bootcfg as bootcfg_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    cpu as cpu_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    dkms as dkms_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    kernel as kernel_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    lxc as lxc_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    pci as pci_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    procfs,
    sysinfo,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils import (
    sysctl as sysctl_mod,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import host_path, read_text


SCHEMA = 1
SEVERITIES = ("critical", "high", "medium", "low", "info")
SEVERITY_RANK = dict((name, index) for index, name in enumerate(SEVERITIES))

PLAYBOOK_TUNE = "gpuhost.tuning.tune"
PLAYBOOK_REBOOT = "gpuhost.tuning.reboot_verify"

# Within one severity, findings rank in this order (the field story's ranking: MRRS first).
FINDING_ORDER = (
    "dkms_missing_for_kernel",
    "gpu_no_driver",
    "pcie_mrrs",
    "pcie_link_degraded",
    "numa_balancing",
    "cpuidle_deep_state",
    "lxc_stale_majors",
    "lxc_gpu_majors_missing",
    "kernel_headers_missing",
    "cpufreq_driver",
    "sysctl",
    "nvidia_uvm_hmm",
    "boot_param",
    "reboot_pending",
    "lxc_onboot",
    "pcie_unreadable",
    "nvidia_peermem_not_loaded",
    "nvidia_peermem_unavailable",
    "audit_error",
)

# Matrix columns of the reports: (check, label, finding ids).
CHECKS = (
    ("dkms", "DKMS", ("dkms_missing_for_kernel",)),
    ("pcie_mrrs", "PCIe MRRS", ("pcie_mrrs", "pcie_unreadable")),
    ("pcie_link", "PCIe link", ("pcie_link_degraded",)),
    ("gpu_driver", "GPU driver", ("gpu_no_driver",)),
    ("numa_balancing", "NUMA balancing", ("numa_balancing",)),
    ("cpuidle", "C-states", ("cpuidle_deep_state",)),
    ("cpufreq", "cpufreq", ("cpufreq_driver",)),
    ("sysctl", "sysctl", ("sysctl",)),
    ("kernel", "Kernel & boot", ("kernel_headers_missing", "reboot_pending", "boot_param")),
    ("nvidia", "NVIDIA", ("nvidia_uvm_hmm", "nvidia_peermem_not_loaded",
                          "nvidia_peermem_unavailable")),
    ("lxc", "LXC", ("lxc_stale_majors", "lxc_gpu_majors_missing", "lxc_onboot")),
    ("audit", "Audit", ("audit_error",)),
)
CHECK_OF = dict((fid, check) for check, _label, ids in CHECKS for fid in ids)

# Severity of a sysctl off its wanted value (numa_balancing has its own finding id).
SYSCTL_SEVERITY = {
    "kernel.nmi_watchdog": "medium",
    "net.core.rmem_max": "medium",
    "net.core.wmem_max": "medium",
    "kernel.sched_autogroup_enabled": "low",
    "kernel.perf_event_paranoid": "low",
    "vm.swappiness": "low",
    "vm.dirty_ratio": "low",
    "vm.dirty_background_ratio": "low",
}

DEFAULT_WANTED = {
    "gpu_vendor": "10de",
    "gpu_classes": ["0300", "0302"],
    "mrrs_size": 4096,
    "cpuidle_deeper_than": "C1",
    "sysctl": {},
    "cpufreq_drivers_wanted": ["amd-pstate-epp", "amd-pstate", "intel_pstate"],
    "boot_params": {},
    "nvidia_uvm_disable_hmm": True,
    "nvidia_uvm_modprobe_file": sysinfo.UVM_MODPROBE_FILE,
    "lxc_gpu_drivers": ["nvidia", "nvidia-uvm", "nvidia-caps"],
    "lxc_config_dir": "/etc/pve/lxc",
    "host": None,
}

# Parameters the boot loader or the kernel adds by itself: not "configured vs running".
_CMDLINE_IGNORE = ("BOOT_IMAGE", "initrd", "root", "ro", "rw", "boot", "rootfstype")


def merged_wanted(wanted):
    out = dict(DEFAULT_WANTED)
    for key, value in (wanted or {}).items():
        if value is not None:
            out[key] = value
    return out


# =========================================================================================
# recording what was read (for capture)


class ReadRecorder(object):
    """Notes every path under ``root`` that is opened, listed, stat'ed or read as a link
    while active (a context manager that wraps ``open``, ``os.listdir``, ``os.scandir``,
    ``os.stat``, ``os.lstat`` and ``os.readlink``; Python's own imports are not seen).

    ``paths``: host path -> ``read`` (content used), ``list`` (names used) or ``stat``
    (existence/kind used). The audit itself never needs it; capture does.
    """

    _STRENGTH = {"stat": 0, "list": 1, "read": 2}

    def __init__(self, root):
        self.root = os.path.abspath(root or "/")
        self.paths = {}
        self._saved = None

    def note(self, path, kind):
        try:
            path = os.fsdecode(path)
        except TypeError:
            return
        if not isinstance(path, str) or not path.startswith("/"):
            return
        path = os.path.normpath(path)
        if self.root != "/":
            if path != self.root and not path.startswith(self.root + "/"):
                return
            path = "/" + os.path.relpath(path, self.root) if path != self.root else "/"
        old = self.paths.get(path)
        if old is None or self._STRENGTH[kind] > self._STRENGTH[old]:
            self.paths[path] = kind

    def __enter__(self):
        recorder = self
        saved = {
            "open": builtins.open,
            "listdir": os.listdir,
            "scandir": os.scandir,
            "stat": os.stat,
            "lstat": os.lstat,
            "readlink": os.readlink,
        }
        self._saved = saved

        def _open(file, mode="r", *args, **kwargs):
            if isinstance(file, (str, bytes)) and "r" in mode and "+" not in mode:
                recorder.note(file, "read")
            return saved["open"](file, mode, *args, **kwargs)

        def _listdir(path="."):
            if isinstance(path, (str, bytes)):
                recorder.note(path, "list")
            return saved["listdir"](path)

        def _scandir(path="."):
            if isinstance(path, (str, bytes)):
                recorder.note(path, "list")
            return saved["scandir"](path)

        def _stat(path, *args, **kwargs):
            if isinstance(path, (str, bytes)):
                recorder.note(path, "stat")
            return saved["stat"](path, *args, **kwargs)

        def _lstat(path, *args, **kwargs):
            if isinstance(path, (str, bytes)):
                recorder.note(path, "stat")
            return saved["lstat"](path, *args, **kwargs)

        def _readlink(path, *args, **kwargs):
            if isinstance(path, (str, bytes)):
                recorder.note(path, "stat")
            return saved["readlink"](path, *args, **kwargs)

        builtins.open = _open
        os.listdir = _listdir
        os.scandir = _scandir
        os.stat = _stat
        os.lstat = _lstat
        os.readlink = _readlink
        return self

    def __exit__(self, *exc):
        saved = self._saved
        builtins.open = saved["open"]
        os.listdir = saved["listdir"]
        os.scandir = saved["scandir"]
        os.stat = saved["stat"]
        os.lstat = saved["lstat"]
        os.readlink = saved["readlink"]
        return False


# =========================================================================================
# facts


def _guard(errors, section, func, default=None):
    """Run one fact reader; an unexpected failure is a recorded error, not a crash."""
    try:
        return func()
    except Exception as exc:  # noqa: BLE001 - one reader must not sink the whole audit
        errors.append({"section": section, "error": "%s: %s" % (type(exc).__name__, exc)})
        return default


def _cmdline_params(text):
    return procfs.cmdline_params(text or "")


def _boot_config(root):
    """``{tool, backend, cmdline, source}`` of the boot configuration, read offline."""
    config = bootcfg_mod.read_config(root)
    tool = config.get("tool")
    return {
        "tool": None if tool in (None, "unknown") else tool,
        "backend": config.get("backend") if config.get("cmdline") is not None else None,
        "cmdline": config.get("cmdline"),
        "source": config.get("source"),
    }


def _pinned_kernel(root):
    """The kernel proxmox-boot-tool pinned (next-boot pin first), or None."""
    for path in ("/etc/kernel/next-boot-pin", "/etc/kernel/proxmox-boot-pin"):
        text = read_text(host_path(root, path))
        if text:
            return text.split()[0]
    return None


def _loader_next_boot(root):
    """``(kernel, how)`` the boot loader's own files say boots next (GRUB's grub.cfg and
    grubenv, systemd-boot entries on an ESP under root), or ``(None, None)`` when they cannot
    be read offline (Proxmox ESPs are not mounted)."""
    try:
        from ansible_collections.gpuhost.tuning.plugins.module_utils import bootloader
        loader = bootloader.inspect(root)
    except Exception:  # noqa: BLE001 - optional refinement; pins and newest still decide
        return None, None
    pins = loader.get("kernel_list") or {}
    if pins.get("next_boot"):
        return pins["next_boot"], "proxmox-boot-tool next-boot pin"
    if pins.get("pinned"):
        return pins["pinned"], "proxmox-boot-tool pin"
    if loader.get("next_boot_kernel"):
        return loader["next_boot_kernel"], "boot loader default entry (%s)" % (
            loader.get("default_how") or loader.get("backend"))
    return None, None


def kernel_facts(root):
    running = kernel_mod.running_kernel(root)
    installed = kernel_mod.installed_kernels(root)
    newest = installed[-1] if installed else None
    pinned = _pinned_kernel(root)
    loader_kernel, how = _loader_next_boot(root)
    if loader_kernel in installed:
        next_boot, next_how = loader_kernel, how
    elif pinned in installed:
        next_boot, next_how = pinned, "proxmox-boot-tool pin"
    else:
        next_boot, next_how = newest, "newest installed kernel" if newest else None
    headers = dict((k, kernel_mod.has_headers(root, k))
                   for k in sorted(set(installed + ([running] if running else [])),
                                   key=kernel_mod.kernel_sort_key))
    boot = _boot_config(root)
    return {
        "running": running,
        "cmdline": procfs.read_cmdline(root),
        "installed": installed,
        "newest": newest,
        "pinned": pinned,
        "next_boot": next_boot,
        "next_boot_source": next_how,
        "running_installed": running in installed if running else None,
        "headers": headers,
        "configured_cmdline": boot["cmdline"],
        "configured_cmdline_source": boot["source"],
        "boot_tool": boot["tool"],
        "boot_backend": boot["backend"],
    }


def cpu_facts(root):
    identity = sysinfo.cpu_identity(root)
    driver = cpu_mod.cpuidle_driver(root)
    states = []
    if driver not in (None, "none"):
        states = [{"name": s["name"], "desc": s.get("desc"), "latency_us": s["latency_us"],
                   "cpus": len(s["cpus"]), "cpus_disabled": len(s["cpus_disabled"]),
                   "cpus_enabled_list": cpu_mod.format_cpu_list(
                       sorted(set(s["cpus"]) - set(s["cpus_disabled"])))}
                  for s in cpu_mod.summarize_states(root)]
    freq = cpu_mod.cpufreq_info(root)
    return {
        "vendor": identity["vendor"],
        "model_name": identity["model_name"],
        "cppc": "cppc" in identity["flags"],
        "hypervisor": "hypervisor" in identity["flags"],
        "online": len(cpu_mod.online_cpus(root)),
        "cpuidle": {
            "driver": driver,
            "governor": cpu_mod.cpuidle_governor(root) if driver is not None else None,
            "states": states,
        },
        "cpufreq": {
            "driver": freq.get("driver"),
            "drivers": freq.get("drivers"),
            "governors": freq.get("governors"),
            "epp": freq.get("epp"),
            "boost": freq.get("boost"),
        },
        "amd_pstate_status": freq.get("amd_pstate_status"),
    }


def sysctl_facts(root, keys):
    return {
        "values": sysinfo.sysctl_values(root, keys),
        "transparent_hugepage": sysinfo.transparent_hugepages(root),
    }


_PCIE_FIELDS = ("max_read_request_size", "max_payload_size", "max_payload_size_supported")


def _device_summary(dev):
    try:
        info = pci_mod.summary(dev)
        info["error"] = None
    except (pci_mod.PciError, IOError, OSError, ValueError, IndexError) as exc:
        info = {
            "address": dev.address, "vendor": dev.vendor, "device": dev.device,
            "class": dev.pci_class, "driver": dev.driver, "numa_node": dev.numa_node,
            "max_read_request_size": None, "max_payload_size": None,
            "max_payload_size_supported": None, "link": dev.link,
            "error": str(exc),
        }
    return info


def gpu_facts(root, vendor, classes):
    gpus = []
    for dev in pci_mod.select_devices(root, vendor, classes):
        info = _device_summary(dev)
        info["upstream"] = [_device_summary(bridge) for bridge in dev.upstream()]
        info["on_host_bridge"] = not info["upstream"]
        gpus.append(info)
    return gpus


def nvidia_facts(root, running):
    loaded = procfs.loaded_modules(root)
    loaded_set = set(loaded)
    hmm = sysinfo.module_param(root, "nvidia_uvm", "uvm_disable_hmm")
    configured = sysinfo.modprobe_options(root, "nvidia_uvm")

    def presence(name):
        is_loaded = name in loaded_set or os.path.isdir(host_path(root, "/sys/module/" + name))
        return {"loaded": name in loaded_set if loaded else is_loaded,
                "available": sysinfo.module_available(root, running, name)}

    return {
        "driver_version": sysinfo.nvidia_driver_version(root),
        "modules_loaded": [m for m in loaded if m.startswith("nvidia") or m in ("ib_core",)],
        "uvm_disable_hmm": sysinfo.param_true(hmm),
        "uvm_disable_hmm_raw": hmm,
        "uvm_disable_hmm_configured": sysinfo.param_true(
            configured["options"].get("uvm_disable_hmm")),
        "uvm_options_files": configured["files"],
        "nvidia_peermem": presence("nvidia_peermem"),
        "ib_core": presence("ib_core"),
    }


def char_device_facts(majors):
    """``{name: first major}`` of ``procfs.char_majors``' ``{name: [majors]}``."""
    return dict((name, values[0]) for name, values in sorted(majors.items()) if values)


def dkms_facts(root):
    return [{"name": e["name"], "version": e["version"], "kernel": e["kernel"],
             "arch": e.get("arch"), "state": e["state"], "warning": e.get("warning")}
            for e in dkms_mod.tree_status(root)]


FIXED_GPU_MAJORS = frozenset(lxc_mod.FIXED_MAJORS.values())


def lxc_facts(root, config_dir, gpu_drivers):
    majors = procfs.char_majors(root)
    registered = procfs.registered_char_majors(root)
    out = []
    for vmid, path in lxc_mod.list_configs(root, config_dir):
        config = lxc_mod.LxcConfig.read(path)
        rules = config.allow_rules()
        allowed = sorted(set(r["major"] for r in rules
                             if r["type"] == "c" and isinstance(r["major"], int)))
        paths = [m.get("source") or "" for m in config.mount_entries()]
        paths += [d.get("path") or "" for d in config.dev_entries()]
        gpu = 195 in allowed or any(p.startswith("/dev/nvidia") for p in paths)
        everything = any(r["type"] == "a" or (r["type"] == "c" and r["major"] == "*")
                         for r in rules)
        missing = []
        # Containers given the GPUs by raw cgroup rules need one per driver major; devN
        # entries (PVE 8.1+) are resolved at start and need none.
        if 195 in allowed and not everything:
            for drv in gpu_drivers:
                found, _registered = lxc_mod.driver_majors(drv, majors)
                for major in found:
                    if major not in allowed:
                        missing.append({"driver": drv, "major": major})
        out.append({
            "vmid": vmid,
            "path": "/" + os.path.relpath(path, os.path.abspath(root or "/")),
            "onboot": config.onboot,
            "gpu": gpu,
            "allowed_majors": allowed,
            # NVIDIA's fixed majors (195) are the driver's own even while it is not loaded
            # (audited before nvidia loads, or on a host where it failed): never stale, the
            # same rule the repair (lxc_cgroup_devices) keeps them by.
            "stale_majors": [m for m in lxc_mod.stale_majors(config, registered)
                             if m not in FIXED_GPU_MAJORS] if registered else [],
            "missing_majors": missing,
        })
    return out


def collect(root, wanted=None):
    """Every fact of the audit schema; see the host_audit module's RETURN."""
    wanted = merged_wanted(wanted)
    root = root or "/"
    errors = []
    facts = {}
    facts["kernel"] = _guard(errors, "kernel", lambda: kernel_facts(root), {})
    running = (facts["kernel"] or {}).get("running")
    facts["cpu"] = _guard(errors, "cpu", lambda: cpu_facts(root), {})
    keys = list((wanted.get("sysctl") or {}).keys())
    facts["sysctl"] = _guard(errors, "sysctl", lambda: sysctl_facts(root, keys), {})
    facts["gpus"] = _guard(errors, "gpus", lambda: gpu_facts(
        root, wanted["gpu_vendor"], wanted["gpu_classes"]), [])
    facts["nvidia"] = _guard(errors, "nvidia", lambda: nvidia_facts(root, running), {})
    # Every major per name (nvidia-caps may hold two): reboot_verify keeps them as the GPU
    # drivers' majors before the reboot. char_devices: the first of each, as documented.
    facts["char_majors"] = _guard(errors, "char_devices", lambda: procfs.char_majors(root), {})
    facts["char_devices"] = char_device_facts(facts["char_majors"] or {})
    facts["dkms"] = _guard(errors, "dkms", lambda: dkms_facts(root), [])
    facts["lxc"] = _guard(errors, "lxc", lambda: lxc_facts(
        root, wanted["lxc_config_dir"], wanted["lxc_gpu_drivers"]), [])
    facts["errors"] = errors
    return facts


# =========================================================================================
# findings


def _finding(fid, severity, subject, current, expected, remedy, reboot_required=False,
             detail=None):
    out = {
        "id": fid,
        "severity": severity,
        "subject": subject,
        "current": current,
        "expected": expected,
        "remedy": remedy,
        "reboot_required": bool(reboot_required),
    }
    if detail:
        out["detail"] = detail
    return out


def _limit(host):
    return " -l %s" % host if host else ""


def mrrs_setpci_value(size):
    field = {128: 0, 256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}[int(size)]
    return "%04x:7000" % (field << 12)


def _pcie_findings(facts, wanted, out):
    want = int(wanted["mrrs_size"])
    host = wanted.get("host")
    seen = set()
    for gpu in facts.get("gpus") or []:
        for dev, role in [(gpu, "GPU")] + [(b, "bridge above %s" % gpu["address"])
                                           for b in gpu.get("upstream") or []]:
            addr = dev["address"]
            if addr in seen:
                continue
            seen.add(addr)
            if dev.get("error"):
                out.append(_finding(
                    "pcie_unreadable", "info", addr, "config space not readable",
                    "PCI Express capability readable",
                    "run the audit as root (become: true); non-root reads only 64 bytes of "
                    "config space", detail=dev["error"]))
                continue
            mrrs = dev.get("max_read_request_size")
            if mrrs is not None and mrrs < want:
                out.append(_finding(
                    "pcie_mrrs", "high", addr, "%d bytes" % mrrs, "%d bytes" % want,
                    "setpci -s %s CAP_EXP+8.w=%s (now); ansible-playbook %s%s (now and at "
                    "every boot)" % (addr, mrrs_setpci_value(want), PLAYBOOK_TUNE, _limit(host)),
                    detail="%s %s:%s" % (role, dev.get("vendor"), dev.get("device"))))
            _link_finding(dev, role, gpu, out)


def _link_finding(dev, role, gpu, out):
    link = dev.get("link") or {}
    speed, max_speed = link.get("speed_gts"), link.get("max_speed_gts")
    width, max_width = link.get("width"), link.get("max_width")
    problems = []
    idle_only = False
    if width and max_width and width < max_width:
        problems.append("x%d of x%d" % (width, max_width))
    if speed and max_speed and speed < max_speed:
        problems.append("%s of %s GT/s" % (_gts(speed), _gts(max_speed)))
        # NVIDIA GPUs drop to 2.5 GT/s when idle (power saving); only that case is benign.
        idle_only = (not problems[:-1] and speed == 2.5 and gpu.get("driver") == "nvidia")
    if not problems:
        return
    severity = "low" if idle_only else "high"
    remedy = ("lspci -vv -s %s | grep -E 'LnkCap|LnkSta' under load; " % dev["address"])
    if idle_only:
        remedy += "2.5 GT/s is the GPU's idle power state: re-check while it works"
    else:
        remedy += ("reseat the card or riser, check the BIOS PCIe link speed setting "
                   "(Auto/Gen5), then re-audit")
    out.append(_finding(
        "pcie_link_degraded", severity, dev["address"], ", ".join(problems),
        "x%s at %s GT/s" % (max_width, _gts(max_speed)), remedy,
        detail=role))


def _gts(value):
    if value is None:
        return "?"
    return ("%.1f" % value) if value != int(value) else "%d" % value


def _gpu_driver_findings(facts, out):
    for gpu in facts.get("gpus") or []:
        if not gpu.get("driver"):
            out.append(_finding(
                "gpu_no_driver", "high", gpu["address"], "no driver bound", "nvidia",
                "modprobe nvidia; if it fails, check dkms status for kernel %s and "
                "journalctl -k | grep -i nvrm" % (
                    (facts.get("kernel") or {}).get("running") or "<running>")))


def _sysctl_findings(facts, wanted, out):
    host = wanted.get("host")
    values = (facts.get("sysctl") or {}).get("values") or {}
    for key, want in (wanted.get("sysctl") or {}).items():
        want = " ".join(str(want).split())
        have = values.get(key)
        if have is None or sysctl_mod.satisfied(key, have, want):
            continue
        remedy = "sysctl -w %s=%s (now); ansible-playbook %s%s (now and persisted in " \
                 "/etc/sysctl.d)" % (key, want, PLAYBOOK_TUNE, _limit(host))
        if key == "kernel.numa_balancing":
            out.append(_finding("numa_balancing", "high", key, have, want, remedy))
        else:
            out.append(_finding("sysctl", SYSCTL_SEVERITY.get(key, "medium"), key, have, want,
                                remedy))


def _state_latency(states, name):
    for state in states:
        if state["name"] == name:
            return state["latency_us"]
    return None


def _cpuidle_findings(facts, wanted, out):
    cpu = facts.get("cpu") or {}
    idle = cpu.get("cpuidle") or {}
    states = idle.get("states") or []
    ref = wanted.get("cpuidle_deeper_than")
    limit = _state_latency(states, ref)
    if limit is None:
        return
    host = wanted.get("host")
    for state in states:
        if state["latency_us"] is None or state["latency_us"] <= limit:
            continue
        enabled = state["cpus"] - state["cpus_disabled"]
        if enabled <= 0:
            continue
        out.append(_finding(
            "cpuidle_deep_state", "high", state["name"],
            "enabled on %d of %d CPUs (exit latency %s us)" % (
                enabled, state["cpus"], state["latency_us"]),
            "disabled (no idle state deeper than %s)" % ref,
            "ansible-playbook %s%s (disables %s by name on every CPU, now and at boot); "
            "boot parameter processor.max_cstate=1 for acpi_idle" % (
                PLAYBOOK_TUNE, _limit(host), state["name"]),
            detail="driver %s; enabled on CPUs %s" % (
                idle.get("driver"), state.get("cpus_enabled_list"))))


def _amd_pstate_possible(cpu):
    return cpu.get("vendor") == "AuthenticAMD" or cpu.get("amd_pstate_status") is not None


def _cpufreq_findings(facts, wanted, out):
    cpu = facts.get("cpu") or {}
    driver = (cpu.get("cpufreq") or {}).get("driver")
    good = wanted.get("cpufreq_drivers_wanted") or []
    if not driver or driver in good:
        return
    host = wanted.get("host")
    if driver == "acpi-cpufreq" and _amd_pstate_possible(cpu):
        out.append(_finding(
            "cpufreq_driver", "medium", "cpufreq", driver, "amd-pstate-epp (amd_pstate=active)",
            "add amd_pstate=active to the kernel command line and reboot: ansible-playbook "
            "%s%s (CPPC must be enabled in the BIOS)" % (PLAYBOOK_REBOOT, _limit(host)),
            reboot_required=True,
            detail=("amd_pstate status: %s" % cpu["amd_pstate_status"]
                    if cpu.get("amd_pstate_status") else
                    "amd_pstate not active (no /sys/devices/system/cpu/amd_pstate)")))
    elif driver == "acpi-cpufreq" and cpu.get("vendor") == "GenuineIntel":
        out.append(_finding(
            "cpufreq_driver", "medium", "cpufreq", driver, "intel_pstate",
            "remove intel_pstate=disable from the kernel command line (and enable HWP in the "
            "BIOS), then reboot: ansible-playbook %s%s" % (PLAYBOOK_REBOOT, _limit(host)),
            reboot_required=True))


def _dkms_gap_detail(running, basis, name, version, next_boot):
    kernel = basis.get(name)
    if kernel == running:
        return "%s runs with %s %s; booting %s leaves its devices without a driver" % (
            running, name, version, next_boot)
    return ("the running kernel %s has no DKMS module installed (booted from outside this "
            "root, or never built for), so the modules installed for the other kernels "
            "stand in: %s %s is installed for %s, not for %s; booting %s leaves its devices "
            "without a driver" % (running or "(unknown)", name, version, kernel, next_boot,
                                  next_boot))


def _kernel_findings(facts, wanted, out):
    kern = facts.get("kernel") or {}
    host = wanted.get("host")
    running = kern.get("running")
    next_boot = kern.get("next_boot")
    dkms = facts.get("dkms") or []
    headers = kern.get("headers") or {}
    # DKMS gap: a module installed for the running kernel, not installed for the next one.
    # When the running kernel has none (booted from outside this root: a container, a VM
    # with a direct kernel boot, a capture; or a kernel DKMS never built for), the modules
    # installed for any other kernel stand in for it, newest kernel first.
    if next_boot and next_boot != running:
        on_running, basis = dkms_mod.installed_basis(dkms, running, next_boot)
        for name, version in sorted(on_running.items()):
            state = None
            for entry in dkms:
                if entry["name"] == name and entry["kernel"] == next_boot:
                    if entry["state"] == "installed" or state is None:
                        state = entry["state"]
            if state == "installed":
                continue
            steps = []
            if not headers.get(next_boot):
                steps.append("apt-get install %s" % kernel_mod.headers_package(next_boot))
            steps.append("dkms install %s/%s -k %s" % (name, version, next_boot))
            steps.append("ls /lib/modules/%s/updates/dkms" % next_boot)
            current = "%s/%s %s" % (name, version, "built, not installed" if state == "built"
                                    else "not built (headers %s)" % (
                                        "present" if headers.get(next_boot) else "missing"))
            if basis[name] != running:
                current += "; installed for %s (the running kernel %s has no DKMS module)" % (
                    basis[name], running or "(unknown)")
            out.append(_finding(
                "dkms_missing_for_kernel", "critical", next_boot, current,
                "%s/%s installed for %s" % (name, version, next_boot),
                "do not reboot yet: %s; or ansible-playbook %s%s, which gates the reboot on "
                "it" % (" && ".join(steps), PLAYBOOK_REBOOT, _limit(host)),
                detail=_dkms_gap_detail(running, basis, name, version, next_boot)))
    # headers: the kernels DKMS must build for (running and next boot), when DKMS is used
    if dkms:
        for release in sorted(set(k for k in (running, next_boot) if k),
                              key=kernel_mod.kernel_sort_key):
            if release not in (kern.get("installed") or []) and release == running:
                continue  # booted from outside this root (VM, container): nothing to build
            if headers.get(release) is False:
                out.append(_finding(
                    "kernel_headers_missing",
                    "high" if release == next_boot and release != running else "medium",
                    release, "no headers at /lib/modules/%s/build" % release,
                    "headers installed (DKMS builds need them)",
                    "apt-get install %s" % kernel_mod.headers_package(release)))
    # pending reboot: newer kernel installed, or configured command line not running
    if running and next_boot and next_boot != running and (
            kernel_mod.kernel_sort_key(next_boot) > kernel_mod.kernel_sort_key(running)
            or kern.get("pinned") == next_boot):
        out.append(_finding(
            "reboot_pending", "medium", "kernel", running, next_boot,
            "ansible-playbook %s%s (checks DKMS, headers, initramfs and the boot entry, "
            "then reboots)" % (PLAYBOOK_REBOOT, _limit(host)), reboot_required=True))
    configured = kern.get("configured_cmdline")
    running_cmdline = kern.get("cmdline")
    if configured and running_cmdline is not None:
        have = _cmdline_params(running_cmdline)
        diff = []
        for key, value in _cmdline_params(configured).items():
            if key in _CMDLINE_IGNORE:
                continue
            if key not in have or have[key] != value:
                diff.append(key if value is None else "%s=%s" % (key, value))
        if diff:
            out.append(_finding(
                "reboot_pending", "medium", "cmdline",
                "running without %s" % " ".join(diff),
                "%s (%s)" % (configured, kern.get("configured_cmdline_source")),
                "ansible-playbook %s%s" % (PLAYBOOK_REBOOT, _limit(host)),
                reboot_required=True))
    # wanted boot parameters missing from what will boot
    params = wanted.get("boot_params") or {}
    if params and (configured is not None or running_cmdline is not None) and \
            kern.get("boot_tool") is not None:
        source = _cmdline_params(configured if configured is not None else running_cmdline)
        cpu = facts.get("cpu") or {}
        for key, value in params.items():
            if not _boot_param_applies(key, cpu):
                continue
            if value is None:  # wanted absent, as kernel_cmdline removes it
                if key in source:
                    have = source[key]
                    out.append(_finding(
                        "boot_param", "low", key, key if have is None else "%s=%s" % (key, have),
                        "absent",
                        "ansible-playbook %s%s (removes it from %s, then reboots)" % (
                            PLAYBOOK_REBOOT, _limit(host),
                            kern.get("configured_cmdline_source") or "the boot configuration"),
                        reboot_required=True))
                continue
            # bootcfg's reading of a wanted value, as kernel_cmdline writes it: true is a
            # flag, false (YAML's unquoted off/no) is "off", numbers as the kernel shows them
            value = bootcfg_mod.format_value(value)
            text = key if value is None else "%s=%s" % (key, value)
            if value is None and key in source:
                continue
            if key in source and str(source[key]) == value:
                continue
            have = source.get(key, None) if key in source else "absent"
            out.append(_finding(
                "boot_param", "low", key, "%s=%s" % (key, have) if key in source else have,
                text,
                "ansible-playbook %s%s (adds it to %s, then reboots)" % (
                    PLAYBOOK_REBOOT, _limit(host),
                    kern.get("configured_cmdline_source") or "the boot configuration"),
                reboot_required=True))


def _boot_param_applies(key, cpu):
    """Vendor- and driver-specific parameters only where they do something: amd_pstate on
    AMD, intel_* on Intel, processor.max_cstate with acpi_idle; none of the CPU ones in a
    VM (the hypervisor owns idle and frequency there)."""
    vendor = cpu.get("vendor")
    virtual = bool(cpu.get("hypervisor"))
    if key.startswith("amd_pstate"):
        return vendor == "AuthenticAMD" and not virtual
    if key.startswith(("intel_pstate", "intel_idle")):
        return vendor == "GenuineIntel" and not virtual
    if key.startswith("processor."):
        return (cpu.get("cpuidle") or {}).get("driver") == "acpi_idle" and not virtual
    return True


def _uvm_hmm_remedy(kern, host, modprobe_file):
    """uvm_disable_hmm is read when nvidia_uvm loads, and the initramfs carries its own copy
    of /etc/modprobe.d: the fix is the option file, a refreshed initramfs for every kernel
    that may boot (the next one included), then a reboot. Role tune does not do this; role
    boot_config (run by the reboot_verify playbook) does."""
    kernels = kernel_mod.initramfs_kernels(kern.get("installed"), kern.get("running"),
                                           kern.get("next_boot"))
    refresh = " && ".join("update-initramfs -u -k %s" % k for k in kernels) or \
        "update-initramfs -u -k all"
    return ("echo 'options nvidia_uvm uvm_disable_hmm=1' > %s && %s, then reboot (the option "
            "is read only when nvidia_uvm loads); or ansible-playbook %s%s (role boot_config "
            "writes the option and refreshes the initramfs of %s; add -e gpuhost_reboot=true "
            "to reboot)" % (modprobe_file, refresh, PLAYBOOK_REBOOT, _limit(host),
                            ", ".join(kernels) or "the installed kernels"))


def _nvidia_findings(facts, wanted, out):
    nv = facts.get("nvidia") or {}
    host = wanted.get("host")
    loaded = nv.get("modules_loaded") or []
    has_nvidia = bool(loaded) or bool(facts.get("gpus")) or bool(
        [e for e in facts.get("dkms") or [] if e["name"].startswith("nvidia")])
    if not has_nvidia:
        return
    if wanted.get("nvidia_uvm_disable_hmm"):
        remedy = _uvm_hmm_remedy(
            facts.get("kernel") or {}, host,
            wanted.get("nvidia_uvm_modprobe_file") or sysinfo.UVM_MODPROBE_FILE)
        if "nvidia_uvm" in loaded and nv.get("uvm_disable_hmm") is not True:
            out.append(_finding(
                "nvidia_uvm_hmm", "medium", "nvidia_uvm",
                "uvm_disable_hmm=%s" % (nv.get("uvm_disable_hmm_raw") or "unset"),
                "uvm_disable_hmm=1 (CUDA init can fail with error 3 on HMM kernels)",
                remedy, reboot_required=True))
        elif "nvidia_uvm" not in loaded and nv.get("uvm_disable_hmm_configured") is not True:
            out.append(_finding(
                "nvidia_uvm_hmm", "medium", "modprobe.d",
                "no options nvidia_uvm uvm_disable_hmm=1",
                "uvm_disable_hmm=1 set in /etc/modprobe.d", remedy, reboot_required=True))
    peer = nv.get("nvidia_peermem") or {}
    ib = nv.get("ib_core") or {}
    if not ib.get("loaded") and not ib.get("available"):
        out.append(_finding(
            "nvidia_peermem_unavailable", "info", "nvidia_peermem",
            "not loaded; ib_core absent", "nothing: GPUDirect RDMA needs InfiniBand",
            "none needed: without an InfiniBand stack (ib_core) nvidia_peermem cannot load "
            "and does not apply"))
    elif not peer.get("loaded"):
        out.append(_finding(
            "nvidia_peermem_not_loaded", "low", "nvidia_peermem",
            "not loaded (ib_core %s)" % ("loaded" if ib.get("loaded") else "available"),
            "loaded, for GPUDirect RDMA over InfiniBand/RoCE",
            "modprobe nvidia_peermem && echo nvidia_peermem > /etc/modules-load.d/"
            "nvidia-peermem.conf"))


def _lxc_findings(facts, wanted, out):
    host = wanted.get("host")
    for ct in facts.get("lxc") or []:
        subject = "lxc %s" % ct["vmid"]
        if ct["stale_majors"]:
            replace = []
            for drv in ct.get("missing_majors") or []:
                replace.append("c %d:* rwm (%s)" % (drv["major"], drv["driver"]))
            out.append(_finding(
                "lxc_stale_majors", "high", subject,
                "allows %s, not registered in /proc/devices" % ", ".join(
                    "c %d:*" % m for m in ct["stale_majors"]),
                "allow rules for the majors /proc/devices registers now%s" % (
                    ": " + ", ".join(replace) if replace else ""),
                "pct stop %s; in %s replace the lxc.cgroup2.devices.allow rules for %s with "
                "the current majors (grep nvidia /proc/devices); pct start %s; or "
                "ansible-playbook %s%s" % (
                    ct["vmid"], ct.get("path"), ", ".join(str(m) for m in ct["stale_majors"]),
                    ct["vmid"], PLAYBOOK_REBOOT, _limit(host)),
                detail="stale majors: %s" % ", ".join(str(m) for m in ct["stale_majors"])))
        if ct.get("missing_majors"):
            out.append(_finding(
                "lxc_gpu_majors_missing", "high", subject,
                "no allow rule for %s" % ", ".join(
                    "%s (%d)" % (m["driver"], m["major"]) for m in ct["missing_majors"]),
                ", ".join("c %d:* rwm" % m["major"] for m in ct["missing_majors"]),
                "pct stop %s; add %s to %s; pct start %s" % (
                    ct["vmid"], "; ".join("lxc.cgroup2.devices.allow: c %d:* rwm" % m["major"]
                                          for m in ct["missing_majors"]),
                    ct.get("path"), ct["vmid"])))
        if ct.get("gpu") and not ct.get("onboot"):
            out.append(_finding(
                "lxc_onboot", "low", subject, "onboot: 0", "onboot: 1",
                "pct set %s --onboot 1 (else it stays down after every reboot)" % ct["vmid"]))


def _error_findings(facts, out):
    for error in facts.get("errors") or []:
        out.append(_finding(
            "audit_error", "medium", error["section"], error["error"], "readable",
            "report this with a capture: ansible-playbook gpuhost.tuning.capture"))


def _natural(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(text))]


def sort_findings(items):
    order = dict((fid, index) for index, fid in enumerate(FINDING_ORDER))
    return sorted(items, key=lambda f: (SEVERITY_RANK.get(f["severity"], 99),
                                        order.get(f["id"], len(order)),
                                        _natural(f["subject"])))


def findings(facts, wanted=None):
    """Ranked findings: worst severity first, then the field story's order, then subject."""
    wanted = merged_wanted(wanted)
    out = []
    _kernel_findings(facts, wanted, out)
    _gpu_driver_findings(facts, out)
    _pcie_findings(facts, wanted, out)
    _sysctl_findings(facts, wanted, out)
    _cpuidle_findings(facts, wanted, out)
    _cpufreq_findings(facts, wanted, out)
    _nvidia_findings(facts, wanted, out)
    _lxc_findings(facts, wanted, out)
    _error_findings(facts, out)
    return sort_findings(out)


# =========================================================================================
# per-check status (the reports' matrix)


def _applicable(facts, wanted):
    """check -> None (applies) or the reason it does not apply on this host."""
    gpus = facts.get("gpus") or []
    cpu = facts.get("cpu") or {}
    idle = cpu.get("cpuidle") or {}
    sysv = (facts.get("sysctl") or {}).get("values") or {}
    reasons = {}
    if not gpus:
        for check in ("pcie_mrrs", "pcie_link", "gpu_driver"):
            reasons[check] = "no NVIDIA GPU"
    if idle.get("driver") is None:
        reasons["cpuidle"] = "no cpuidle in sysfs (VM?)"
    elif not idle.get("states"):
        reasons["cpuidle"] = "cpuidle driver %s has no states" % idle.get("driver")
    elif _state_latency(idle["states"], wanted.get("cpuidle_deeper_than")) is None:
        reasons["cpuidle"] = "driver %s has no state %s (states: %s)" % (
            idle.get("driver"), wanted.get("cpuidle_deeper_than"),
            ", ".join(s["name"] for s in idle["states"]))
    if not (cpu.get("cpufreq") or {}).get("driver"):
        reasons["cpufreq"] = "no cpufreq driver (VM?)"
    if sysv.get("kernel.numa_balancing") is None:
        reasons["numa_balancing"] = "kernel.numa_balancing not present"
    if sysv and all(v is None for v in sysv.values()):
        reasons["sysctl"] = "no /proc/sys"
    if not facts.get("dkms"):
        reasons["dkms"] = "no DKMS modules"
    nv = facts.get("nvidia") or {}
    nv_dkms = [e for e in facts.get("dkms") or [] if e["name"].startswith("nvidia")]
    if not gpus and not nv.get("modules_loaded") and not nv_dkms:
        reasons["nvidia"] = "no NVIDIA driver"
    if not facts.get("lxc"):
        reasons["lxc"] = "no containers in %s" % wanted.get("lxc_config_dir")
    return reasons


def _notes(facts):
    """check -> a remark worth showing even when the check passed."""
    kern = facts.get("kernel") or {}
    notes = {}
    if kern.get("running") and kern.get("running_installed") is False:
        notes["kernel"] = ("running kernel %s is not installed here (booted from outside: "
                           "VM or container); nothing to check for the next boot"
                           % kern["running"])
    gpus = facts.get("gpus") or []
    if gpus and all(g.get("on_host_bridge") for g in gpus):
        notes["pcie_mrrs"] = "GPUs sit on the host bridge (VM passthrough): no bridge to check"
    return notes


def check_status(facts, items, wanted=None):
    """``{check: {label, status, count, note}}``: status is the worst severity of the
    check's findings, ``ok``, or ``n/a`` (with the reason in ``note``)."""
    wanted = merged_wanted(wanted)
    reasons = _applicable(facts, wanted)
    notes = _notes(facts)
    out = {}
    for check, label, _ids in CHECKS:
        mine = [f for f in items if CHECK_OF.get(f["id"]) == check]
        if mine:
            worst = min(mine, key=lambda f: SEVERITY_RANK[f["severity"]])["severity"]
            out[check] = {"label": label, "status": worst, "count": len(mine),
                          "note": reasons.get(check) or notes.get(check)}
        elif check in reasons:
            out[check] = {"label": label, "status": "n/a", "count": 0, "note": reasons[check]}
        else:
            out[check] = {"label": label, "status": "ok", "count": 0,
                          "note": notes.get(check)}
    return out


def audit(root="/", wanted=None, recorder=None):
    """Facts, findings and per-check status of the host under ``root``.

    Returns ``{facts..., findings, checks, collected_at}``.
    """
    wanted = merged_wanted(wanted)
    started = time.time()
    if recorder is not None:
        with recorder:
            facts = collect(root, wanted)
    else:
        facts = collect(root, wanted)
    items = findings(facts, wanted)
    result = dict(facts)
    result["findings"] = items
    result["checks"] = check_status(facts, items, wanted)
    result["collected_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    result["duration_s"] = round(time.time() - started, 3)
    result["root"] = root
    return result


def severity_at_least(severity, threshold):
    """True when ``severity`` is as bad as ``threshold`` or worse."""
    if threshold in (None, "", "none", "never"):
        return False
    return SEVERITY_RANK.get(severity, 99) <= SEVERITY_RANK[threshold]


# =========================================================================================
# capture: pack what the audit read into a tar.gz that audits the same elsewhere

# Files bigger than this are packed as a marker holding their size and SHA-256 (two markers
# are equal exactly when the files were: what the DKMS reader's byte comparison needs).
CAPTURE_MAX_FILE = 4 * 1024 * 1024
CAPTURE_PREFIXES = ("/sys/", "/proc/", "/etc/", "/lib/", "/lib64/", "/usr/lib/", "/usr/src/",
                    "/var/lib/dkms", "/boot", "/run/modprobe.d")
_READ_CHUNK = 65536


def _wanted_path(path):
    return any(path == p.rstrip("/") or path.startswith(p if p.endswith("/") else p + "/")
               or path == p for p in CAPTURE_PREFIXES)


class CaptureBuilder(object):
    """Collect entries (dirs, links, files) relative to ``root`` and write a tar.gz."""

    def __init__(self, root):
        self.root = os.path.abspath(root or "/")
        self.entries = {}
        self.skipped = []
        self.bytes = 0

    def _full(self, rel):
        return os.path.join(self.root, rel) if rel else self.root

    def _add_dir(self, rel, st):
        if rel and rel not in self.entries:
            self.entries[rel] = ("dir", st.st_mode & 0o7777, st.st_mtime, None)

    def _add_link(self, rel, st, target):
        self.entries[rel] = ("link", 0o777, st.st_mtime, target)

    def _add_file(self, rel, st, content):
        old = self.entries.get(rel)
        if old is not None and old[0] == "file" and old[3] is not None and content is None:
            return
        self.entries[rel] = ("file", st.st_mode & 0o7777, st.st_mtime, content)

    def _read(self, full, rel):
        """Read a file to its end (sysfs sizes lie: they say 4096 and hold less)."""
        chunks = []
        total = 0
        digest = hashlib.sha256()
        try:
            with io.open(full, "rb", buffering=0) as handle:
                while True:
                    chunk = handle.read(_READ_CHUNK)
                    if not chunk:
                        break
                    total += len(chunk)
                    digest.update(chunk)
                    if total <= CAPTURE_MAX_FILE:
                        chunks.append(chunk)
        except (IOError, OSError) as exc:
            self.skipped.append({"path": "/" + rel, "error": exc.strerror or str(exc)})
            return None
        if total > CAPTURE_MAX_FILE:
            return ("gpuhost-capture: file of %d bytes, sha256 %s\n"
                    % (total, digest.hexdigest())).encode()
        return b"".join(chunks)

    def add(self, path, kind):
        """Add host path ``path`` and every link and folder on the way to it."""
        pending = [p for p in path.split("/") if p]
        done = []
        hops = 0
        while pending:
            name = pending.pop(0)
            if name == ".":
                continue
            if name == "..":
                if done:
                    done.pop()
                continue
            rel = "/".join(done + [name])
            full = self._full(rel)
            try:
                st = os.lstat(full)
            except OSError:
                return
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > 40:
                    return
                try:
                    target = os.readlink(full)
                except OSError:
                    return
                self._add_link(rel, st, target)
                if target.startswith("/"):
                    done = []
                pending = [p for p in target.split("/") if p] + pending
                continue
            done.append(name)
            if pending:
                if not stat.S_ISDIR(st.st_mode):
                    return
                self._add_dir(rel, st)
                continue
            if stat.S_ISDIR(st.st_mode):
                self._add_dir(rel, st)
                if kind == "list":
                    self._add_children(rel)
            elif stat.S_ISREG(st.st_mode):
                content = self._read(full, rel) if kind == "read" else None
                self._add_file(rel, st, content)

    def _add_children(self, rel):
        """Names of a listed folder: folders and links always (empty), plain files as empty
        placeholders outside /sys and /proc (there a missing attribute beats an empty one)."""
        full = self._full(rel)
        pseudo = rel.startswith(("sys/", "proc/")) or rel in ("sys", "proc")
        try:
            names = os.listdir(full)
        except OSError:
            return
        for name in names:
            child = rel + "/" + name
            try:
                st = os.lstat(os.path.join(full, name))
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                if child not in self.entries:
                    try:
                        self._add_link(child, st, os.readlink(os.path.join(full, name)))
                    except OSError:
                        pass
            elif stat.S_ISDIR(st.st_mode):
                self._add_dir(child, st)
            elif stat.S_ISREG(st.st_mode) and not pseudo:
                self._add_file(child, st, None)

    def write(self, fileobj, manifest=None):
        """Write the tar.gz (entries sorted so parents come first) to ``fileobj``; the gzip
        header carries no time stamp, so the same tree packs to the same bytes."""
        with gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=0) as gz, tarfile.open(
                fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in sorted(self.entries):
                kind, mode, mtime, data = self.entries[rel]
                info = tarfile.TarInfo(rel)
                info.mode = mode
                info.mtime = int(mtime)
                info.uname = info.gname = "root"
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    info.mode = mode | 0o700
                    tar.addfile(info)
                elif kind == "link":
                    info.type = tarfile.SYMTYPE
                    info.linkname = data
                    tar.addfile(info)
                else:
                    data = data or b""
                    info.size = len(data)
                    info.mode = mode | 0o600
                    self.bytes += len(data)
                    tar.addfile(info, io.BytesIO(data))
            if manifest is not None:
                data = manifest.encode("utf-8")
                info = tarfile.TarInfo(".gpuhost-capture.json")
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))


def capture(root, wanted=None):
    """Audit ``root`` while recording reads; return ``(builder, audit_result, recorded)``."""
    recorder = ReadRecorder(root)
    result = audit(root, wanted, recorder=recorder)
    builder = CaptureBuilder(root)
    recorded = dict((p, k) for p, k in recorder.paths.items() if _wanted_path(p))
    for path in sorted(recorded):
        builder.add(path, recorded[path])
    return builder, result, recorded


def text_lines(items, limit=8):
    """Ranked findings as short log lines; findings of one id with the same values and the
    same remedy (up to their subject) collapse into one line listing the subjects."""
    groups = []
    index = {}
    for f in items:
        subject = str(f["subject"])
        template = f["remedy"].replace(subject, "<subject>") if subject else f["remedy"]
        key = (f["id"], f["severity"], f["current"], f["expected"], template)
        if key not in index:
            index[key] = len(groups)
            groups.append({"finding": f, "subjects": [], "template": template})
        groups[index[key]]["subjects"].append(subject)
    lines = []
    for group in groups:
        f = group["finding"]
        subjects = group["subjects"]
        shown = ", ".join(subjects[:limit])
        if len(subjects) > limit:
            shown += ", ... (%d more)" % (len(subjects) - limit)
        count = " x%d" % len(subjects) if len(subjects) > 1 else ""
        remedy = group["template"] if len(subjects) > 1 else f["remedy"]
        lines.append("%-8s %s%s [%s]: %s (want %s)%s. Fix: %s" % (
            f["severity"].upper(), f["id"], count, shown, f["current"], f["expected"],
            " [reboot]" if f.get("reboot_required") else "", remedy))
    return lines or ["no findings"]


def headline(items):
    """``worst high: 1 critical, 21 high`` or ``no findings``."""
    if not items:
        return "no findings"
    counts = dict((name, 0) for name in SEVERITIES)
    for f in items:
        counts[f["severity"]] += 1
    return "worst %s: %s" % (items[0]["severity"], ", ".join(
        "%d %s" % (counts[s], s) for s in SEVERITIES if counts[s]))
