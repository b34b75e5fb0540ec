# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """Which PCI devices count as GPUs: one text for every module that selects them (the
    matching option spec is module_utils/platform/argspec.py)."""

    # gpu_vendor and gpu_classes: modules that look at GPUs among other things (host_audit,
    # host_capture, host_tune).
    DOCUMENTATION = r"""
options:
  gpu_vendor:
    description: PCI vendor ID of the GPUs (hex, no C(0x); C(10de) is NVIDIA).
    type: str
    default: "10de"
  gpu_classes:
    description:
      - PCI classes (class and subclass, 4 hex digits, or 6 with the programming interface)
        that count as GPUs - C(0300) VGA and C(0302) 3D controller.
      - Quote them in YAML (an unquoted C(0300) is a number).
    type: list
    elements: str
    default: ["0300", "0302"]
"""

    # vendor, classes and include_upstream: modules whose subject is the GPUs' PCIe devices
    # (setpci_maxreadreq, tuning_snapshot, boot_service).
    DEVICES = r"""
options:
  vendor:
    description: PCI vendor ID (hex, no C(0x); C(10de) is NVIDIA) of the GPUs selected.
    type: str
    default: "10de"
  classes:
    description:
      - PCI classes (class and subclass, 4 hex digits, or 6 with the programming interface)
        that count as GPUs. The default selects VGA (C(0300)) and 3D controllers (C(0302)),
        not the GPUs' HD audio functions (C(0403)).
      - Quote them in YAML (an unquoted C(0300) is a number).
    type: list
    elements: str
    default: ["0300", "0302"]
  include_upstream:
    description:
      - Also every bridge (root port, switch port) between each GPU and its root complex
        (read from the device's sysfs path), whose own Max Read Request Size limits the
        GPU's reads. A bridge shared by several GPUs counts once.
      - A device directly on a host bridge (common in VMs) has none.
    type: bool
    default: true
"""
