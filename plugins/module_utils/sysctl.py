# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysctl values under a root: read, write with read-back, and sysctl.d files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
    host_path,
    read_text,
    write_in_place,
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
    return dict((key, read_sysctl(root, key)) for key in keys)


class SysctlWriteError(Exception):
    pass


def write_sysctl(root, key, value):
    """Write ``value`` and read it back.

    Returns None on success. Raises SysctlWriteError with a reason (key missing, read-only in
    this container, value did not take) so callers can report skipped keys, never silently.
    """
    path = key_path(root, key)
    try:
        write_in_place(path, "%s\n" % normalize(value))
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            raise SysctlWriteError("%s: the kernel has no such key (%s missing)" % (key, path))
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise SysctlWriteError(
                "%s: not writable here (%s); in a container the host kernel owns it"
                % (key, exc.strerror)
            )
        raise SysctlWriteError("%s: write failed: %s" % (key, exc))
    now = read_sysctl(root, key)
    if now != normalize(value):
        raise SysctlWriteError("%s: wrote %s but reads back %s" % (key, normalize(value), now))


def render_conf(values, header=None):
    """A sysctl.d file for ``values`` (key order kept)."""
    lines = []
    if header:
        lines.extend("# " + line if line else "#" for line in header.splitlines())
    for key, value in values.items():
        lines.append("%s = %s" % (key, normalize(value)))
    return "\n".join(lines) + "\n"


def parse_conf(text):
    """Key -> value from sysctl.d text (``#``/``;`` comments, ``-`` prefix ignored)."""
    values = {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key.strip().lstrip("-")] = normalize(value.strip())
    return values
