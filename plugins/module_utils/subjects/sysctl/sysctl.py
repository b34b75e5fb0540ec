# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysctl values under a root: read them and compare them with wanted values.

Writing them, and the sysctl.d file, is in subjects/sysctl/sysctl_settings.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    HostFileError,
    host_path,
    read_text,
)


def key_path(root, key):
    """``net.core.rmem_max`` -> ``<root>/proc/sys/net/core/rmem_max``."""
    if not key or key.startswith(".") or ".." in key or "/" in key:
        raise ValueError("invalid sysctl key %r: use dotted names like kernel.numa_balancing" % key)
    return host_path(root, "/proc/sys/" + key.replace(".", "/"))


def normalize(value):
    """Compare values the way sysctl prints them: whitespace-separated fields, one space."""
    return " ".join(str(value).split())


def read_sysctl(root, key):
    """The current value as a normalized string, or None when the kernel has no such key."""
    value = read_text(key_path(root, key))
    return None if value is None else normalize(value)


def read_many(root, keys):
    """``{key: value}`` of ``keys`` (None: the kernel has no such key). A key whose file the
    reading layer refuses (a FIFO or a device where a host tree should hold a file) is left
    out: nothing can record it, and the tune, which cannot read it either, fails that key
    alone and leaves it as it is."""
    out = {}
    for key in keys:
        try:
            out[key] = read_sysctl(root, key)
        except HostFileError:
            continue
    return out


# Keys where a larger value than wanted is just as good (socket buffer sizes and
# ceilings): the audit does not report them and the tune does not lower them.
AT_LEAST = ("net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default",
            "net.core.wmem_default")


def satisfied(key, current, wanted, at_least=AT_LEAST):
    """True when ``current`` meets ``wanted`` for ``key``: the same value as sysctl prints
    it, or for an ``at_least`` key an integer at least as large. One rule for the audit's
    sysctl findings and the values tune writes (``at_least_value``)."""
    if current is None:
        return False
    if key in at_least:
        return at_least_value(current, wanted) == normalize(current)
    return normalize(current) == normalize(wanted)


def at_least_value(current, wanted):
    """``current`` when both are integers and ``current >= wanted`` (a buffer ceiling already
    larger than wanted is kept), else ``wanted``; both normalized."""
    wanted = normalize(wanted)
    if current is None:
        return wanted
    try:
        if int(current) >= int(wanted):
            return normalize(current)
    except ValueError:
        pass
    return wanted


# ---------------------------------------------------------------------------------------
# The sysctl_settings pass (module sysctl_settings and module host_tune call it)


# --- the tune part (module host_tune; protocol in engines/tune/tune.py) ---------------------------
