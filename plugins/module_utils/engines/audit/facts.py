# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's facts: what the host under a root is, read from sysfs, procfs and files.

Nothing here writes or runs a command, so the same code reads a live host and an unpacked
capture of one. A missing file is a fact (None, an empty list), never an error; a reader that
fails unexpectedly is recorded in ``errors`` and the rest goes on.

``collect(root, wanted)`` -> facts (the schema of ``host_audit``'s RETURN). The checks
(``module_utils/checks``) judge them; ``wanted`` here only says what to read (sysctl keys,
GPU vendor and classes, the container config folder).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec, cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.device_nodes import (
    device_nodes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import (
    gpu_health,
    gpu_use,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs, sysinfo
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.nvlink import nvlink
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import aer
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import p2p
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement import placement
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import kernel_log
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import device_owner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import virt
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import vmgpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
    boot_params,
    gpu,
    idle_state_name,
    inside,
    int_range,
    names,
    sysctl_values,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy


def wanted_spec():
    """The wanted values, declared once: the suboptions of option ``wanted`` of host_audit,
    host_tune, audit_timer and post_boot_verify (doc fragment ``gpuhost.tuning.wanted``;
    role common composes them whole as ``__gpuhost_wanted``); their defaults complete
    ``merged_wanted``."""
    spec = argspec.gpu_selection()
    spec.update(argspec.boot_wanted())
    spec.update(
        mrrs_size=argspec.mrrs_size(),
        cpuidle_deeper_than=dict(type="str", default="C1"),
        sysctl=dict(type="dict", default={}),
        nvidia_uvm_disable_hmm=dict(type="bool", default=True),
        nvidia_uvm_modprobe_file=dict(type="path", default=sysinfo.UVM_MODPROBE_FILE),
        lxc_gpu_drivers=dict(type="list", elements="str",
                             default=["nvidia", "nvidia-uvm", "nvidia-caps"]),
        lxc_config_dir=dict(type="path", default="/etc/pve/lxc"),
        host=dict(type="str"),
        xid_window_days=dict(type="int", default=gpu_health.DEFAULT_WINDOW_DAYS),
        bandwidth_min_pct=dict(type="int", default=70),
        # operator policy (subjects/health/policy.py): judged in the checks, never read from the
        # host
        acknowledged=dict(type="list", elements="dict", default=[]),
        xid_policy=dict(type="list", elements="dict", default=[]),
        copy_rate_marks=dict(type="list", elements="dict", default=[]),
        gpu_count=dict(type="int"),
    )
    return spec


WANTED_KEYS = tuple(sorted(wanted_spec()))
# The version in which the per-key options (the wanted values as top-level options of
# host_audit, host_tune and post_boot_verify) stop working; ``wanted`` replaces them.
PER_KEY_REMOVED_IN = "0.3.0"


def wanted_option():
    """Option ``wanted``: the whole wanted values as one dict, typed and completed with
    their defaults by Ansible's validator (given or not)."""
    return dict(type="dict", default={}, options=wanted_spec())


def per_key_spec(keys=WANTED_KEYS):
    """The deprecated per-key options ``keys``: each a top-level copy of its wanted spec."""
    spec = wanted_spec()
    return dict((key, spec[key]) for key in keys)


def wanted_values(p, per_key=()):
    """The wanted values of a module taking option ``wanted`` (completed, the deprecated
    per-key options ``per_key`` over it), checked; returns them."""
    try:
        w = wanted_intake(p, per_key)
    except ValueError as exc:
        raise ValidationError("wanted: %s" % exc)
    int_range("bandwidth_min_pct", w.get("bandwidth_min_pct"), 1, 100)
    sysctl_values("sysctl", w.get("sysctl"))
    idle_state_name("cpuidle_deeper_than", w.get("cpuidle_deeper_than"))
    if w.get("boot_params"):
        boot_params("boot_params", w["boot_params"])
    names("lxc_gpu_drivers", w.get("lxc_gpu_drivers"))
    inside(dict(w, root=p.get("root") or "/"), "lxc_config_dir")
    gpu(w, "gpu_vendor", "gpu_classes")
    try:    # the operator policy: acknowledged findings, XID overrides, copy rate marks
        policy.check_options(w, check_registry.finding_order())
    except ValueError as exc:
        raise ValidationError(str(exc))
    return w


def merged_wanted(wanted):
    """``wanted`` completed with the defaults of ``wanted_spec`` (None counts as not given)."""
    return argspec.fill(wanted_spec(), wanted)


def wanted_intake(params, per_key=(), deprecate=None):
    """The whole wanted values a module was given: its option ``wanted``, then each of the
    deprecated per-key options ``per_key`` that is set to something other than its default
    (it wins over ``wanted``; ``deprecate(text)`` is told its name). Typed and complete
    (``merged_wanted``); ValueError names a bad value."""
    wanted = dict(params.get("wanted") or {})
    spec = wanted_spec()
    used = []
    for key in per_key:
        value = params.get(key)
        if value is not None and value != spec[key].get("default"):
            wanted[key] = value
            used.append(key)
    if used and deprecate is not None:
        deprecate("option%s %s: pass %s inside option wanted (role common's __gpuhost_wanted);"
                  " the per-key options stop working in gpuhost.tuning %s" % (
                      "s" if len(used) > 1 else "", ", ".join(used),
                      "them" if len(used) > 1 else "it", PER_KEY_REMOVED_IN))
    return merged_wanted(wanted)


def _guard(errors, section, func, default=None):
    """Run one fact reader; an unexpected failure is a recorded error, not a crash."""
    try:
        return func()
    except Exception as exc:  # noqa: BLE001 - one reader must not sink the whole audit
        errors.append({"section": section, "error": "%s: %s" % (type(exc).__name__, exc)})
        return default


def cpu_facts(root):
    identity = sysinfo.cpu_identity(root)
    driver = cpu.cpuidle_driver(root)
    states = []
    if driver not in (None, "none"):
        states = [{"name": s["name"], "desc": s.get("desc"), "latency_us": s["latency_us"],
                   "cpus": len(s["cpus"]), "cpus_disabled": len(s["cpus_disabled"]),
                   "cpus_enabled_list": cpu.format_cpu_list(
                       sorted(set(s["cpus"]) - set(s["cpus_disabled"])))}
                  for s in cpu.summarize_states(root)]
    freq = cpu.cpufreq_info(root)
    return {
        "vendor": identity["vendor"],
        "model_name": identity["model_name"],
        "cppc": "cppc" in identity["flags"],
        "hypervisor": "hypervisor" in identity["flags"],
        "online": len(cpu.online_cpus(root)),
        "cpuidle": {
            "driver": driver,
            "governor": cpu.cpuidle_governor(root) if driver is not None else None,
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


def _device_summary(dev):
    try:
        info = pci.summary(dev)
        info["error"] = None
    except (pci.PciError, IOError, OSError, ValueError, IndexError) as exc:
        info = {
            "address": dev.address, "vendor": dev.vendor, "device": dev.device,
            "class": dev.pci_class, "driver": dev.driver, "numa_node": dev.numa_node,
            "max_read_request_size": None, "max_payload_size": None,
            "max_payload_size_supported": None, "link": dev.link,
            "error": str(exc),
        }
    return info


def gpu_facts(root, vendor, classes):
    devs = pci.select_devices(root, vendor, classes)
    owners = device_owner.owners(root, devs)
    gpus = []
    for dev in devs:
        info = _device_summary(dev)
        info["owner"] = owners[dev.address]
        info["upstream"] = [_device_summary(bridge) for bridge in dev.upstream()]
        info["on_host_bridge"] = not info["upstream"]
        gpus.append(info)
    return gpus


def _host_placement(found, gpus):
    """``gpu_placement`` without the GPUs a VM or vGPU owns (the NUMA rules are the host's)."""
    others = set(g["address"] for g in gpus or [] if not device_owner.host_owned(
        g.get("owner", "host")))
    if not others:
        return found
    for ct in (found or {}).get("containers") or []:
        ct["gpus"] = [g for g in ct["gpus"] if g.get("address") not in others]
        ct["gpu_nodes"] = sorted(set(g["numa_node"] for g in ct["gpus"] if g["numa_node"] >= 0))
    return found


def nvidia_facts(root, running):
    loaded = procfs.loaded_modules(root)
    loaded_set = set(loaded)
    hmm = sysinfo.module_param(root, "nvidia_uvm", "uvm_disable_hmm")
    configured = sysinfo.modprobe_options(root, "nvidia_uvm")

    def presence(name):
        is_loaded = name in loaded_set or hostfs.isdir(host_path(root, "/sys/module/" + name))
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
            for e in dkms.tree_status(root)]


FIXED_GPU_MAJORS = frozenset(lxc.FIXED_MAJORS.values())


def lxc_facts(root, config_dir, gpu_drivers):
    majors = procfs.char_majors(root)
    registered = procfs.registered_char_majors(root)
    out = []
    for vmid, path in lxc.list_configs(root, config_dir):
        config = lxc.LxcConfig.read(path)
        rules = config.allow_rules()
        allowed = sorted(set(r["major"] for r in rules
                             if r["type"] == "c" and isinstance(r["major"], int)))
        gpu = lxc.binds_nvidia(config)
        everything = any(r["type"] == "a" or (r["type"] == "c" and r["major"] == "*")
                         for r in rules)
        missing = []
        # Containers given the GPUs by raw cgroup rules need one per driver major; devN
        # entries (PVE 8.1+) are resolved at start and need none.
        if 195 in allowed and not everything:
            for drv in gpu_drivers:
                found, _registered = lxc.driver_majors(drv, majors)
                for major in found:
                    if major not in allowed:
                        missing.append({"driver": drv, "major": major})
        entry = {
            "vmid": vmid,
            "path": "/" + os.path.relpath(path, os.path.abspath(root or "/")),
            "onboot": config.onboot,
            "gpu": gpu,
            "allowed_majors": allowed,
            # NVIDIA's fixed majors (195) are the driver's own even while it is not loaded
            # (audited before nvidia loads, or on a host where it failed): never stale, the
            # same rule the repair (lxc_cgroup_devices) keeps them by.
            "stale_majors": [m for m in lxc.stale_majors(config, registered)
                             if m not in FIXED_GPU_MAJORS] if registered else [],
            "missing_majors": missing,
        }
        v1_lines = config.cgroup_v1_lines()
        if v1_lines:  # only where there are any: the facts of other containers unchanged
            entry["cgroup_v1_lines"] = v1_lines
        out.append(entry)
    return out


def collect(root, wanted=None, outputs=None):
    """Every fact of the audit schema; see the host_audit module's RETURN. ``outputs`` (a
    cmdout.CommandOutputs) holds the two command outputs of a live audit (nvidia-smi, the
    journal); by default one is made for ``root`` without a module's runner."""
    wanted = merged_wanted(wanted)
    root = root or "/"
    if outputs is None:
        outputs = cmdout.CommandOutputs(root)
    # One reading session: links inside the root resolved once per folder, and every file
    # refused (a FIFO, a device, over its cap) or line skipped becomes an entry in errors.
    with hostfs.session() as reading:
        facts = _collect(root, wanted, outputs)
    for section, message in reading.problems:
        facts["errors"].append({"section": section, "error": message})
    return facts


def _collect(root, wanted, outputs):
    errors = []
    facts = {}
    # A container or a VM guest is said first: the roles that change a host refuse one.
    facts["virt"] = _guard(errors, "virt", lambda: virt.detect(root), {
        "kind": "unknown", "guest": None, "technology": None, "proxmox_node": None,
        "evidence": [], "dmi": {}})
    facts["kernel"] = _guard(errors, "kernel", lambda: boot_facts.kernel_facts(root), {})
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
    # Before nvidia-smi runs (it creates nvidiaN and nvidiactl): the nodes as the
    # containers that started at boot found them.
    facts["device_nodes"] = _guard(errors, "device_nodes", lambda: device_nodes.collect(
        root, outputs, wanted["lxc_config_dir"], facts["char_majors"] or {}),
        {"available": False, "error": "not read", "containers": [], "units": []})
    facts.update(gpu_health.collect(
        root, outputs, (facts["nvidia"] or {}).get("driver_version"),
        int(wanted.get("xid_window_days") or gpu_health.DEFAULT_WINDOW_DAYS),
        lxc=facts["lxc"], lxc_config_dir=wanted["lxc_config_dir"],
        guard=lambda section, func, default: _guard(errors, section, func, default)))
    facts["nvlink"] = _guard(errors, "nvlink", lambda: nvlink.facts(
        outputs, facts.get("nvidia_smi") or {}, facts.get("fabric_manager") or {}),
        {"checked": False, "reason": "not read", "available": False, "gpus": []})
    facts["pcie_aer"] = _guard(errors, "pcie_aer", lambda: aer.collect(
        root, wanted["gpu_vendor"], wanted["gpu_classes"]), [])
    others = [g["address"] for g in facts["gpus"] or []
              if not device_owner.host_owned(g.get("owner", "host"))]
    facts["p2p"] = _guard(errors, "p2p", lambda: p2p.collect(
        root, wanted["gpu_vendor"], wanted["gpu_classes"], skip=others), {})
    placed = _guard(errors, "gpu_placement", lambda: placement.collect(
        root, wanted["lxc_config_dir"]), {})
    facts["passthrough"] = _guard(errors, "passthrough", lambda: vmgpu.collect(
        root, (placed or {}).get("containers") or []), {})
    facts["gpu_placement"] = _host_placement(placed, facts["gpus"])
    window = int(wanted.get("xid_window_days") or gpu_health.DEFAULT_WINDOW_DAYS)
    facts["host_health"] = _guard(errors, "host_health", lambda: kernel_log.health_facts(
        root, outputs, window, boot_time=kernel_log.boot_time(root)), {"available": False})
    facts["gpu_count"] = _guard(errors, "gpu_count", lambda: gpu_use.count_facts(
        root, facts["gpus"], facts.get("nvidia_smi"), facts["host_health"],
        wanted.get("gpu_count")), {})
    facts["gpu_processes"] = _guard(errors, "gpu_processes", lambda: gpu_use.process_facts(
        root, facts.get("nvidia_smi"), facts["gpu_placement"]), [])
    facts["errors"] = errors
    return facts
