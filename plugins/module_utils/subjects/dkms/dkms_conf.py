# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dkms.conf, the shell-assignment file each DKMS source carries: the keys the offline
tree reader (subjects/dkms/dkms.py) needs to find a module's built and installed copies."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_CONF_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?=(.*)$")


def _unquote(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value.split("#", 1)[0].strip()


def parse_conf(text, kernel=None):
    """The few dkms.conf keys the offline reader needs: PACKAGE_NAME, PACKAGE_VERSION and,
    per module index, BUILT_MODULE_NAME, DEST_MODULE_NAME, DEST_MODULE_LOCATION.

    Returns ``{"package_name", "package_version", "modules": [{"built", "dest",
    "location"}]}``. dkms.conf is a shell script; plain assignments are what real ones use.
    """
    scalars = {}
    arrays = {}
    for line in (text or "").splitlines():
        match = _CONF_RE.match(line)
        if not match:
            continue
        key, index, value = match.group(1), match.group(2), _unquote(match.group(3))
        if index is None:
            scalars[key] = value
            if key in ("BUILT_MODULE_NAME", "DEST_MODULE_NAME", "DEST_MODULE_LOCATION"):
                arrays.setdefault(key, {})[0] = value
        else:
            arrays.setdefault(key, {})[int(index)] = value
    subs = {
        "PACKAGE_NAME": scalars.get("PACKAGE_NAME", ""),
        "PACKAGE_VERSION": scalars.get("PACKAGE_VERSION", ""),
        "kernelver": kernel or "",
    }

    def expand(value):
        for key, sub in subs.items():
            value = value.replace("${%s}" % key, sub).replace("$%s" % key, sub)
        return value

    built = arrays.get("BUILT_MODULE_NAME", {})
    if not built and subs["PACKAGE_NAME"]:
        built = {0: subs["PACKAGE_NAME"]}
    modules = []
    for index in sorted(built):
        name = expand(built[index])
        modules.append({
            "built": name,
            "dest": expand(arrays.get("DEST_MODULE_NAME", {}).get(index, name)),
            "location": expand(arrays.get("DEST_MODULE_LOCATION", {}).get(index, "")),
        })
    return {
        "package_name": subs["PACKAGE_NAME"],
        "package_version": subs["PACKAGE_VERSION"],
        "modules": modules,
    }
