#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dkms_build
short_description: Make sure a DKMS module is built and installed for a kernel
version_added: 0.1.0
description:
  - Makes sure the DKMS module O(name) (for example the NVIDIA driver) is built, and by
    default installed, for O(kernel) - typically a newly installed kernel before the reboot
    into it.
  - Checks the kernel headers first (C(/lib/modules/<kernel>/build) must resolve to a
    headers tree; a dangling link is not headers) and fails with a message naming the
    package to install, before anything runs, so nothing is left half-done.
  - Runs C(dkms build) and C(dkms install) only as needed and judges success by
    C(dkms status) for that kernel and by the C(.ko) files under
    C(/lib/modules/<kernel>), never by exit codes alone (dkms prints
    C(... already built ..., skip) and exits 0; a kernel package's postinst may skip the
    build with only a warning).
  - Idempotent - a module already in the wanted state changes nothing.
options:
  name:
    description:
      - DKMS module name as C(dkms status) prints it, for example C(nvidia) (upstream
        C(.run) installer), C(nvidia-current) or C(nvidia-current-open) (Debian),
        C(nvidia-srv) (Ubuntu).
    type: str
    required: true
  version:
    description:
      - Module version. Default is the only version DKMS knows for O(name), or the newest
        when it knows several.
    type: str
  kernel:
    description:
      - Kernel release to build for. Default is the newest installed kernel (C(/lib/modules)
        entries holding the image's modules, and C(/boot/vmlinuz-*)).
    type: str
  state:
    description:
      - C(installed) builds when needed, then installs into C(/lib/modules/<kernel>);
        C(built) only builds.
    type: str
    choices: [installed, built]
    default: installed
  arch:
    description:
      - Architecture passed to dkms as C(-k <kernel>/<arch>). Default is what dkms uses
        (the machine's).
    type: str
  executable:
    description:
      - The dkms program. Default is C(dkms) from the PATH.
      - Required with a O(root) other than C(/); it must then act on that root, for example
        a script running C(chroot /mnt/target dkms "$@").
    type: path
  root:
    description:
      - Host root the module reads (headers, C(/lib/modules), C(/var/lib/dkms)) under.
      - dkms itself only acts on the real C(/), so a O(root) other than C(/) without
        O(executable) fails with an explanation. To read a captured tree offline, use the
        audit (it reads C(/var/lib/dkms) without running dkms).
    type: path
    default: /
notes:
  - Supports check mode - only C(dkms status) runs then; RV(commands) lists what would run.
  - Never loads or unloads a module.
seealso:
  - module: gpuhost.tuning.kernel_cmdline
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Build and install the NVIDIA driver for the new kernel before rebooting into it
  gpuhost.tuning.dkms_build:
    name: nvidia
    kernel: 6.14.11-5-bpo12-pve

- name: Same for the newest installed kernel, whatever the only known version is
  gpuhost.tuning.dkms_build:
    name: nvidia
  register: gpuhost_dkms

- name: Show the installed modules
  ansible.builtin.debug:
    var: gpuhost_dkms.modules

- name: Only build (install later)
  gpuhost.tuning.dkms_build:
    name: nvidia-current
    version: 535.216.01
    kernel: 6.1.0-56-amd64
    state: built
"""

RETURN = r"""
name:
  description: The DKMS module name.
  returned: always
  type: str
  sample: nvidia
version:
  description: The module version acted on (O(version), or the one chosen).
  returned: success
  type: str
  sample: 590.48.01
kernel:
  description: The kernel release acted on (O(kernel), or the newest installed kernel).
  returned: success
  type: str
  sample: 6.14.11-5-bpo12-pve
headers_package:
  description: Debian package that ships the headers for RV(kernel).
  returned: success
  type: str
  sample: proxmox-headers-6.14.11-5-bpo12-pve
state_before:
  description: C(installed), C(built), C(added) (known but not built for RV(kernel)) or
    null (unknown to dkms) before the run.
  returned: success
  type: str
  sample: added
state_after:
  description: The same after the run (in check mode, what it would be).
  returned: success
  type: str
  sample: installed
status_before:
  description: Parsed C(dkms status -m name -v version -k kernel) before the run.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: Module name.
      type: str
    version:
      description: Module version.
      type: str
    kernel:
      description: Kernel release; null for C(added) lines.
      type: str
    arch:
      description: Architecture; null for C(added) lines.
      type: str
    state:
      description: C(added), C(built), C(installed) (or what dkms printed, for example
        C(broken)).
      type: str
    warning:
      description: Parenthesised warnings dkms printed after the state, joined with
        C(; ), or null.
      type: str
    warnings:
      description: The same warnings as a list.
      type: list
      elements: str
  sample:
    - name: nvidia
      version: 590.48.01
      kernel: null
      arch: null
      state: added
      warning: null
      warnings: []
status_after:
  description: Parsed C(dkms status) for that kernel after the run (same form as
    RV(status_before); equal to it in check mode).
  returned: success
  type: list
  elements: dict
  sample:
    - name: nvidia
      version: 590.48.01
      kernel: 6.14.11-5-bpo12-pve
      arch: x86_64
      state: installed
      warning: null
      warnings: []
modules:
  description: Host paths of the installed C(.ko) files (C(.ko), C(.ko.xz), C(.ko.zst))
    for RV(kernel); empty for O(state=built) or in check mode before the install.
  returned: success
  type: list
  elements: str
  sample:
    - /lib/modules/6.14.11-5-bpo12-pve/updates/dkms/nvidia.ko
    - /lib/modules/6.14.11-5-bpo12-pve/updates/dkms/nvidia-uvm.ko
commands:
  description: The dkms commands run (in check mode, that would run), in order.
  returned: success
  type: list
  elements: list
  sample:
    - [dkms, build, -m, nvidia, -v, 590.48.01, -k, 6.14.11-5-bpo12-pve]
    - [dkms, install, -m, nvidia, -v, 590.48.01, -k, 6.14.11-5-bpo12-pve]
outputs:
  description: For each command run, its C(cmd), C(rc), C(stdout) and C(stderr).
  returned: when commands ran
  type: list
  elements: dict
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    check_module,
    common,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms.dkms import DkmsError  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms.dkms_build import ensure  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (  # noqa: E402
    CommandError,
    Runner,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    names("name", [p.get("name")], what="a DKMS module name (letters, digits, _ . + -)")
    names("version", [p["version"]] if p.get("version") else [], RELEASE,
          "a DKMS version like 550.144.03")
    names("kernel", [p["kernel"]] if p.get("kernel") else [], RELEASE,
          "a kernel release like 6.14.11-5-bpo12-pve")
    names("arch", [p["arch"]] if p.get("arch") else [], what="an architecture like x86_64")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            version=dict(type="str"),
            kernel=dict(type="str"),
            state=dict(type="str", choices=["installed", "built"], default="installed"),
            arch=dict(type="str"),
            executable=dict(type="path"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "dkms_build", rules):
        _run(module)


def _run(module):
    params = module.params
    runner = Runner(module)
    dkms = params["executable"]
    if not dkms and params["root"] == "/":
        dkms = module.get_bin_path("dkms")
        if not dkms:
            module.fail_json(msg="dkms not found on the PATH: install the dkms package",
                             name=params["name"])
    try:
        result = ensure(runner, params["root"], params["name"], version=params["version"],
                        kernel=params["kernel"], state=params["state"],
                        check_mode=module.check_mode, dkms=dkms, arch=params["arch"])
    except DkmsError as exc:
        details = dict(exc.details)
        details.pop("changed", None)
        details.setdefault("name", params["name"])
        module.fail_json(msg=str(exc), changed=bool(details.get("outputs")), **details)
    except CommandError as exc:
        module.fail_json(msg=str(exc), name=params["name"])
    for entry in result["status_after"]:
        if entry["kernel"] == result["kernel"] and entry["warning"]:
            module.warn("dkms status for %s/%s on %s: %s" % (
                entry["name"], entry["version"], entry["kernel"], entry["warning"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
