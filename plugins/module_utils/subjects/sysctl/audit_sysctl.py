# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sysctl subject's part of the audit (platform/facts_base.py): the values of the wanted
sysctl keys and transparent hugepages, and the wanted values themselves."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import Fact
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import sysctl_values
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import sysctl_check
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl.sysctl import (
    read_sysctl,
)

_BRACKET = re.compile(r"\[([^\]]+)\]")


def sysctl_readings(root, keys):
    """``{key: value-as-string or None}`` for ``keys`` (``/proc/sys``), in the given order."""
    return dict((key, read_sysctl(root, key)) for key in keys)


def _bracketed(text):
    """``always [madvise] never`` -> ``madvise``; plain text is returned as is."""
    if text is None:
        return None
    match = _BRACKET.search(text)
    return match.group(1) if match else text.strip()


def transparent_hugepages(root):
    """``{enabled, defrag}`` from ``/sys/kernel/mm/transparent_hugepage`` (None when absent)."""
    folder = "/sys/kernel/mm/transparent_hugepage/"
    return {
        "enabled": _bracketed(read_text(host_path(root, folder + "enabled"))),
        "defrag": _bracketed(read_text(host_path(root, folder + "defrag"))),
    }


def sysctl_facts(root, keys):
    return {
        "values": sysctl_readings(root, keys),
        "transparent_hugepage": transparent_hugepages(root),
    }


FACTS = (Fact(40, "sysctl", lambda c: sysctl_facts(
    c.root, list((c.wanted.get("sysctl") or {}).keys())), {}),)
WANTED = {"sysctl": dict(type="dict", default={})}


def wanted_rules(w):
    sysctl_values("sysctl", w.get("sysctl"))


CHECKS = (sysctl_check,)
