# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the GPU health checks share about the audit's ``nvidia_smi`` fact (one
``nvidia-smi -q -x``, read by audit_health.py): its GPUs, and why the columns built on it
do not apply when there is none.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def smi_gpus(facts):
    """The GPUs of the audit's nvidia-smi log (empty without one)."""
    return ((facts.get("nvidia_smi") or {}).get("gpus")) or []


def smi_applies(facts, wanted=None):
    """None when nvidia-smi data is there, else why the columns built on it are n/a."""
    smi = facts.get("nvidia_smi") or {}
    if not smi.get("available"):
        return "no nvidia-smi data (%s)" % (smi.get("error") or "not run")
    if not smi.get("gpus"):
        return "nvidia-smi lists no GPU"
    return None
