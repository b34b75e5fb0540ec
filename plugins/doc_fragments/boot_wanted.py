# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """What a booted host should run with: one text for the modules that judge it
    (host_audit, post_boot_verify); the matching option spec is the boot subject's WANTED
    (subjects/boot/audit_boot.py)."""

    DOCUMENTATION = r"""
options:
  boot_params:
    description: Wanted kernel command-line parameters, as C(/proc/cmdline) must carry them
      (name to value; V(true) for a flag, V(false) for C(off), null for "must not be there").
    type: dict
    default: {}
  cpufreq_drivers_wanted:
    description: cpufreq scaling drivers that count as right.
    type: list
    elements: str
    default: ["amd-pstate-epp", "amd-pstate", "intel_pstate"]
"""
