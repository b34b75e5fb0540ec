# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report files on the controller: safe per-host file names, bounded reads of
report files already there, atomic writes that leave identical bytes alone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import stat
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import atomic_write


PREVIOUS_MAX = 64 << 20  # bytes of a previous <host>.json read at most

# The file names the report modules write, declared once. A run's files beside the per-host
# ones (audit_report and report_merge; report_merge's tune part):
FLEET_FILES = ("summary.md", "index.html", "gpuhost.prom")
TUNE_SUMMARY = "tune-summary.md"
# each writer's per-host files: ``safe_name(host)`` + one of these
HOST_FILES = {"audit": (".json",), "tune": ("-tune.md", "-tune.json"),
              "reboot": ("-reboot.json", "-reboot.md")}
# rollout_report's files: ``<name>`` + one of these
ROLLOUT_SUFFIXES = (".md", ".json")


def host_file(host, kind, suffix=0):
    """The name of ``kind``'s (``HOST_FILES``) per-host file of ``host``."""
    return safe_name(host) + HOST_FILES[kind][suffix]


def report_name_clash(name, hosts=()):
    """Why rollout files ``<name>.md`` / ``<name>.json`` cannot share a report folder with
    the other reports, or None. A name is refused when it is the stem of a fleet file
    (``summary``, ``index``, ``gpuhost``, ``tune-summary``: ``summary.md`` would be replaced,
    and an ``index.md`` beside ``index.html`` reads as the fleet's) or when one of its files
    is a per-host file of one of ``hosts`` (``gpu01`` would replace ``gpu01.json``);
    compared case-insensitively (a case-insensitive folder holds one of the two)."""
    fleet = FLEET_FILES + (TUNE_SUMMARY,)
    mine = set((name + suffix).lower() for suffix in ROLLOUT_SUFFIXES)
    if name.lower() in set(os.path.splitext(f)[0].lower() for f in fleet):
        return "its files would replace or pose as the fleet files %s" % ", ".join(fleet)
    for host in hosts:
        for kind in sorted(HOST_FILES):
            for suffix in HOST_FILES[kind]:
                if (safe_name(host) + suffix).lower() in mine:
                    return "its file %s%s is host %s's %s report" % (
                        name, os.path.splitext(suffix)[1], host, kind)
    return None


def fstat_or_close(fd):
    try:
        return os.fstat(fd)
    except OSError:
        os.close(fd)
        raise


def read_report_text(path):
    """The text of a previous report, or None when there is none; ValueError naming the
    problem for one that is not a regular file or larger than ``PREVIOUS_MAX`` (opened
    without blocking: a FIFO there never hangs the report)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (IOError, OSError) as exc:
        if not os.path.lexists(path):
            return None
        raise ValueError("cannot be read (%s)" % exc)
    if not stat.S_ISREG(fstat_or_close(fd).st_mode):
        os.close(fd)
        raise ValueError("is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(PREVIOUS_MAX + 1)
    if len(data) > PREVIOUS_MAX:
        raise ValueError("is larger than %d bytes" % PREVIOUS_MAX)
    return data.decode("utf-8")


# what a host's file name cannot hold: a folder separator, a backslash, NUL or any other
# control character (a line break in a file name), or a lone surrogate (a name decoded with
# surrogateescape: as a file name not UTF-8, and no link to it can be written)
_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f\ud800-\udfff]")


_NAME_MAX = 200  # bytes; with the longest suffix (-reboot.json) under NAME_MAX (255)


def safe_name(host):
    """The base of a host's report file names. A name that is already safe (no ``/``,
    backslash, control character or lone surrogate, no leading dot, not too long) is
    itself; any other gets its unsafe characters as ``_`` and a short hash of the whole
    name, so two hosts never share a file (``a/b`` and ``a_b`` would)."""
    host = str(host)
    name = _UNSAFE.sub("_", host).lstrip(".")
    if name == host and name and len(name.encode("utf-8", "backslashreplace")) <= _NAME_MAX:
        return name
    digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    while len(name.encode("utf-8", "backslashreplace")) > _NAME_MAX:
        name = name[:-1]
    return "%s-%s" % (name or "_", digest)


def check_file_names(hosts, what="report"):
    """Raise ReportError when two of ``hosts`` would write one file (a hash collision, or
    a host named like another's hashed name), naming both: never one report silently
    over another."""
    seen = {}
    for host in hosts:
        name = safe_name(host)
        if name in seen and seen[name] != host:
            raise ReportError("hosts %r and %r would both write the %s %s: rename one of "
                              "them in the inventory; nothing was written"
                              % (seen[name], host, what, name))
        seen[name] = host


def _same_bytes(path, data):
    """Whether ``path`` is a regular file holding exactly ``data``; opened without blocking
    and read no further than ``data`` is long, so a FIFO or a huge file there is simply
    not the same (the atomic write then replaces it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (IOError, OSError):
        return False
    info = fstat_or_close(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as handle:
        return handle.read(len(data) + 1) == data


def write_files(dest, files, check_mode=False):
    """Write report ``files`` (name -> text) into the controller folder ``dest``.

    Atomic per file; a file whose bytes are already there is not rewritten (a re-run leaves
    mtimes alone). Returns ``(paths, written)``; in check mode nothing is created."""
    if not check_mode and not os.path.isdir(dest):
        # exist_ok: the slices of a sliced job may create one folder at the same moment
        os.makedirs(dest, 0o755, exist_ok=True)
    paths, written = [], []
    for name in sorted(files):
        path = os.path.join(dest, name)
        # a lone surrogate (a name decoded with surrogateescape) is written as the text
        # \udcff: never a failed report, never invalid UTF-8
        data = files[name].encode("utf-8", "backslashreplace")
        paths.append(path)
        if _same_bytes(path, data):
            continue
        written.append(path)
        if not check_mode:
            atomic_write(path, data, mode=0o644)
    return paths, written


class ReportError(Exception):
    """A report module cannot make or write its files; the message says what to do."""


def now():
    """The controller's UTC time as the reports print it."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())


def write_reports(module, dest, files, check_mode, setting):
    """``write_files`` for report module ``module``: ``(paths, written)``; a folder that
    cannot be written raises ReportError naming it and the role ``setting`` that picks
    another."""
    try:
        return write_files(dest, files, check_mode)
    except (IOError, OSError) as exc:
        raise ReportError("%s: cannot write reports in %s: %s (pick a writable folder with %s)"
                          % (module, dest, exc, setting))
