#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: initramfs_check
short_description: Check that files are (or are not) inside the initramfs of given kernels
version_added: 0.1.0
description:
  - Lists C(/boot/initrd.img-<kernel>) with C(lsinitramfs) (initramfs-tools; it reads every
    segment, early microcode included) and checks that each of O(files) is in it and none
    of O(absent_files) is.
  - Used to prove that a modprobe option (C(options nvidia_uvm uvm_disable_hmm=1) in
    C(/etc/modprobe.d)) will be seen when the module loads from the initramfs -
    C(mkinitramfs) copies C(/etc/modprobe.d) into the image, but only when the image is
    regenerated after the file changed.
  - Read-only; never regenerates anything.
options:
  kernels:
    description: Kernel releases whose initramfs is listed.
    type: list
    elements: str
    required: true
  files:
    description: Host paths that must be in every image (C(/etc/modprobe.d/x.conf)).
    type: list
    elements: str
    default: []
  absent_files:
    description: Host paths that must not be in any image.
    type: list
    elements: str
    default: []
  image:
    description: Image path pattern, C({kernel}) replaced by the release.
    type: str
    default: /boot/initrd.img-{kernel}
  require:
    description: Fail when an image is missing or a check does not hold.
    type: bool
    default: true
  executable:
    description: The lister; default C(lsinitramfs) from the PATH.
    type: path
  root:
    description: Host root the images are read under.
    type: path
    default: /
notes:
  - Supports check mode (the same read-only run).
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Prove the new kernel's initramfs carries the nvidia_uvm option
  gpuhost.tuning.initramfs_check:
    kernels: [6.14.11-5-bpo12-pve]
    files: [/etc/modprobe.d/gpuhost-nvidia-uvm.conf]
"""

RETURN = r"""
images:
  description: Per kernel C({kernel, image, exists, present, missing, unexpected}) -
    C(present) the checked files found, C(missing) the O(files) not found,
    C(unexpected) the O(absent_files) found.
  returned: always
  type: list
  elements: dict
  sample:
    - kernel: 6.14.11-5-bpo12-pve
      image: /boot/initrd.img-6.14.11-5-bpo12-pve
      exists: true
      present: [/etc/modprobe.d/gpuhost-nvidia-uvm.conf]
      missing: []
      unexpected: []
ok:
  description: Whether every image exists and every check holds.
  returned: always
  type: bool
problems:
  description: One readable line per failed check.
  returned: always
  type: list
  elements: str
stale:
  description: Kernels whose image does not satisfy the checks (regenerate these).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    check_module,
    common,
    fail,
    inside,
    names,
    non_empty_list,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import initramfs_images  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    non_empty_list("kernels", p.get("kernels"), "kernel releases")
    names("kernels", p.get("kernels"), RELEASE, "kernel releases like 6.14.11-5-bpo12-pve")
    for option in ("files", "absent_files"):
        for path in p.get(option) or []:
            if not path.startswith("/"):
                fail(option, path, "absolute paths as inside the initramfs")
    for release in p.get("kernels") or []:
        inside(dict(p, image=p["image"].replace("{kernel}", release)), "image")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernels=dict(type="list", elements="str", required=True),
            files=dict(type="list", elements="str", default=[]),
            absent_files=dict(type="list", elements="str", default=[]),
            image=dict(type="str", default=initramfs_images.IMAGE),
            require=dict(type="bool", default=True),
            executable=dict(type="path"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "initramfs_check", rules):
        _run(module)


def _run(module):
    p = module.params
    lister = p["executable"] or module.get_bin_path("lsinitramfs")
    if not lister:
        module.fail_json(msg="lsinitramfs not found on the PATH: install initramfs-tools")
    result = initramfs_images.check_images(p["root"], p["kernels"], lister, Runner(module),
                                           files=p["files"], absent_files=p["absent_files"],
                                           image=p["image"])
    if p["require"] and result["problems"]:
        module.fail_json(msg="initramfs check failed: " + "; ".join(result["problems"]),
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
