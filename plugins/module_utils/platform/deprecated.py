# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names on their way out, declared once: module options renamed (the specs'
``deprecated_aliases`` are made from ``OPTION_ALIASES``) and return keys kept under an old
name. Role variables renamed are declared where the roles map them, in each role's
``vars/main.yml`` (``__gpuhost_<role>_renamed``), and wanted values passed as per-key options
in ``facts.PER_KEY_REMOVED_IN``'s note. tests/unit/test_deprecated_names.py fails when a
remedy, a doc or a playbook names any of them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

COLLECTION = "gpuhost.tuning"
REMOVED_IN = "0.3.0"

# module -> {old option name: the option it is an alias of}
OPTION_ALIASES = {
    "setpci_maxreadreq": {"size": "mrrs_size"},
}

# module -> {old return key: the key it copies}
RETURN_KEYS = {
    "sysctl_settings": {"values": "settings"},
}


def aliases(module, option):
    """The spec keys (``aliases``, ``deprecated_aliases``) of ``option`` of ``module``: its
    old names, each accepted with a deprecation warning until REMOVED_IN ({} when none)."""
    old = sorted(name for name, new in OPTION_ALIASES.get(module, {}).items() if new == option)
    if not old:
        return {}
    return dict(aliases=old, deprecated_aliases=[
        dict(name=name, version=REMOVED_IN, collection_name=COLLECTION) for name in old])
