# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA placement of GPU containers: which GPUs a Proxmox container is given, the NUMA
nodes they hang off, and the CPUs and memory nodes the container may use.

Sources, all files:

- a container's GPUs: its live ``devN: /dev/nvidia3`` entries (PVE 8.1+) and
  ``lxc.mount.entry: /dev/nvidia3 dev/nvidia3 ...`` binds; ``/dev/nvidiaN`` is minor N;
- minor -> PCI device: ``/proc/driver/nvidia/gpus/<address>/information`` (``Device Minor:``
  and ``Bus Location:`` lines); the GPU's node: its sysfs ``numa_node`` (-1: unknown);
- node -> CPUs: ``/sys/devices/system/node/nodeN/cpulist``;
- the container's CPUs: ``lxc.cgroup2.cpuset.cpus`` (and ``.mems``). Without it, a
  container with ``cores: N`` is placed and moved by ``pvestatd`` every few seconds
  (least-loaded CPUs, no regard for NUMA); one without ``cores`` may run on every CPU.
  ``pvestatd`` leaves a container with a cpuset key alone.

The tune part that pins a container writes the two cpuset keys; it is in
subjects/placement/placement_write.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.aer import item
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    numbered_entries,
    read_text,
)

NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
NODE_SYSFS = "/sys/devices/system/node"
CPUSET_KEYS = (lxc.CPUSET_CPUS_KEY, "lxc.cgroup.cpuset.cpus")
MEMS_KEYS = (lxc.CPUSET_MEMS_KEY, "lxc.cgroup.cpuset.mems")

_NODE = re.compile(r"^node(\d+)$")
_DEV_NVIDIA = re.compile(r"^/dev/nvidia(\d+)$")
_INFO_LINE = re.compile(r"^([^:]+):\s*(.*?)\s*$")


def parse_information(text):
    """``/proc/driver/nvidia/gpus/<address>/information`` -> ``{key: value}`` (``Model``,
    ``Bus Location``, ``Device Minor``, ...; the driver pads with tabs and spaces)."""
    out = {}
    for line in (text or "").splitlines():
        match = _INFO_LINE.match(line)
        if match:
            out[match.group(1).strip()] = match.group(2)
    return out


def gpu_minors(root):
    """``{minor: PCI address}`` of the GPUs the nvidia driver registered (empty without
    the driver). The address comes from ``Bus Location`` (else the folder's name)."""
    folder = host_path(root, NVIDIA_GPUS)
    try:
        names = sorted(hostfs.listdir(folder))
    except OSError:
        return {}
    out = {}
    for name in names:
        info = parse_information(read_text(os.path.join(folder, name, "information")))
        try:
            minor = int(info.get("Device Minor", ""))
        except ValueError:
            continue
        try:
            out[minor] = pci.normalize_address(info.get("Bus Location") or name)
        except ValueError:
            continue
    return out


def node_cpus(root):
    """``{node: [cpus]}`` from ``/sys/devices/system/node/node*/cpulist`` (empty when the
    folder is missing: a kernel without NUMA, a container's /sys)."""
    out = {}
    for number, path in numbered_entries(host_path(root, NODE_SYSFS), _NODE):
        text = read_text(os.path.join(path, "cpulist"))
        if text is None:
            continue
        out[number] = cpu.parse_cpu_list(text)
    return out


def container_gpu_minors(config):
    """Minors of the ``/dev/nvidiaN`` devices the live section passes in (``devN:`` and
    ``lxc.mount.entry`` binds), sorted."""
    paths = [d.get("path") or "" for d in config.dev_entries()]
    paths += [m.get("source") or "" for m in config.mount_entries()]
    minors = set()
    for path in paths:
        match = _DEV_NVIDIA.match(path.strip())
        if match:
            minors.add(int(match.group(1)))
    return sorted(minors)


def _first(config, keys):
    for key in keys:
        value = lxc.live_value(config, key)
        if value is not None:
            return key, value
    return None, None


def nodes_of(cpus, nodes):
    """The nodes holding any of ``cpus`` (``nodes``: ``{node: [cpus]}``), sorted."""
    wanted = set(cpus)
    return sorted(n for n, members in nodes.items() if wanted & set(members))


def collect(root, config_dir=lxc.DEFAULT_CONFIG_DIR):
    """The audit's ``gpu_placement`` facts: ``{nodes: {node: cpulist}, containers: [...]}``.

    One entry per container config that passes in at least one ``/dev/nvidiaN``: ``vmid,
    path, minors, gpus ([{minor, address, numa_node}], address None for a minor the driver
    does not list), gpu_nodes, cores, cpuset_key, cpuset_cpus, cpu_nodes, cpuset_mems,
    mem_nodes``."""
    nodes = node_cpus(root)
    minors = gpu_minors(root)
    numa = {}
    out = []
    for vmid, path in lxc.list_configs(root, config_dir):
        config = lxc.LxcConfig.read(path)
        used = container_gpu_minors(config)
        if not used:
            continue
        gpus = []
        for minor in used:
            address = minors.get(minor)
            if address is not None and address not in numa:
                try:
                    numa[address] = pci.PciDevice(root, address).numa_node
                except pci.PciError:
                    numa[address] = -1
            gpus.append({"minor": minor, "address": address,
                         "numa_node": numa.get(address, -1) if address else -1})
        key, cpus_text = _first(config, CPUSET_KEYS)
        _mkey, mems_text = _first(config, MEMS_KEYS)
        cpus = _parse_list(cpus_text)
        mems = _parse_list(mems_text)
        cores = lxc.live_value(config, "cores")
        out.append({
            "vmid": vmid,
            "path": "/" + os.path.relpath(path, os.path.abspath(root or "/")),
            "minors": used,
            "gpus": gpus,
            "gpu_nodes": sorted(set(g["numa_node"] for g in gpus if g["numa_node"] >= 0)),
            "cores": int(cores) if cores and cores.isdigit() else None,
            "cpuset_key": key,
            "cpuset_cpus": cpus_text,
            "cpu_nodes": nodes_of(cpus, nodes) if cpus is not None else None,
            "cpuset_mems": mems_text,
            "mem_nodes": mems,
        })
    return {"nodes": dict((str(n), cpu.format_cpu_list(c)) for n, c in nodes.items()),
            "containers": out}


def _parse_list(text):
    if text is None:
        return None
    try:
        return cpu.parse_cpu_list(text)
    except ValueError:
        return None


def applies(placement):
    """None when the placement checks apply, else why not."""
    placement = placement or {}
    if len(placement.get("nodes") or {}) < 2:
        return "one NUMA node (or none listed in %s)" % NODE_SYSFS
    if not placement.get("containers"):
        return "no container is given a /dev/nvidiaN"
    return None


def wanted_sets(container, nodes, everywhere=False):
    """``(cpus text, mems text)`` a container should be pinned to: the CPUs and memory of
    its GPUs' nodes; ``(None, None)`` when its GPUs' nodes are unknown, or are all nodes
    (unless ``everywhere``: a container pinned elsewhere than its GPUs gets all of them)."""
    gpu_nodes = container.get("gpu_nodes") or []
    all_nodes = sorted(int(n) for n in nodes)
    if not gpu_nodes or (gpu_nodes == all_nodes and not everywhere):
        return None, None
    cpus = []
    for node in gpu_nodes:
        cpus.extend(cpu.parse_cpu_list(nodes.get(str(node)) or ""))
    return cpu.format_cpu_list(cpus), cpu.format_cpu_list(gpu_nodes)


def _pin_hint(ct, nodes, host):
    cpus, mems = wanted_sets(ct, nodes)
    if cpus is None:
        return None
    return ("pct stop %s; add to %s: %s: %s and %s: %s; pct start %s; or ansible-playbook "
            "gpuhost.tuning.tune%s -e gpuhost_tune_numa_pin=true (written now, applied at "
            "the container's next start)" % (
                ct["vmid"], ct["path"], lxc.CPUSET_CPUS_KEY, cpus,
                lxc.CPUSET_MEMS_KEY, mems, ct["vmid"], " -l %s" % host if host else ""))


TRADE_OFF = ("Trade-off: the container then runs on those CPUs only (%s of the host's "
             "CPUs) and pvestatd no longer balances it; size cores to match")


def _context(placement, ct, host):
    nodes = placement.get("nodes") or {}
    total = sum(len(cpu.parse_cpu_list(v)) for v in nodes.values())
    cpus, _mems = wanted_sets(ct, nodes)
    size = len(cpu.parse_cpu_list(cpus)) if cpus else total
    gpus = ", ".join("%s (node %s)" % (g["address"], g["numa_node"])
                     for g in ct["gpus"] if g.get("address"))
    return _pin_hint(ct, nodes, host), TRADE_OFF % ("%d of %d" % (size, total)), gpus


def _plural(items):
    return "s" if len(items) != 1 else ""


def _nodes_text(items):
    return ",".join(str(n) for n in items)


def mismatch_findings(placement, host=None):
    """``gpu_numa_mismatch`` (without its id): a container whose cpuset (or mems) reaches
    nodes none of its GPUs are on, or misses a node one of them is on; high when no CPU of
    it is on a GPU's node."""
    if applies(placement):
        return []
    out = []
    for ct in placement.get("containers") or []:
        gpu_nodes = ct.get("gpu_nodes") or []
        cpu_nodes = ct.get("cpu_nodes")
        if not gpu_nodes or cpu_nodes is None:
            continue
        mem_nodes = ct.get("mem_nodes") or []
        off_cpu = set(cpu_nodes) - set(gpu_nodes)
        missing = set(gpu_nodes) - set(cpu_nodes)
        off_mem = set(mem_nodes) - set(gpu_nodes)
        if not (off_cpu or missing or off_mem):
            continue
        hint, trade, gpus = _context(placement, ct, host)
        current = "CPUs %s on node%s %s" % (ct["cpuset_cpus"], _plural(cpu_nodes),
                                            _nodes_text(cpu_nodes) or "(none)")
        if mem_nodes:
            current += "; memory on node%s %s" % (_plural(mem_nodes), _nodes_text(mem_nodes))
        expected = "CPUs%s on node%s %s, where its GPUs are" % (
            " and memory" if mem_nodes else "", _plural(gpu_nodes), _nodes_text(gpu_nodes))
        remedy = hint or "set %s to CPUs of node%s %s" % (
            ct.get("cpuset_key") or lxc.CPUSET_CPUS_KEY, _plural(gpu_nodes),
            _nodes_text(gpu_nodes))
        out.append(item(
            "high" if not set(cpu_nodes) & set(gpu_nodes) else "medium",
            "lxc %s" % ct["vmid"], current, expected, remedy + ". " + trade,
            detail="GPUs %s; every host-device copy and kernel launch from CPUs on another "
                   "node crosses the inter-socket link (lower pinned-memory bandwidth, "
                   "higher launch latency)" % gpus))
    return out


def unpinned_findings(placement, host=None):
    """``gpu_container_unpinned`` (without its id): a GPU container without a cpuset whose
    GPUs sit on some nodes only: medium with ``cores:`` (pvestatd moves it), low without
    (it may run on every CPU)."""
    if applies(placement):
        return []
    out = []
    for ct in placement.get("containers") or []:
        gpu_nodes = ct.get("gpu_nodes") or []
        if not gpu_nodes or ct.get("cpu_nodes") is not None:
            continue
        hint, trade, gpus = _context(placement, ct, host)
        if hint is None:
            continue  # its GPUs sit on every node: any CPU is near one of them
        if ct.get("cores"):
            level = "medium"
            current = ("cores: %d, no cpuset: pvestatd picks and moves its CPUs with no "
                       "regard for NUMA" % ct["cores"])
        else:
            level, current = "low", "no cores and no cpuset: may run on every CPU of all nodes"
        out.append(item(
            level, "lxc %s" % ct["vmid"], current,
            "%s and %s on node%s %s, where its GPUs are" % (
                lxc.CPUSET_CPUS_KEY, lxc.CPUSET_MEMS_KEY, _plural(gpu_nodes),
                _nodes_text(gpu_nodes)),
            hint + ". " + trade, detail="GPUs %s" % gpus))
    return out


# --- the opt-in tune part: pin GPU containers to their GPUs' nodes ----------------------
