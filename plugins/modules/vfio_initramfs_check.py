#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vfio_initramfs_check
short_description: Prove the next initramfs binds the GPUs VMs pass through to vfio-pci
version_added: 0.2.0
description:
  - For each GPU (display class) a Proxmox VM passes through whole (C(hostpciN) of
    C(/etc/pve/qemu-server/<vmid>.conf), by address or by C(mapping=); not C(mdev=), not
    C(driver=keep)), finds the C(/etc/modprobe.d) files that keep it from its host driver at
    boot - its vendor:device in C(options vfio-pci ids=), or a softdep (vfio-pci as pre)
    or C(blacklist <driver>) of every driver that would take it at boot, being the host
    driver it is on now, and each of its vendor's host drivers loaded now
    (C(/sys/module/<driver>); for NVIDIA C(nvidia), C(nouveau), C(nvidiafb)); when none is
    loaded and it is on vfio-pci, any one of them. A C(blacklist nouveau) beside a loaded
    C(nvidia) holds nothing. Then it lists O(kernel)'s initramfs with C(lsinitramfs) to
    prove one of those files is inside it.
  - A VM config, C(/etc/pve/mapping/pci.cfg) or modprobe.d file that is a FIFO, a device or
    over 4 MiB fails the module, naming the file (RV(file)).
  - Without that file in the image the host driver loads from the initramfs and takes the
    GPU before vfio-pci can, so the VM does not start after the reboot (or hangs the host
    when PVE unbinds a GPU the host uses). Role reboot_verify refuses the reboot then,
    naming the device and the VM.
  - A host where no VM passes a GPU through is unaffected (nothing is listed, RV(ok) true).
  - Read-only; never regenerates anything.
options:
  kernel:
    description: The kernel release that boots next (its image is checked).
    type: str
    required: true
  image:
    description: Image path pattern, C({kernel}) replaced by the release.
    type: str
    default: /boot/initrd.img-{kernel}
  require:
    description: Fail when a GPU lacks its binding in the image.
    type: bool
    default: true
  executable:
    description: The lister; default C(lsinitramfs) from the PATH.
    type: path
  timeout:
    description: Seconds C(lsinitramfs) may take (1 to 3600); past it it is killed and the
      image counts as unreadable.
    type: int
    default: 120
  root:
    description: Host root the configs, sysfs and images are read under.
    type: path
    default: /
notes:
  - Supports check mode (the same read-only run).
seealso:
  - module: gpuhost.tuning.initramfs_check
  - module: gpuhost.tuning.vm_verify
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Refuse a reboot whose initramfs would give the VMs' GPUs to the host driver
  gpuhost.tuning.vfio_initramfs_check:
    kernel: 6.14.11-5-bpo12-pve
"""

RETURN = r"""
kernel:
  description: O(kernel).
  returned: always
  type: str
image:
  description: The image listed.
  returned: always
  type: str
  sample: /boot/initrd.img-6.14.11-5-bpo12-pve
devices:
  description: One per GPU a VM passes through - C(vmid), C(name) (the VM's), C(key)
    (C(hostpciN)), C(address), C(id) (vendor:device), C(driver) (now), C(files) (the
    modprobe.d files binding it to vfio-pci at boot) and C(in_image) (those of them inside
    the image). Empty on a host with no such GPU.
  returned: always
  type: list
  elements: dict
  sample:
    - vmid: 201
      name: train-201
      key: hostpci0
      address: "0000:83:00.0"
      id: "10de:2bb5"
      driver: vfio-pci
      files: [/etc/modprobe.d/vfio.conf]
      in_image: [/etc/modprobe.d/vfio.conf]
ok:
  description: Whether every GPU's binding is inside the image.
  returned: always
  type: bool
file:
  description: The file under O(root) that could not be read (a FIFO, a device or over
    4 MiB where a VM config, C(mapping/pci.cfg) or modprobe.d file belongs).
  returned: when such a file fails the module
  type: str
problems:
  description: One line per GPU without its binding in the image, naming the VM, the
    device and what to run; or the image missing or unreadable.
  returned: always
  type: list
  elements: str
  sample:
    - "vm 201 (train-201) hostpci0 0000:83:00.0 (10de:2bb5): /boot/initrd.img-6.14.11-5-bpo12-pve
      lacks /etc/modprobe.d/vfio.conf (its vfio-pci binding), so the host driver takes it
      at boot: update-initramfs -u -k 6.14.11-5-bpo12-pve"
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
    int_range,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import initramfs_images  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.passthrough import vm_verify  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import HostFileError  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    if not p.get("kernel"):
        fail("kernel", p.get("kernel"), "the kernel release that boots next")
    names("kernel", [p["kernel"]], RELEASE, "a kernel release like 6.14.11-5-bpo12-pve")
    inside(dict(p, image=p["image"].replace("{kernel}", p["kernel"])), "image")
    int_range("timeout", p.get("timeout"), 1, 3600)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel=dict(type="str", required=True),
            image=dict(type="str", default=initramfs_images.IMAGE),
            require=dict(type="bool", default=True),
            executable=dict(type="path"),
            timeout=dict(type="int", default=vm_verify.DEFAULT_LIST_TIMEOUT),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    with check_module(module, "vfio_initramfs_check", rules):
        _run(module)


def _run(module):
    p = module.params
    lister = p["executable"] or module.get_bin_path("lsinitramfs")
    if not lister:
        module.fail_json(msg="lsinitramfs not found on the PATH: install initramfs-tools")
    try:
        result = vm_verify.gate(p["root"], p["kernel"], lister, Runner(module),
                                image=p["image"], timeout=p["timeout"])
    except HostFileError as exc:  # a FIFO, device or oversized file where a config belongs
        module.fail_json(msg="not rebooting into %s: cannot read a VM or modprobe.d file: %s"
                         % (p["kernel"], exc), changed=False, file=exc.filename)
    if p["require"] and result["problems"]:
        module.fail_json(msg="not rebooting into %s: %s" % (p["kernel"],
                                                            "; ".join(result["problems"])),
                         changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
