# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peermem subject's part of the audit (platform/facts_base.py): the NVIDIA kernel
modules (driver version, loaded modules, nvidia_uvm's HMM switch, nvidia_peermem and
ib_core) and the wanted nvidia_uvm settings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs, sysinfo
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import nvidia_check


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


FACTS = (Fact(60, "nvidia", lambda c: nvidia_facts(c.root, c.get("kernel", {}).get("running")),
              {}),)
WANTED = {
    "nvidia_uvm_disable_hmm": dict(type="bool", default=True),
    "nvidia_uvm_modprobe_file": dict(type="path", default=sysinfo.UVM_MODPROBE_FILE),
}
CHECKS = (nvidia_check,)
