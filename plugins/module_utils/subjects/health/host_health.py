# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host health from the kernel log the audit already reads (``kernel_log``) and from EDAC.

The kernel log is read once per audit (the journal's kernel messages of the XID window, or
``kern.log``); ``kernel_log.keep`` keeps, besides the XID/SXID lines, the lines :func:`wanted`
accepts, so a capture stores exactly those. Message formats, from the kernel sources:

- ``hardware_error``: ``[Hardware Error]:`` lines (``HW_ERR``) of APEI/GHES and CPER
  (drivers/acpi/apei/ghes.c ``Hardware error from APEI Generic Hardware Error Source: 0``,
  drivers/firmware/efi/cper.c ``event severity: fatal|recoverable|corrected|info``) and of
  the x86 machine-check code (arch/x86/kernel/cpu/mce: ``Machine check events logged``,
  ``CPU 3: Machine Check Exception: 5 Bank 4: ...``);
- ``lockup``: kernel/watchdog.c ``watchdog: BUG: soft lockup - CPU#12 stuck for 23s!
  [python3:4242]``, ``Watchdog detected hard LOCKUP on cpu 5``; kernel/hung_task.c
  ``INFO: task jbd2/sda1-8:612 blocked for more than 120 seconds.`` (node-problem-detector
  ``TaskHung``);
- ``oops``: ``Oops: 0002 [#1] PREEMPT SMP NOPTI``, ``BUG: unable to handle page fault``,
  ``kernel BUG at mm/slub.c:...``, a kernel general protection fault (``general protection
  fault, probably for non-canonical address 0x...: 0000 [#1] SMP``, since 6.10 ``Oops:
  general protection fault, ...``), ``Kernel panic - not syncing: ...``
  (node-problem-detector ``KernelOops``); a process's own fault (``traps: python3[41234]
  general protection fault ip:...``, ``python3[41234]: segfault at ...``) is none;
- ``oom``: mm/oom_kill.c ``Out of memory: Killed process 4242 (python3) total-vm:...`` or
  ``Memory cgroup out of memory: Killed process ...``, after its summary line
  ``oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=ns,mems_allowed=0-1,
  oom_memcg=/lxc/129,task_memcg=/lxc/129/ns/...,task=python3,pid=4242,uid=100000``
  (``task_memcg`` names the container: ``/lxc/<vmid>`` on Proxmox, ``/lxc.payload.<name>``
  on LXC 4+);
- ``nvme``: drivers/nvme/host/pci.c ``nvme nvme0: I/O 12 QID 3 timeout, aborting`` (newer:
  ``I/O tag 12 (100c) opcode 0x2 (Read) QID 3 timeout, aborting ...``), ``... timeout,
  reset controller``, ``controller is down; will reset: CSTS=0x3, PCI_STATUS=0x10``,
  ``Device not ready; aborting reset, CSTS=0x1``, ``Removing after probe failure``;
- ``fs_readonly``: fs/ext4 ``EXT4-fs (sda1): Remounting filesystem read-only``
  (node-problem-detector ``ReadonlyFilesystem``), btrfs ``forced readonly``, XFS
  ``Shutting down filesystem``;
- a GPU lost without an XID: the NVIDIA driver's ``NVRM: GPU 0000:2b:00.0: GPU has fallen
  off the bus.`` (which drivers log without an XID 79 line too), and XID 79 itself;
- boots: ``Linux version ...``, the first kernel message of every boot.

EDAC: ``/sys/devices/system/edac/mc/mc<N>/{mc_name,ce_count,ue_count}`` and the
``dimm<N>/{dimm_label,dimm_ce_count,dimm_ue_count}`` of each controller (counts since the
EDAC driver loaded, so since boot).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path

CLASSES = ("hardware_error", "lockup", "oops", "oom", "nvme", "fs_readonly")
EDAC_MC = "/sys/devices/system/edac/mc"
# Samples kept per class (the newest), each cut to this many characters.
SAMPLES = 3
SAMPLE_CHARS = 240
# A kernel message is at most 1 KiB of text: the printk ring buffer keeps a record's text
# in at most PRINTKRB_RECORD_MAX = 1024 bytes (kernel/printk/internal.h, 6.x; before,
# LOG_LINE_MAX = 1024 less the 32-byte PREFIX_MAX in kernel/printk/printk.c), and that text
# is what the journal and rsyslog store. The log adds its own prefix (ISO time, a host name
# of at most 64 characters, "kernel: ", the uptime stamp): 256 characters are room enough.
# A longer line is no message the kernel wrote whole: only its first LINE_CHARS characters
# are read (matched, kept, sampled), so no pattern ever runs over more, whatever a file or
# a tenant puts in the log (three 63 KB lines once took 8 s of matching), and the
# newest kernel_log.MAX_KEPT lines kept are at most 25 MB.
LINE_CHARS = 1024 + 256

# Cheap substrings first (every journal line is tested), then the exact patterns.
_HINTS = ("Error]", "BUG", "LOCKUP", "blocked for more than", "Oops", "general protection",
          "Kernel panic", "Killed process", "oom-kill:", "timeout", "will reset",
          "aborting reset", "probe failure", "read-only", "forced readonly",
          "Shutting down filesystem", "fallen off the bus", "Linux version ")
# One alternation scans a line once: about 1 us per journal line, against 0.07 us for the
# XID filter alone (any() over the hints: 1.6 us).
_HINT = re.compile("|".join(re.escape(h) for h in _HINTS))

# Where the kernel's message starts: after the log's own prefix (the journal's and rsyslog's
# "<time> <host> kernel: ", dmesg -T's "[Sun Feb 23 16:24:18 2025] ") and the kernel's
# uptime stamp "[  812.345678] ". Every pattern below is matched there, once per line (never
# searched along it): a message names a process or a device only after its own prefix, so a
# process named "kernel BUG at " or "Oops: 0002 [#1" is no oops, and one match per line
# keeps the cost linear in the line's length.
_LOG_PREFIX = " kernel: "
_DMESG_STAMP = re.compile(r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]{1,2} [0-9:]{8} [0-9]{4}\] ")
_UPTIME = re.compile(r"\[ {0,12}[0-9]{1,12}\.[0-9]{1,9}\] ")
# A process's own fault, which the kernel reports and survives (the process gets SIGSEGV,
# SIGILL...): arch/x86/kernel/traps.c show_signal(), pr_fmt "traps: ",
# "%s[%d] %s%s ip:%lx sp:%lx error:%lx" (e.g. "traps: python3[41234] general protection
# fault ip:7f0c1a2b3c4d sp:7ffd5e6f7a8b error:0 in libc.so.6[7f0c1a200000+195000]", "...
# trap divide error ip:..."), and arch/x86/mm/fault.c show_signal_msg(), "%s[%d]: segfault
# at %lx ip %px sp %px error %lx". No finding: the process's owner sees its crash; the
# host is unharmed (a GPU fault under it is an XID, judged by gpu_xid); a tenant's crashing
# program must not drain a node. The comm is at most 15 characters (TASK_COMM_LEN 16).
_USER_FAULT = re.compile(r"(?:traps: )?.{1,15}?\[[0-9]{1,10}\](?:: segfault at [0-9a-f]{1,16} "
                         r"ip | .{1,64}? ip:[0-9a-f]{1,16} sp:[0-9a-f]{1,16} error:)")

_PATTERNS = (
    ("hardware_error", re.compile(
        r"(?:[A-Za-z0-9_.-]{1,32}: )?(?:\{[0-9]{1,10}\})?\[Hardware Error\]: (?:Hardware "
        r"error from APEI|Machine check events logged|CPU [0-9]{1,6}: Machine Check|"
        r"Machine check:|event severity: (?P<sev>[A-Za-z]{1,20}))")),
    # kernel/watchdog.c (pr_fmt "watchdog: ", "NMI watchdog: " before 4.x),
    # kernel/hung_task.c "INFO: task %s:%d blocked for more than %ld seconds."
    ("lockup", re.compile(r"(?:(?:NMI )?watchdog: )?BUG: soft lockup - CPU#[0-9]{1,6} stuck "
                          r"for [0-9]{1,20}s|(?:(?:NMI )?watchdog: )?Watchdog detected hard "
                          r"LOCKUP on cpu [0-9]{1,6}|INFO: task .{1,64}?:[0-9]{1,10} blocked "
                          r"for more than (?P<secs>[0-9]{1,20}) seconds")),
    # The kernel's own oopses: arch/x86/kernel/dumpstack.c __die_header() "Oops: %04lx
    # [#%d]" and, since 6.10, "Oops: %s: %04lx [#%d]" ("Oops: general protection fault,
    # probably for non-canonical address 0x...: 0000 [#1] PREEMPT SMP NOPTI"); before, a
    # kernel general protection fault's header was "general protection fault: 0000 [#1]"
    # or "general protection fault, probably for non-canonical address 0x...: 0000 [#1]";
    # arch/x86/mm/fault.c "BUG: unable to handle page fault for address: ..." ("... kernel
    # paging request at ..." before 4.20); "kernel BUG at %s:%u!"; "Kernel panic - not
    # syncing: ...". A user process's "traps: ... general protection fault ip:..." is none
    # of these (_USER_FAULT).
    ("oops", re.compile(r"Oops: |general protection fault(?:, [^:]{1,120})?: [0-9a-f]{4} "
                        r"\[#[0-9]{1,10}\]|BUG: unable to handle |kernel BUG at |"
                        r"Kernel panic - not syncing")),
    ("oom", re.compile(r"(?:Out of memory|Memory cgroup out of memory): Killed process "
                       r"(?P<pid>[0-9]{1,10}) \((?P<task>.{0,64}?)\)(?: |,|$)")),
    ("oom_context", re.compile(r"oom-kill:constraint=[A-Za-z_]{1,40}.*?,task_memcg="
                               r"(?P<memcg>[^,]{0,1024}),task=(?P<task>.{0,64}?),pid= {0,8}"
                               r"(?P<pid>[0-9]{1,10})(?:,|$)")),
    ("nvme", re.compile(r"(?:nvme )?(?P<dev>nvme[0-9]{1,6}): .*?(?:timeout, aborting|"
                        r"timeout, reset controller|controller is down; will reset|"
                        r"Device not ready; aborting reset|Removing after probe failure)")),
    ("fs_readonly", re.compile(r"(?:(?:EXT4-fs|EXT3-fs) \((?P<dev>[^)]{1,64})\): Remounting "
                               r"filesystem read-only|BTRFS[^(]{0,20}\(device "
                               r"(?P<bdev>[^)]{1,64})\).*?forced readonly|XFS "
                               r"\((?P<xdev>[^)]{1,64})\): .*?Shutting down filesystem)")),
    ("gpu_off_bus", re.compile(r"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:"
                               r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)[: ].*?"
                               r"fallen off the bus")),
    ("boot", re.compile(r"Linux version (?P<release>[^ ]{1,128})")),
)
_XID79 = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:"
                    r"[0-9a-fA-F]{1,2}(?:\.[0-7])?)\): 79\b")
_CONTAINER = re.compile(r"^/lxc(?:/|\.payload\.|\.payload/)(?P<id>[^/]{1,255})")


def cut(line):
    """``line`` as the audit reads it: at most LINE_CHARS characters."""
    return line[:LINE_CHARS]


def message_start(line):
    """The index in ``line`` where the kernel's message starts (after the log's prefix and
    the uptime stamp); 0 for a bare message."""
    at = line.find(_LOG_PREFIX)
    if at >= 0:
        start = at + len(_LOG_PREFIX)
    else:
        stamp = _DMESG_STAMP.match(line)
        start = stamp.end() if stamp else 0
    uptime = _UPTIME.match(line, start)
    return uptime.end() if uptime else start


def classify(line):
    """``(kind, match)`` of a host-health, lost-GPU or boot line, else ``(None, None)``.
    XID lines are kernel_log's (an XID 79 is read there and by :func:`facts`). Only the
    line's first LINE_CHARS characters are read; each pattern is matched once, where the
    kernel's message starts."""
    line = cut(line)
    if "Xid" in line and "NVRM: Xid" in line:
        return None, None
    if not _HINT.search(line):
        return None, None
    start = message_start(line)
    if _USER_FAULT.match(line, start):
        return None, None
    for kind, pattern in _PATTERNS:
        match = pattern.match(line, start)
        if match:
            if kind == "lockup" and match.group("secs") and \
                    bounded.int_of(match.group("secs"), 0) < 120:
                return None, None
            return kind, match
    return None, None


def wanted(line):
    """True for the lines the audit keeps of the kernel log besides XID/SXID ones."""
    return classify(line)[0] is not None


def container_of(memcg):
    """``/lxc/129/ns/user.slice`` -> ``129``, ``/lxc.payload.web/...`` -> ``web``; None for
    a cgroup that is no container's."""
    match = _CONTAINER.match((memcg or "").strip())
    return match.group("id") if match else None


def _gpu_address(text):
    parts = text.split(":")
    dev, _sep, fn = parts[2].partition(".")
    return "%04x:%02x:%02x.%d" % (int(parts[0], 16), int(parts[1], 16), int(dev, 16),
                                  int(fn or "0"))


def _sample(line):
    return line.strip()[:SAMPLE_CHARS]


def _boot_of(when, boots, boot_time):
    """The boot an event belongs to: ``current`` (since ``boot_time``), else the number of
    boot lines logged before it (``boot-N``), ``earlier`` without any."""
    if when is not None and boot_time is not None and when >= boot_time:
        return "current"
    if when is None:
        return "current" if boot_time is None else "unknown"
    count = sum(1 for b in boots if b <= when)
    if boot_time is None and count == len(boots) and boots:
        return "current"
    return "boot-%d" % count if boots else "earlier"


def _new_class():
    return {"count": 0, "first": None, "last": None, "samples": [], "subjects": {}}


def _count(entry, when, line, subject=None, task=None):
    entry["count"] += 1
    if when is not None:
        entry["first"] = when if entry["first"] is None else min(entry["first"], when)
        entry["last"] = when if entry["last"] is None else max(entry["last"], when)
    entry["samples"] = (entry["samples"] + [_sample(line)])[-SAMPLES:]
    if subject is not None:
        item = entry["subjects"].setdefault(subject, {"count": 0, "tasks": []})
        item["count"] += 1
        if task and task not in item["tasks"]:
            item["tasks"] = (item["tasks"] + [task])[-SAMPLES:]


def summarize(lines, line_time, since, boot_time=None):
    """``{events: {class: {count, first, last, samples, subjects}}, boots, lost_gpus}`` of the
    stored kernel-log lines (``line_time(line)`` -> epoch or None); only events at or after
    ``since`` are counted (boot lines and lost GPUs over the whole log, so that a loss in an
    earlier boot still counts towards hardware service)."""
    events = dict((name, _new_class()) for name in CLASSES)
    severities = set()
    boots = []
    pending = []
    context = {}
    for line in lines:
        line = cut(line)
        kind, match = classify(line)
        xid = None
        if kind is None and "Xid" in line:
            xid = _XID79.search(line)
            if not xid:
                continue
            kind, match = "gpu_off_bus", xid
        if kind is None:
            continue
        when = line_time(line)
        if kind == "boot":
            if when is not None:
                boots.append(when)
            continue
        if kind == "gpu_off_bus":
            pending.append((_gpu_address(match.group("pci")), when, xid is not None))
            continue
        if kind == "oom_context":
            context[match.group("pid")] = match.group("memcg")
            continue
        if when is not None and since is not None and when < since:
            continue
        entry = events[kind]
        if kind == "hardware_error":
            sev = match.group("sev")
            if sev:  # the severity line of the event just counted
                severities.add(sev.lower())
                continue
            if "Machine Check" in line or "Machine check:" in line:
                severities.add("uncorrected")
            _count(entry, when, line)
        elif kind == "oom":
            memcg = context.pop(match.group("pid"), None)
            ct = container_of(memcg)
            _count(entry, when, line, subject="lxc/%s" % ct if ct else "host",
                   task=match.group("task"))
        elif kind == "nvme":
            _count(entry, when, line, subject=match.group("dev"))
        elif kind == "fs_readonly":
            dev = match.group("dev") or match.group("bdev") or match.group("xdev")
            _count(entry, when, line, subject=dev)
        else:
            _count(entry, when, line)
    events["hardware_error"]["severities"] = sorted(severities)
    boots.sort()
    lost = {}
    for address, when, is_xid in pending:
        item = lost.setdefault(address, {"address": address, "text": 0, "xid": 0,
                                         "boots": [], "last": None})
        item["xid" if is_xid else "text"] += 1
        boot = _boot_of(when, boots, boot_time)
        if boot not in item["boots"]:
            item["boots"].append(boot)
        if when is not None:
            item["last"] = when if item["last"] is None else max(item["last"], when)
    return {"events": events, "boots": len(boots),
            "lost_gpus": [lost[a] for a in sorted(lost)]}


def _mc_number(name):
    return bounded.int_of(name[2:]) if re.match(r"^mc[0-9]{1,6}$", name) else None


def _read(path, number=False):
    """A sysfs value, None when missing or refused (a FIFO, a link out of the root: the
    reading session names it in the audit's errors)."""
    try:
        if number:
            return hostfs.read_int(path, base=10)
        return hostfs.read_text(path)
    except (hostfs.HostFileError, IOError, OSError, ValueError):
        return None


def edac(root):
    """``[{controller, name, ce_count, ue_count, dimms: [{dimm, label, ce_count,
    ue_count}]}]`` of ``/sys/devices/system/edac/mc/mc*`` (dimms only those with a
    count); empty without EDAC."""
    folder = host_path(root, EDAC_MC)
    try:
        names = sorted((n for n in hostfs.listdir(folder) if _mc_number(n) is not None),
                       key=_mc_number)
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(folder, name)
        if not hostfs.isdir(path):
            continue
        item = {"controller": name, "name": _read(os.path.join(path, "mc_name")),
                "ce_count": _read(os.path.join(path, "ce_count"), True),
                "ue_count": _read(os.path.join(path, "ue_count"), True),
                "dimms": []}
        for number, dimm in hostfs.numbered_entries(path, re.compile(r"^dimm([0-9]{1,6})$")):
            ce = _read(os.path.join(dimm, "dimm_ce_count"), True)
            ue = _read(os.path.join(dimm, "dimm_ue_count"), True)
            if ce or ue:
                item["dimms"].append({"dimm": number, "ce_count": ce, "ue_count": ue,
                                      "label": _read(os.path.join(dimm, "dimm_label"))})
        out.append(item)
    return out
