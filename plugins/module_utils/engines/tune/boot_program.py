# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The program that runs at boot: re-applies the runtime tuning that does not survive a
reboot or driver reload.

PCIe Max Read Request Size (Device Control bits 14:12, masked write, read back) on every
GPU the host owns at this boot and its upstream bridges (``subjects/pcie/device_owner.py``: a GPU
bound to
vfio-pci or pci-stub now, or named by a VM config or split for vGPU, is left alone), and
the CPU idle states deeper than a named one (per-CPU ``disable`` flags). Run by the
systemd unit ``gpuhost-tuning.service``::

    PYTHONPATH=/usr/local/lib/gpuhost-tuning /usr/bin/python3 -m \\
        ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune.boot_program \\
        --config /etc/gpuhost-tuning/boot.json

Stdlib + hostfs/pci/passthrough/cpu only: ``engines/tune/boot_service.py`` (module
``boot_service``, the
installer) copies this file and those, byte for byte, under ``/usr/local/lib/gpuhost-tuning``
so the boot-time code is the code the modules run. Each line printed goes to the journal
under systemd; the exit status is non-zero, naming every device or CPU state that did not
take, when anything failed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import sys

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpuidle_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq

MODULE = "ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune.boot_program"
CONFIG_PATH = "/etc/gpuhost-tuning/boot.json"
TAG = "gpuhost-tuning"


class ConfigError(Exception):
    """The boot config is missing or malformed; the message names the file and the key."""


def load_config(path):
    try:
        with hostfs.open_read(path, "r") as handle:
            # depth-bounded, no NaN: a deep file is a clear error, not a RecursionError
            config = bounded.json_loads(handle.read())
    except (IOError, OSError) as exc:
        raise ConfigError("cannot read %s: %s (reinstall with the tune playbook)" % (path, exc))
    except ValueError as exc:
        raise ConfigError("%s is not valid JSON: %s" % (path, exc))
    if not isinstance(config, dict):
        raise ConfigError("%s: expected a JSON object with keys mrrs and cpuidle" % path)
    mrrs = config.get("mrrs")
    if mrrs is not None:
        if not isinstance(mrrs, dict) or "size" not in mrrs:
            raise ConfigError("%s: mrrs must be null or an object with size" % path)
        try:
            setpci_maxreadreq.size_field(mrrs["size"])
        except ValueError as exc:
            raise ConfigError("%s: mrrs.size: %s" % (path, exc))
    idle = config.get("cpuidle")
    if idle is not None and (not isinstance(idle, dict) or not idle.get("deeper_than")):
        raise ConfigError("%s: cpuidle must be null or an object with deeper_than" % path)
    return config


def apply_mrrs(root, conf, log):
    """Set MRRS per the config; return the addresses that did not take (or a whole-step
    failure as one item)."""
    size = int(conf["size"])
    try:
        result = setpci_maxreadreq.tune_mrrs(
            root, size=size, vendor=conf.get("vendor", pci.NVIDIA_VENDOR),
            classes=conf.get("classes", list(pci.GPU_CLASSES)),
            include_upstream=conf.get("include_upstream", True), method="sysfs")
    except (ValueError, pci.PciError, OSError) as exc:
        log("MRRS: FAILED before any write: %s" % exc)
        return ["MRRS (nothing written)"]
    if not result["devices"]:
        log("MRRS: no device of vendor %s, classes %s: nothing to do"
            % (conf.get("vendor"), ", ".join(conf.get("classes") or [])))
    for dev in result["devices"]:
        name = "%s (%s %s:%s)" % (dev["address"], dev["role"], dev["vendor"], dev["device"])
        if dev.get("skipped_reason"):
            log("MRRS %s: skipped: %s" % (name, dev["skipped_reason"]))
        elif dev.get("error"):
            log("MRRS %s: FAILED: %s" % (name, dev["error"]))
        elif dev["before"] == dev["after"]:
            log("MRRS %s: already %s bytes" % (name, dev["after"]))
        else:
            log("MRRS %s: %s -> %s bytes (Device Control %s -> %s, read back)"
                % (name, dev["before"], dev["after"], dev["devctl_before"], dev["devctl_after"]))
    return list(result["failed_devices"])


def apply_cpuidle(root, conf, log):
    """Disable idle states deeper than ``conf['deeper_than']`` on every online CPU; return
    the failures (empty when done, or when this host has no cpuidle driver)."""
    ref = conf["deeper_than"]
    driver = cpu.cpuidle_driver(root)
    if not cpu.cpuidle_available(root):
        log("cpuidle: no idle driver with states (%s): nothing to do"
            % (driver or "no cpuidle folder"))
        return []
    states = cpu.read_states(root, brief=True)
    try:
        selection = cpuidle_state.select_states(root, deeper_than=ref, states=states)
    except cpu.CpuError as exc:
        log("cpuidle: WARNING %s: nothing disabled" % exc)
        return []
    try:
        outcome = cpuidle_state.set_states(root, selection, True)
    except cpu.CpuError as exc:
        log("cpuidle: FAILED: %s" % exc)
        return ["cpuidle states deeper than %s" % ref]
    by_name = {}
    for number, name in outcome["changed"]:
        by_name.setdefault(name, ([], []))[0].append(number)
    for number, name in outcome["unchanged"]:
        by_name.setdefault(name, ([], []))[1].append(number)
    if not by_name:
        log("cpuidle (%s): no state deeper than %s on any online CPU" % (driver, ref))
    for name in sorted(by_name):
        done, already = by_name[name]
        log("cpuidle (%s): %s disabled now on CPUs %s; already disabled on CPUs %s"
            % (driver, name, cpu.format_cpu_list(done) or "none",
               cpu.format_cpu_list(already) or "none"))
    return []


def run(root, config, log=None):
    """Apply the config under ``root``; return ``(exit_status, failures)``."""
    if log is None:
        def log(line):
            sys.stdout.write("%s: %s\n" % (TAG, line))
            sys.stdout.flush()
    failures = []
    if config.get("mrrs"):
        failures += apply_mrrs(root, config["mrrs"], log)
    else:
        log("MRRS: off in the config")
    if config.get("cpuidle"):
        failures += apply_cpuidle(root, config["cpuidle"], log)
    else:
        log("cpuidle: off in the config")
    if failures:
        log("FAILED: did not take on %s" % ", ".join(failures))
        return 1, failures
    log("done: settings applied and read back")
    return 0, failures


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m " + MODULE,
        description="Re-apply PCIe MRRS and CPU idle-state settings (gpuhost-tuning.service).")
    parser.add_argument("--config", default=CONFIG_PATH, help="boot config (JSON)")
    parser.add_argument("--root", default="/", help="host root (a test tree; default /)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write("%s: FAILED: %s\n" % (TAG, exc))
        return 2
    status, failures = run(args.root, config)
    if failures:
        sys.stderr.write("%s: FAILED on %s (details above)\n" % (TAG, ", ".join(failures)))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
