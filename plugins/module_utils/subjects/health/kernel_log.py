# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel log, read once per audit, reduced to the NVIDIA XID and SXID lines.

Where it comes from:

- a live host (``root`` is ``/``): the systemd journal's kernel messages of the window
  (``journalctl _TRANSPORT=kernel --since ...``: every boot in it, unlike ``-k``, which
  means this boot only), else ``/var/log/kern.log*`` (rsyslog; ``.gz`` rotations too);
- any other root (a capture, a test tree): the lines a capture stored
  (``/.gpuhost-capture/kernel-log.txt``), else ``<root>/var/log/kern.log*``.

What is kept (and stored in a capture): a header naming the source, the time it was read
and the window, then only the ``NVRM: Xid`` and ``SXid`` lines and the host-health lines
``hostlog.wanted`` accepts (hardware errors, lockups, oopses, OOM kills, NVMe timeouts,
read-only remounts, GPUs fallen off the bus, boot lines), so a capture holds no other
kernel messages and an offline audit counts from the time of the capture.

Line formats read (time stamp first, then the message):

- ``2026-11-30T12:00:01.123456+00:00 host kernel: ...`` (journal ``short-iso-precise``,
  rsyslog's high-precision format), ``2026-11-30T12:00:01+0000 host kernel: ...``;
- ``Nov 30 12:00:01 host kernel: [ 812.345678] ...`` (traditional syslog: no year, taken
  from the file's time);
- ``[Sun Feb 23 16:24:18 2025] ...`` (``dmesg -T``); a bare ``[ 812.345678]`` has no time.

Messages: ``NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout ...``
(the address has no function: it is function 0 of that device; older drivers print it
without ``PCI:``) and ``nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal,
Link 32 ...``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import collections
import os
import re
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import host_health
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import xid
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

OUTPUT_NAME = "kernel-log.txt"
DEFAULT_WINDOW_DAYS = 7
KERN_LOG_DIR = "/var/log"
_HEADER = "# gpuhost kernel log:"

# Every number is at most bounded.INT's 20 ASCII digits and every repeat bounded, so each
# pattern costs a bounded amount per place it is tried (linear in the line, which is cut
# to hostlog.LINE_CHARS first); the message after the code is the rest of the line, taken
# by slicing, never by a trailing ``.*$`` (which scanned to the end from every match).
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:"
                  r"[0-9a-fA-F]{1,2}(?:\.[0-7])?)\): (?P<code>%s)(?P<end>,|$)" % bounded.INT)
_SXID = re.compile(r"(?P<switch>nvidia-nvswitch[0-9]{1,6}): SXid \((?:PCI:)?(?P<pci>"
                   r"[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?)\): "
                   r"(?P<code>%s), {0,8}(?P<severity>Fatal|Non-fatal)(?P<end>,|$)" % bounded.INT)
_ISO = re.compile(r"^(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[T ](?P<clock>[0-9]{2}:[0-9]{2}:"
                  r"[0-9]{2})(?:[.,][0-9]{1,9})?(?P<tz>Z|[+-][0-9]{2}:?[0-9]{2})?\s")
_SYSLOG = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>[0-9]{1,2})\s(?P<clock>[0-9]{2}:"
                     r"[0-9]{2}:[0-9]{2})\s")
_DMESG_T = re.compile(r"^\[(?:[A-Z][a-z]{2}) (?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>[0-9]{1,2}) "
                      r"(?P<clock>[0-9]{2}:[0-9]{2}:[0-9]{2}) (?P<year>[0-9]{4})\]\s")
_MONTHS = dict((name, index) for index, name in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1))
_KEEP = ("NVRM: Xid", "SXid (")


def iso(seconds):
    """Epoch seconds -> ``2026-11-30T12:00:01Z`` (None stays None)."""
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _from_iso(text):
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return None


def line_time(line, year_hint=None):
    """Epoch seconds of a log line's time stamp, or None. Times without a zone are UTC for
    ISO stamps and host-local for syslog/dmesg ones (taken as UTC: a few hours at most)."""
    match = _ISO.match(line)
    if match:
        seconds = calendar.timegm(time.strptime(match.group("date") + " " + match.group("clock"),
                                                "%Y-%m-%d %H:%M:%S"))
        tz = match.group("tz")
        if tz and tz != "Z":
            sign = -1 if tz[0] == "-" else 1
            digits = tz[1:].replace(":", "")
            seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)
        return seconds
    match = _DMESG_T.match(line)
    if match:
        return calendar.timegm((int(match.group("year")), _MONTHS[match.group("mon")],
                                int(match.group("day"))) + tuple(
            int(x) for x in match.group("clock").split(":")) + (0, 0, 0))
    match = _SYSLOG.match(line)
    if match and match.group("mon") in _MONTHS:
        ref = time.gmtime(year_hint if year_hint is not None else time.time())
        month = _MONTHS[match.group("mon")]
        year = ref.tm_year - 1 if month > ref.tm_mon else ref.tm_year
        return calendar.timegm((year, month, int(match.group("day"))) + tuple(
            int(x) for x in match.group("clock").split(":")) + (0, 0, 0))
    return None


def _gpu_address(text):
    """``0000:9b:00`` / ``0000:9b:00.0`` -> ``0000:9b:00.0``."""
    parts = text.split(":")
    domain, bus, rest = parts[0], parts[1], parts[2]
    dev, _sep, fn = rest.partition(".")
    return "%04x:%02x:%02x.%d" % (int(domain, 16), int(bus, 16), int(dev, 16), int(fn or "0"))


def parse_line(line, year_hint=None):
    """One event dict ``{kind, code, address, time, class, description, message, severity}``
    for an XID or SXID line, else None."""
    if "Xid" not in line:
        return None
    line = host_health.cut(line).rstrip()
    match = _XID.search(line)
    if match:
        code = int(match.group("code"))
        message = line[match.end():].strip()
        klass, description = xid.classify(code, message)
        return {"kind": "xid", "code": code, "address": _gpu_address(match.group("pci")),
                "time": line_time(line, year_hint), "class": klass,
                "description": description, "message": message[:300]}
    match = _SXID.search(line)
    if match:
        klass, description = xid.classify_sxid(match.group("severity"))
        return {"kind": "sxid", "code": int(match.group("code")),
                "address": _gpu_address(match.group("pci")), "time": line_time(line, year_hint),
                "class": klass, "description": description,
                "severity": match.group("severity"), "switch": match.group("switch"),
                "message": line[match.end():].strip()[:300]}
    return None


# At most this many XID/SXID lines are kept (the newest): a log of nothing but XIDs must
# not take the host's memory; a GPU that logged this many is reported either way.
MAX_KEPT = 20000
# The reading caps of kern.log: lines up to LINE_LIMIT bytes (longer ones skipped, never
# held), and LOG_LIMIT bytes in all, over every rotation, the newest first. Reading costs
# about 0.4 us a line however short (hostfs.read_lines), so the cap is in bytes of lines
# the audit can afford: 32 MiB of empty lines (the worst, 33 million of them) are about
# 15 s here, 32 MiB of journal lines about 0.4 s; a week of a host's kernel messages is
# a few MiB (the kernel rate-limits its floods). At most KERN_LOG_FILES rotations are read.
LOG_LIMIT = 32 << 20
LINE_LIMIT = hostfs.LINE_LIMIT
KERN_LOG_FILES = 32
# No line shorter than this is an XID, SXID or host-health message ("Linux version " is
# the shortest kept text): skipped before any test.
_SHORTEST = 13
# A line whose time stamp or address cannot be read is skipped (and counted): these are
# what the parsers raise on one (``2026-13-45``, a month that is none).
_BAD_LINE = (ValueError, KeyError, OverflowError, IndexError, TypeError)


def keep(lines, notes=None, most=MAX_KEPT):
    """Only the XID and SXID lines and the host-health lines (``hostlog.wanted``), each cut
    to ``hostlog.LINE_CHARS``, the newest ``most`` of them (``notes`` gets a line saying
    how many older ones were dropped)."""
    kept = collections.deque(maxlen=most)
    seen = 0
    wanted = host_health.wanted
    for line in lines:
        if len(line) < _SHORTEST:
            continue
        line = host_health.cut(line)  # a kernel message is at most ~1 KiB (hostlog.LINE_CHARS)
        if ("Xid" in line and any(k in line for k in _KEEP)) or wanted(line):
            kept.append(line.rstrip("\n"))
            seen += 1
    if seen > most and notes is not None:
        notes.append("%d older XID/SXID/host-health lines dropped (only the newest %d are kept)"
                     % (seen - most, most))
    return list(kept)


def _skipped(section, count, first):
    """Name ``count`` lines skipped for the audit's errors (the first of them quoted)."""
    if count:
        hostfs.problem(section, "%d kernel-log line%s skipped (a time stamp or address that "
                                "cannot be read), the first: %s" % (
                                    count, "" if count == 1 else "s", first[:200]))


def header(source, read_at, window_days, detail=None):
    text = "%s source=%s read_at=%s window_days=%s" % (_HEADER, source, iso(read_at),
                                                       window_days)
    if detail:
        text += " detail=%s" % detail.replace(" ", "_")
    return text


def parse_header(text):
    """``{source, read_at (epoch), window_days}`` of a stored log's first line, or {}."""
    first = (text or "").split("\n", 1)[0]
    if not first.startswith(_HEADER):
        return {}
    out = {}
    for item in first[len(_HEADER):].split():
        key, _sep, value = item.partition("=")
        out[key] = value
    return {"source": out.get("source"), "read_at": _from_iso(out.get("read_at")),
            "window_days": bounded.int_of(out.get("window_days"), digits=6),
            "detail": out.get("detail")}


# -----------------------------------------------------------------------------------------
# reading


def _kern_log_files(root, since):
    """``[(path, mtime)]`` of ``/var/log/kern.log*`` under root, oldest rotation first;
    rotations last written before ``since`` are skipped (nothing in the window)."""
    folder = host_path(root, KERN_LOG_DIR)
    try:
        names = hostfs.listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        if not re.match(r"^kern\.log(\.[0-9]{1,6})?(\.gz)?$", name):
            continue
        path = os.path.join(folder, name)
        try:
            mtime = hostfs.stat(path).st_mtime
        except OSError:
            continue
        if since is not None and mtime < since:
            continue
        number = re.search(r"\.([0-9]{1,6})", name[len("kern.log"):])
        found.append((-(int(number.group(1)) if number else 0), path, mtime))
    return [(path, mtime) for _rank, path, mtime in sorted(found)]


def _lines(text, skip_header=False):
    """The lines of ``text`` one at a time, each cut to ``hostlog.LINE_CHARS`` (never a list
    of them, nor a copy of the text: 16 MiB of empty lines would be 16 million list
    entries, an io.StringIO four bytes a character); lines too short to be any kept
    message are left out; ``skip_header``: the first line too."""
    text = text or ""
    end = len(text)
    start = text.find("\n") + 1 if skip_header else 0
    if skip_header and start == 0:
        return
    while start < end:
        stop = text.find("\n", start)
        if stop < 0:
            stop = end
        if stop - start > _SHORTEST:
            yield text[start:min(stop, start + host_health.LINE_CHARS)].rstrip("\r")
        start = stop + 1


def _counted(reader, seen):
    """The reader's lines, their characters (and line ends) added to ``seen[0]``."""
    for line in reader:
        seen[0] += len(line) + 1
        yield line


def read_kern_log(root, since):
    """``(kept lines with each file's year hint, files read)`` from kern.log*. The files
    are read bounded (``hostfs.read_lines``: lines over ``LINE_LIMIT`` skipped), the newest
    first, ``LOG_LIMIT`` bytes in all (a plain file's newest bytes, a gzip's first), at most
    ``KERN_LOG_FILES`` of them; what was cut, and any line that cannot be read, is named in
    the audit's errors. A file that cannot be read (not a regular file, a broken gzip) is
    left out, the others still read."""
    read = []
    files = []
    base = os.path.abspath(root or "/")
    budget = LOG_LIMIT
    candidates = _kern_log_files(root, since)
    if len(candidates) > KERN_LOG_FILES:
        hostfs.problem("kernel_log", "%d kern.log rotations in the window: only the newest %d "
                                     "read" % (len(candidates), KERN_LOG_FILES))
    for path, mtime in reversed(candidates[-KERN_LOG_FILES:]):
        name = "/" + os.path.relpath(path, base) if base != "/" else path
        room = MAX_KEPT - sum(len(lines) for lines, _mtime in read)
        if budget <= 0 or room <= 0:
            hostfs.problem("kernel_log", "%s and older rotations not read (%s)" % (
                name, "%d MiB of kern.log read in all" % (LOG_LIMIT >> 20) if budget <= 0
                else "%d lines kept already" % MAX_KEPT))
            break
        notes = []
        seen = [0]
        compressed = path.endswith(".gz")
        try:
            with hostfs.read_lines(path, budget, LINE_LIMIT, tail=True,
                                   compressed=compressed) as reader:
                lines = keep(_counted(reader, seen) if compressed else reader, notes, room)
            notes[:0] = reader.notes()
        except (IOError, OSError, EOFError):
            continue
        if compressed:
            budget = 0 if reader.unread is None else \
                budget - seen[0] - reader.long_lines * LINE_LIMIT
        else:
            try:
                budget -= min(budget, hostfs.stat(path).st_size)
            except OSError:
                budget = 0
        files.append(name)
        if notes:
            hostfs.problem("kernel_log", "%s: %s" % (name, "; ".join(notes)))
        read.append((lines, mtime))
    files.reverse()
    kept = []
    for lines, mtime in reversed(read):
        # Traditional syslog stamps carry no year: the file's own time gives it. Keep the
        # hint with the stored line by rewriting such stamps as ISO.
        bad, first = 0, None
        for line in lines:
            match = _SYSLOG.match(line)
            if match:
                try:
                    when = line_time(line, mtime)
                    line = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(when)) + \
                        line[match.end() - 1:]
                except _BAD_LINE:
                    bad, first = bad + 1, first or line
                    continue
            kept.append(line)
        _skipped("kernel_log", bad, first)
    return kept[-MAX_KEPT:], files


# The newest this many kernel messages of the window are read from the journal (``-n``):
# its output is held whole, so its size is bounded here (a record's text is at most 1 KiB:
# 64 MB at most, a few MB on a host that logs the usual thousands of kernel messages a
# week); when the window holds more, the audit's errors say so.
JOURNAL_LINES = 50000


def _journal(runner, window_days):
    tool = runner.which("journalctl")
    if not tool:
        return None, "journalctl not installed"
    rc, out, err = runner.run([tool, "_TRANSPORT=kernel", "--since", "%d days ago" % window_days,
                               "-n", str(JOURNAL_LINES), "-o", "short-iso-precise",
                               "--no-pager", "-q"], check=False, timeout=QUERY_TIMEOUT_S)
    if rc != 0:
        detail = (err or out or "").strip().splitlines()
        return None, "journalctl exited %s%s" % (rc, ": " + detail[-1] if detail else "")
    if not out.strip():
        # No kernel message at all (a container's journal, a journal not kept): not a
        # clean bill of health.
        return None, "the journal holds no kernel message of the last %d days" % window_days
    if out.count("\n") >= JOURNAL_LINES:
        hostfs.problem("kernel_log", "the journal: only its newest %d kernel messages of the "
                                     "last %d days read" % (JOURNAL_LINES, window_days))
    return keep(_lines(out)), None


def producer(window_days, now=None):
    """The live-host reader for :class:`cmdout.CommandOutputs`: the journal, else
    ``/var/log/kern.log*``; returns the stored text (header + kept lines) and its info."""
    def produce(runner):
        read_at = now if now is not None else time.time()
        lines, error = _journal(runner, window_days)
        if lines is not None:
            source, files = "journal", []
        else:
            lines, files = read_kern_log("/", read_at - window_days * 86400)
            source = "kern.log" if files else None
        if source is None:
            return (header("none", read_at, window_days, error) + "\n",
                    {"source": None, "error": "no kernel log: %s and no /var/log/kern.log"
                                              % error})
        return ("\n".join([header(source, read_at, window_days)] + lines) + "\n",
                {"source": source, "files": files, "journal_error": error, "error": None})
    return produce


def load(outputs, window_days=DEFAULT_WINDOW_DAYS, now=None):
    """``(stored text, info)`` of the kernel log for ``outputs`` (a CommandOutputs): the
    live reader, the capture's stored lines, or ``<root>/var/log/kern.log*``."""
    text = outputs.get(OUTPUT_NAME, producer(window_days, now))
    info = dict(outputs.info.get(OUTPUT_NAME) or {})
    if text is None and not outputs.live:
        read_at = now if now is not None else time.time()
        lines, files = read_kern_log(outputs.root, read_at - window_days * 86400)
        if files:
            text = "\n".join([header("kern.log", read_at, window_days)] + lines) + "\n"
            info = {"source": "kern.log", "files": files, "error": None}
            # What the audit used is what a capture of this tree stores.
            outputs.outputs[OUTPUT_NAME] = text
            outputs.info[OUTPUT_NAME] = info
    return text, info


def facts(outputs, window_days=DEFAULT_WINDOW_DAYS, now=None, boot_time=None):
    """The ``kernel_log`` audit fact: ``{available, source, read_at, window_days, error,
    lines (kept), gpus: xid.summarize(...)}`` (an offline audit counts from the time the
    capture read the log)."""
    text, info = load(outputs, window_days, now)
    head = parse_header(text)
    read_at = head.get("read_at") or (now if now is not None else time.time())
    window = head.get("window_days") or window_days
    out = {"available": bool(text) and head.get("source") not in (None, "none"),
           "source": head.get("source") or info.get("source"),
           "read_at": iso(read_at), "window_days": window,
           "seconds": info.get("seconds"), "error": info.get("error"),
           "boot_time": iso(boot_time), "lines": 0, "devices": []}
    if not out["available"]:
        out["read_at"] = None
        if not out["error"] and head.get("detail"):
            out["error"] = head["detail"].replace("_", " ")
        return out
    events = []
    bad, first = 0, None
    for line in _lines(text, bool(head)):
        try:
            event = parse_line(line)
        except _BAD_LINE:  # one line never costs the section: skipped and counted
            bad, first = bad + 1, first or line
            continue
        if event is not None:
            events.append(event)
    _skipped("kernel_log", bad, first)
    out["lines"] = len(events)
    out["devices"] = xid.summarize(events, read_at, window, boot_time)
    for dev in out["devices"]:
        for code in dev["codes"]:
            code["first"] = iso(code["first"])
            code["last"] = iso(code["last"])
            if code.get("cancelled_by"):
                code["cancelled_by"]["at"] = iso(code["cancelled_by"]["at"])
    return out


def boot_time(root):
    """Epoch seconds the running kernel booted (``btime`` of ``/proc/stat``), or None."""
    try:
        with hostfs.open_read(host_path(root, "/proc/stat"), "r") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return bounded.int_of(line[len("btime "):])
    except (IOError, OSError, ValueError, IndexError):
        return None
    return None


def health_facts(root, outputs, window_days=DEFAULT_WINDOW_DAYS, now=None, boot_time=None):
    """The ``host_health`` audit fact: the kernel log's host-health events over the window
    (``hostlog.summarize``: classes, boots, GPUs fallen off the bus) and EDAC's counters
    (``hostlog.edac``, sysfs: there with or without a kernel log)."""
    text, _info = load(outputs, window_days, now)
    head = parse_header(text)
    available = bool(text) and head.get("source") not in (None, "none")
    read_at = head.get("read_at") or (now if now is not None else time.time())
    window = head.get("window_days") or window_days
    out = {"available": available, "window_days": window,
           "read_at": iso(read_at) if available else None, "boots": 0,
           "events": {}, "lost_gpus": [], "edac": host_health.edac(root)}
    if not available:
        return out

    def when(line):
        try:
            return line_time(line)
        except _BAD_LINE:
            return None

    summary = host_health.summarize(_lines(text, bool(head)), when, read_at - window * 86400,
                                    boot_time)
    for entry in summary["events"].values():
        entry["first"] = iso(entry["first"])
        entry["last"] = iso(entry["last"])
    for item in summary["lost_gpus"]:
        item["last"] = iso(item["last"])
    out.update(summary)
    return out
