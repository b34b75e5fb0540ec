#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_state
short_description: Read the NVIDIA driver of a host and its GPU containers; gate an upgrade
version_added: 0.1.0
description:
  - "Host: the loaded module's version and flavour (C(/proc/driver/nvidia/version), else
    C(/sys/module/nvidia/version)), how the driver was installed (Debian's packages,
    NVIDIA's repository packages by their maintainer, or the C(.run) installer by its own
    records C(/var/lib/nvidia/log) and C(/usr/bin/nvidia-uninstall)), the NVIDIA DKMS
    modules per kernel (C(/var/lib/dkms), no dkms run), the running kernel and the one
    that boots next, and fabric manager's version on NVSwitch hosts."
  - "Each GPU container: where its root file system is on the host (C(/etc/pve/storage.cfg);
    a root C(pct mount) mounted is read at C(/var/lib/lxc/<vmid>/rootfs)) and how its NVIDIA
    user space comes - LXC's nvidia mount hook, bind mounts of the host's libraries, or
    installed in its root by packages or by a C(.run --no-kernel-module) - with the version
    the loader would load (C(libcuda.so.1) in the loader's folders; CUDA's
    forward-compatibility libraries do not count unless the loader path selects them).
    The container is never started."
  - "With O(target_version), the gate: before the reboot the target must be installed by
    DKMS for the next kernel and every module file that kernel would load must hold it
    (the file modprobe picks by the kernel's C(modules.dep), else depmod's order with
    C(updates/) first; its version is the ELF C(.modinfo) C(version=) string, C(.ko.xz)
    read here, C(.ko.zst) by C(modinfo); an empty, unreadable or old file is a refusal
    naming it with the C(dkms install --force) that fixes it), every GPU container must
    match it and hold no NVIDIA library or driver package at another version (installed
    at the target, or the host's user space at the target through a bind mount or the
    hook) and fabric manager must be at the target on NVSwitch hosts; after the boot the
    loaded module and each container's user space must be the target. Each refusal names
    the container or the host part, what it has and what it lacks. A refusal does not fail the task
    (RV(gate.ok) is false); the role asserts."
options:
  root:
    description: Host root every path is read under.
    type: path
    default: /
  target_version:
    description:
      - The driver version the gate judges against (NNN.NN.NN or NNN.NN, for example
        V(590.48.01)); without it there is no RV(gate). Anything else fails the task.
    type: str
  next_kernel:
    description:
      - The kernel release that boots next; default the one the audit's rule finds (boot
        loader pins and default entry, else the newest installed kernel).
    type: str
  phase:
    description:
      - Which gate - V(before_reboot) (staged for the next boot) or V(after_boot) (running).
    type: str
    default: before_reboot
    choices: [before_reboot, after_boot]
  containers:
    description:
      - Container ids to read; default every GPU container (a config that allows major 195
        or binds C(/dev/nvidia*)). An id without a config fails the task.
    type: list
    elements: int
notes:
  - Read-only; check mode runs the same. Every read is under O(root) and capped in size;
    the one command is C(modinfo -F) on a C(.ko.zst) module (bounded in time).
seealso:
  - module: gpuhost.tuning.kernel_state
  - module: gpuhost.tuning.dkms_build
  - module: gpuhost.tuning.container_verify
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the driver of the host and its GPU containers
  gpuhost.tuning.driver_state:
  register: driver

- name: Gate the reboot into 590.48.01
  gpuhost.tuning.driver_state:
    target_version: "590.48.01"
  register: driver_gate

- name: Refuse the reboot with every reason
  ansible.builtin.assert:
    that: driver_gate.gate.ok
    fail_msg: "{{ driver_gate.gate.refusals | join('; ') }}"

- name: After the boot, the module and every container at the target
  gpuhost.tuning.driver_state:
    target_version: "590.48.01"
    phase: after_boot
  register: driver_after
"""

RETURN = r"""
host:
  description:
    - "C(loaded): C({version, flavour, source}) - flavour C(open) or C(proprietary), source
      the file read (all null when no module is loaded)."
    - "C(installed): C({method, version, packages, evidence}) - method C(debian),
      C(nvidia-repo), C(run), C(none) or C(unknown) (with a C(note)); packages
      C([{name, version}]) with Debian versions; evidence the host paths read."
    - "C(dkms): the NVIDIA DKMS modules, each C({module, version, kernel, arch, state,
      modules}) (modules: the installed C(.ko) paths)."
    - "C(kernels): C({running, next}); C(fabricmanager): C({needed, version})."
    - "C(next_modules): what the next kernel would load of its NVIDIA DKMS modules, each
      C({module, path, source, version, vermagic, error}) - path the file modprobe picks,
      source C(modules.dep) or C(search order), version and vermagic from its
      C(.modinfo), error why it cannot be read (null when it reads)."
  returned: always
  type: dict
  sample: {"loaded": {"version": "580.95.05", "flavour": "open",
                      "source": "/proc/driver/nvidia/version"},
           "installed": {"method": "run", "version": "580.95.05", "packages": [],
                         "evidence": ["/var/lib/nvidia/log", "/usr/bin/nvidia-uninstall"]},
           "dkms": [{"module": "nvidia", "version": "590.48.01",
                     "kernel": "6.14.11-5-bpo12-pve", "arch": "x86_64", "state": "installed",
                     "modules": ["/lib/modules/6.14.11-5-bpo12-pve/updates/dkms/nvidia.ko"]}],
           "kernels": {"running": "6.8.12-9-pve", "next": "6.14.11-5-bpo12-pve"},
           "next_modules": [{"module": "nvidia", "source": "modules.dep",
                             "path": "/lib/modules/6.14.11-5-bpo12-pve/updates/dkms/nvidia.ko",
                             "version": "590.48.01", "vermagic": "6.14.11-5-bpo12-pve",
                             "error": null}],
           "fabricmanager": {"needed": false, "version": null}}
containers:
  description:
    - "One per GPU container: C({vmid, name, rootfs, readable, reason, userspace, python3}).
      rootfs is the host path read (null when it cannot be read, with the reason);
      userspace is C({method, version, packages, evidence}), method C(installed-deb),
      C(installed-run), C(bind-mount), C(hook), C(none) or C(unknown); python3 whether
      C(/usr/bin/python3) is in the root (null when unreadable)."
    - "A root's own user space (installed-deb, installed-run, unknown) also has
      C(libraries) - every NVIDIA library carrying the driver version as the loader finds
      it, C([{name, version, path}]), CUDA's compat folders left out - and C(mixed), what
      is at which version when those libraries and the driver packages in its dpkg
      status disagree (empty when they agree)."
    - "A root whose C(/etc/ld.so.conf) is over its caps (64 KiB a file, 64 files, 256
      folders) is not readable, the reason naming the file."
    - "Packages are read under every naming scheme: Debian's (C(libcuda1),
      C(nvidia-driver), C(nvidia-kernel-dkms)), Ubuntu's branch-numbered ones
      (C(libnvidia-compute-580), C(nvidia-dkms-580-open)) and the unbranched names of
      NVIDIA's Ubuntu repository from 590 on (C(libnvidia-compute), C(nvidia-dkms-open),
      C(nvidia-open))."
    - "A C(bind-mount) user space also has C(versioned) - each C(lxc.mount.entry) that
      binds a host file named with a driver version, C([{index, source, target, version,
      missing}]), missing when the host has no such file (LXC skips an optional bind
      without a word) - and C(host_version), the host's own user space. The gate refuses
      an entry naming another version than the target with \"rewrite the entry\" (what
      M(gpuhost.tuning.driver_stage)'s O(gpuhost.tuning.driver_stage#module:rewrite_bind_mounts)
      does), and one the host lacks at the target with \"stage the host's user space\"."
  returned: always
  type: list
  elements: dict
  sample: [{"vmid": "129", "name": "sglang-glm5", "rootfs": "/rpool/data/subvol-129-disk-0",
            "readable": true, "reason": null, "python3": true,
            "userspace": {"method": "installed-deb", "version": "580.95.05",
                          "packages": [{"name": "libcuda1", "version": "580.95.05-1"}],
                          "evidence": ["/var/lib/dpkg/status",
                                       "/usr/lib/x86_64-linux-gnu/libcuda.so.1"]}}]
gate:
  description:
    - "With O(target_version): C({ok, refusals}); each refusal names the container (its
      vmid) or C(host), what it has and what it lacks."
  returned: when target_version is given
  type: dict
  contains:
    ok:
      description: True when nothing is refused.
      type: bool
    refusals:
      description: One line per refusal, the container's vmid or C(host) first.
      type: list
      elements: str
  sample: {"ok": false,
           "refusals": ["129: user space 580.95.05, target 590.48.01 (installed-deb): stage it"]}
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    VMID_RANGE,
    ValidationError,
    check_module,
    common,
    int_range,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_records  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_state  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import LxcError  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed). The version rule is driver_records' own."""
    common(p)
    if p.get("target_version") is not None:
        try:
            driver_records.check_version("target_version", p["target_version"])
        except driver_records.DriverStateError as exc:
            raise ValidationError(str(exc))
    names("next_kernel", [p["next_kernel"]] if p.get("next_kernel") else [], RELEASE,
          "a kernel release like 6.14.11-5-bpo12-pve")
    for vmid in p.get("containers") or []:
        int_range("containers", vmid, *VMID_RANGE)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            target_version=dict(type="str"),
            next_kernel=dict(type="str"),
            phase=dict(type="str", default="before_reboot", choices=list(driver_state.PHASES)),
            containers=dict(type="list", elements="int"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "driver_state", rules):
        _run(module)


def _run(module):
    p = module.params
    try:
        state = driver_state.driver_state(p["root"], p["target_version"], p["next_kernel"],
                                          p["phase"], p["containers"], runner=Runner(module))
    except (driver_state.DriverStateError, LxcError, OSError) as exc:
        module.fail_json(msg="driver_state: %s" % exc, changed=False)
    module.exit_json(changed=False, **state)


if __name__ == "__main__":
    main()
