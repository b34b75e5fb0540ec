# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dkms subject's part of the audit (platform/facts_base.py): every module DKMS knows,
per version and kernel, with its state."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms, dkms_check


def dkms_facts(root):
    return [{"name": e["name"], "version": e["version"], "kernel": e["kernel"],
             "arch": e.get("arch"), "state": e["state"], "warning": e.get("warning")}
            for e in dkms.tree_status(root)]


FACTS = (Fact(80, "dkms", lambda c: dkms_facts(c.root), []),)
CHECKS = (dkms_check,)
