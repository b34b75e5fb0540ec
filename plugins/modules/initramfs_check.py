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

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.validate import check_module  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (  # noqa: E402
    host_path,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.runner import Runner  # noqa: E402


def listing(text):
    """Set of host paths (leading ``/``) in ``lsinitramfs`` output; ``-l`` style lines
    (``-rw-r--r-- ... path``) keep the last field."""
    names = set()
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("Early ", "Main ", "==>")):
            continue
        name = line.split()[-1] if (" " in line and line[0] in "-dlcbps") else line
        names.add("/" + name.lstrip("./").lstrip("/"))
    return names


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernels=dict(type="list", elements="str", required=True),
            files=dict(type="list", elements="str", default=[]),
            absent_files=dict(type="list", elements="str", default=[]),
            image=dict(type="str", default="/boot/initrd.img-{kernel}"),
            require=dict(type="bool", default=True),
            executable=dict(type="path"),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    check_module(module, "initramfs_check")
    p = module.params
    runner = Runner(module)
    lister = p["executable"] or module.get_bin_path("lsinitramfs")
    if not lister:
        module.fail_json(msg="lsinitramfs not found on the PATH: install initramfs-tools")
    images = []
    problems = []
    stale = []
    for release in p["kernels"]:
        image = p["image"].replace("{kernel}", release)
        local = host_path(p["root"], image)
        item = {"kernel": release, "image": image, "exists": os.path.isfile(local),
                "present": [], "missing": [], "unexpected": []}
        images.append(item)
        if not item["exists"]:
            problems.append("%s does not exist: run update-initramfs -c -k %s" % (image, release))
            stale.append(release)
            continue
        rc, out, err = runner.run([lister, local], check=False)
        if rc != 0:
            problems.append("%s %s exited %s: %s" % (lister, image, rc, (err or out).strip()))
            stale.append(release)
            continue
        names = listing(out)
        for path in p["files"]:
            (item["present"] if path in names else item["missing"]).append(path)
        for path in p["absent_files"]:
            if path in names:
                item["unexpected"].append(path)
        if item["missing"]:
            problems.append("%s lacks %s: run update-initramfs -u -k %s" % (
                image, ", ".join(item["missing"]), release))
        if item["unexpected"]:
            problems.append("%s still carries %s: run update-initramfs -u -k %s" % (
                image, ", ".join(item["unexpected"]), release))
        if item["missing"] or item["unexpected"]:
            stale.append(release)
    result = dict(changed=False, images=images, ok=not problems, problems=problems,
                  stale=stale)
    if p["require"] and problems:
        module.fail_json(msg="initramfs check failed: " + "; ".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
