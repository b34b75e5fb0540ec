# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lxc subject's part of the audit (platform/facts_base.py): each container config's
device rules against the drivers' character majors; the container config folder and the GPU
drivers whose majors a GPU container needs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import inside, names
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import procfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc, lxc_check

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


FACTS = (Fact(90, "lxc", lambda c: lxc_facts(c.root, c.wanted["lxc_config_dir"],
                                             c.wanted["lxc_gpu_drivers"]), []),)
WANTED = {
    "lxc_gpu_drivers": dict(type="list", elements="str",
                            default=["nvidia", "nvidia-uvm", "nvidia-caps"]),
    "lxc_config_dir": dict(type="path", default="/etc/pve/lxc"),
}


def wanted_rules(w):
    names("lxc_gpu_drivers", w.get("lxc_gpu_drivers"))
    inside(w, "lxc_config_dir")


CHECKS = (lxc_check,)
