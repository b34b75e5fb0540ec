# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The wanted values of a GPU host, one text for every module that takes them whole
    (host_audit, host_tune, audit_timer, post_boot_verify). The matching spec is
    module_utils/engines/audit/facts.py ``wanted_spec()`` (tests/unit/test_wanted.py compares the
    two);
    role common composes the dict once as ``__gpuhost_wanted``."""

    DOCUMENTATION = r"""
options:
  wanted:
    description:
      - The wanted values of the host, whole, as role C(gpuhost.tuning.common) composes them
        (C(__gpuhost_wanted), from its C(gpuhost_*) variables). Keys left out take the
        defaults below, so every module judges and tunes against the same values.
      - The per-key top-level options of the same names (C(mrrs_size) and the like, where a
        module has them) are deprecated and stop working in gpuhost.tuning 0.3.0; one set to
        something other than its default wins over its key here, and Ansible warns that it
        is deprecated.
    type: dict
    default: {}
    suboptions:
      gpu_vendor:
        description: PCI vendor ID of the GPUs (hex, no C(0x); C(10de) is NVIDIA).
        type: str
        default: "10de"
      gpu_classes:
        description:
          - PCI classes (class and subclass, 4 hex digits, or 6 with the programming
            interface) that count as GPUs - C(0300) VGA and C(0302) 3D controller.
          - Quote them in YAML (an unquoted C(0300) is a number).
        type: list
        elements: str
        default: ["0300", "0302"]
      mrrs_size:
        description: Wanted PCIe Max Read Request Size (bytes) of GPUs and their bridges
          (role common's C(gpuhost_mrrs_size)).
        type: int
        default: 4096
        choices: [128, 256, 512, 1024, 2048, 4096]
      cpuidle_deeper_than:
        description: Idle states with a higher exit latency than this named state should be
          disabled.
        type: str
        default: C1
      sysctl:
        description: Wanted sysctl values (key to value as a string).
        type: dict
        default: {}
      boot_params:
        description: Wanted kernel command-line parameters, as C(/proc/cmdline) must carry
          them (name to value; V(true) for a flag, V(false) for C(off), null for "must not be
          there").
        type: dict
        default: {}
      cpufreq_drivers_wanted:
        description: cpufreq scaling drivers that count as right.
        type: list
        elements: str
        default: ["amd-pstate-epp", "amd-pstate", "intel_pstate"]
      nvidia_uvm_disable_hmm:
        description: Whether C(nvidia_uvm) should load with C(uvm_disable_hmm=1).
        type: bool
        default: true
      nvidia_uvm_modprobe_file:
        description: The modprobe.d file the C(nvidia_uvm_hmm) remedy tells to write (role
          boot_config writes the option there).
        type: path
        default: /etc/modprobe.d/gpuhost-nvidia-uvm.conf
      lxc_gpu_drivers:
        description: Character-device drivers GPU containers must be allowed.
        type: list
        elements: str
        default: [nvidia, nvidia-uvm, nvidia-caps]
      lxc_config_dir:
        description: Folder of the Proxmox container configs.
        type: path
        default: /etc/pve/lxc
      host:
        description: Inventory name of the host, used in the remedies (C(-l <host>)).
        type: str
      xid_window_days:
        description: How many days of the kernel log the XID/SXID count covers (role audit's
          C(gpuhost_audit_xid_window_days)).
        type: int
        default: 7
      thermal_margin_min_c:
        description: A GPU with fewer degrees C than this between its temperature and its
          slowdown limit (nvidia-smi's T.Limit) is C(gpu_thermal_margin_low).
        type: int
        default: 10
      bandwidth_min_pct:
        description: A GPU whose measured pinned copy rate is below this percentage of its
          link's ceiling, either way, is C(pcie_bandwidth_low).
        type: int
        default: 70
      ceiling_spread_pct:
        description: A GPU whose measured compute or memory ceiling (host_audit's
          C(cuda_ceiling)) is more than this percentage below the node's best GPU of the
          same model and probe path is C(gpu_compute_low) or C(gpu_memory_bandwidth_low)
          (1 to 100).
        type: int
        default: 10
      ceiling_min_pct:
        description: A GPU whose measured ceiling is below this percentage of the model
          table's healthy figure of the same probe path (where it has one) is
          C(gpu_compute_low) or C(gpu_memory_bandwidth_low) (1 to 100).
        type: int
        default: 85
      acknowledged:
        description: Findings the operator has acknowledged, each C({id, subject}) (role
          audit's C(gpuhost_audit_acknowledged); see M(gpuhost.tuning.host_audit)).
        type: list
        elements: dict
        default: []
      xid_policy:
        description: Overrides of NVIDIA's XID catalogue, C({xid, class, min_count,
          window_hours}) per XID (see M(gpuhost.tuning.host_audit)).
        type: list
        elements: dict
        default: []
      copy_rate_marks:
        description: Copy-rate pass marks per GPU model, C({model, host_gbs, peer_gbs})
          (see M(gpuhost.tuning.host_audit)).
        type: list
        elements: dict
        default: []
      gpu_count:
        description: How many NVIDIA GPUs this host has (role common's C(gpuhost_gpu_count));
          unset, only the bus is compared with the driver.
        type: int
"""
