# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run lock: one file per root held by a role for all its changing steps.

``<root>/run/gpuhost-tuning.run.lock`` is a JSON document naming the holder (controller,
user, play, purpose, host, pid, start time) and a random token. It is a different file from
the per-call ``hostfs.RootLock``: a module that changes the host takes its per-call lock as
before and, while holding it, reads the run lock; the module goes on only when there is no
run lock or the token in the ``GPUHOST_TUNING_RUN_LOCK`` environment variable (set by the
role on its tasks) matches it. The run lock is created while holding the per-call lock, so
the two never race, and a run never waits on itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import json
import os
import re
import socket
import stat
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    LockError,
    RootLock,
    create_temp,
    folder_in_root,
    host_path,
)

RUN_LOCK_PATH = "/run/gpuhost-tuning.run.lock"
ENV_TOKEN = "GPUHOST_TUNING_RUN_LOCK"
# A run lock older than this is named "probably stale" in the refusal (never broken): a
# reboot_verify run with its default reboot timeouts stays well under it.
STALE_AFTER_S = 6 * 3600
HOLDER_FIELDS = ("controller", "user", "play", "purpose")
# Each recorded text field is cut to this many characters (a play name is a line, not a
# document): the whole lock stays a few KiB, far below what ``read`` takes in.
FIELD_MAX = 256
# How much of the lock file is read and parsed whole. A lock written before FIELD_MAX (or
# by hand) may be longer: its fields are then picked out of its first and last READ_EDGE
# bytes (``_salvage``), the token among them wherever the long field lies.
READ_MAX = 1024 * 1024
READ_EDGE = 65536
_TEXT_FIELD = re.compile(
    r'"(controller|user|play|purpose|host|since|token)": "((?:[^"\\]|\\.)*)')
_INT_FIELD = re.compile(r'"(pid|since_epoch)": (-?[0-9]{1,20})')


def _cut(value, limit=FIELD_MAX):
    value = str(value)
    return value if len(value) <= limit else value[:limit - 3] + "..."


def lock_path(root):
    """The run lock of ``root``; PathError when its folder (``<root>/run``) resolves outside
    the root (a tree's lock must never land in this machine's ``/run``)."""
    path = host_path(root or "/", RUN_LOCK_PATH)
    folder_in_root(root or "/", os.path.dirname(path), "run lock %s" % path)
    return path


def _shown(root):
    root = root or "/"
    return RUN_LOCK_PATH if root == "/" else lock_path(root)


def read(root):
    """The holder recorded in the run lock, or None when there is none. A file that is not
    a JSON object is still a lock (``{"unreadable": text}``): it is never ignored; one too
    long to read whole keeps the fields found at its start and end, its token among them,
    so the run holding it is not locked out by it; each field is cut to FIELD_MAX. A link
    or a special file in its place is a lock nobody can read (never followed, never opened:
    a FIFO would block)."""
    path = lock_path(root)
    try:
        kind = os.lstat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    if not stat.S_ISREG(kind):
        return {"unreadable": "%s, not a regular file" % (
            "a symbolic link to %s" % os.readlink(path) if stat.S_ISLNK(kind)
            else "a special file")}
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        size = os.fstat(fd).st_size
        if size <= READ_MAX:
            raw = os.read(fd, READ_MAX)
        else:
            raw = os.read(fd, READ_EDGE)
            os.lseek(fd, size - READ_EDGE, os.SEEK_SET)
            raw += b"\n" + os.read(fd, READ_EDGE)
    finally:
        os.close(fd)
    text = raw.decode("utf-8", "replace")
    data = None
    if size <= READ_MAX:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if isinstance(data, dict):
        if any(len(str(value)) > FIELD_MAX for value in data.values()):
            data = dict((key, _cut(value) if isinstance(value, str) else value)
                        for key, value in data.items())
        return data
    return _salvage(text)


def _salvage(text):
    """The fields of a lock that is not one whole JSON object (too long, or damaged),
    each cut to FIELD_MAX: a holder when a token is among them, else ``unreadable``."""
    found = {}
    for key, value in _TEXT_FIELD.findall(text):
        try:
            value = json.loads('"%s"' % value)
        except ValueError:
            pass
        found.setdefault(key, _cut(value))
    for key, value in _INT_FIELD.findall(text):
        found.setdefault(key, int(value))
    if found.get("token"):
        return found
    return {"unreadable": _cut(text.strip(), 200)}


def _age(seconds):
    if seconds < 120:
        return "%d s" % seconds
    if seconds < 7200:
        return "%d min" % (seconds // 60)
    return "%.1f h" % (seconds / 3600.0)


def describe(holder, root, now=None):
    """The refusal text: who holds the run lock, since when, and how to clear a stale one."""
    path = _shown(root)
    if "unreadable" in holder:
        who = "an unknown run (the file reads %r)" % holder["unreadable"]
        since = None
    else:
        who = "%s (play %r) run by %s from controller %s, module parent pid %s on %s" % (
            _cut(holder.get("purpose") or "a gpuhost.tuning run"),
            _cut(holder.get("play") or "?"), _cut(holder.get("user") or "?"),
            _cut(holder.get("controller") or "?"), _cut(holder.get("pid", "?")),
            _cut(holder.get("host") or "?"))
        since = holder.get("since_epoch")
    text = "the run lock %s is held by %s" % (path, who)
    stale = False
    if isinstance(since, (int, float)):
        age = max(0, (now if now is not None else time.time()) - since)
        text += " since %s (%s ago)" % (_cut(holder.get("since", "?")), _age(age))
        stale = age > STALE_AFTER_S
    if stale:
        text += ("; it is older than %d h and probably stale: when no gpuhost.tuning run is "
                 "still working on this host, remove %s by hand and run again"
                 % (STALE_AFTER_S // 3600, path))
    else:
        text += ("; wait for that run to finish (two runs at once would record a half-changed "
                 "state). If it is gone (killed, connection lost) and no gpuhost.tuning run is "
                 "still working on this host, remove %s by hand" % path)
    return text


def new_token():
    return binascii.hexlify(os.urandom(16)).decode("ascii")


def inherited_token():
    """The token of the run this task belongs to (``GPUHOST_TUNING_RUN_LOCK``, set by a role
    holding the lock on its tasks), or None."""
    token = os.environ.get(ENV_TOKEN) or ""
    return token if re.match(r"^[0-9a-f]{32}$", token) else None


def acquire(root, holder, token=None, check_mode=False):
    """Take the run lock for ``holder`` (a dict of HOLDER_FIELDS). With ``token``: a lock
    already held with it is kept (changed false) and a missing one is taken again with it
    (after a reboot emptied /run). Without ``token``, a task of a run that holds the lock
    (``inherited_token``: a role included by reboot_verify) joins it with that run's token
    (``inherited`` true: its owner releases it, never the role that joined). Raises
    LockError naming the holder when another run holds it. Check mode reads only and
    writes nothing."""
    root = root or "/"
    path = lock_path(root)
    inherited = False
    if not token:
        token = inherited_token()
        inherited = token is not None
    token = token or new_token()
    result = {"path": path, "token": token, "changed": False, "held": False,
              "inherited": inherited}
    current = read(root)
    if current is not None:
        if current.get("token") == token:
            result["held"] = True
            result["holder"] = current
            return result
        raise LockError(describe(current, root))
    now = time.time()
    record = dict((key, _cut(holder.get(key) or "")) for key in HOLDER_FIELDS)
    record.update({
        "host": _cut(socket.gethostname()), "pid": os.getppid(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "since_epoch": int(now), "token": token,
    })
    result["holder"] = record
    result["changed"] = True
    if check_mode:
        return result
    run_dir = os.path.dirname(path)
    record["made_run_dir"] = not os.path.isdir(run_dir)
    # The per-call lock: a module changing the host right now finishes first, and every
    # later one sees this file.
    with RootLock(root, "run_lock"):
        current = read(root)
        if current is not None:
            raise LockError(describe(current, root))
        # a new file of a fresh name (create_temp: a name planted in run/ is never opened
        # or removed), linked to the lock's name: os.link never replaces what is there
        fd, temp = create_temp(run_dir, os.path.basename(path), 0o644, root=root)
        try:
            try:
                os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(temp, path)
        finally:
            try:
                os.unlink(temp)
            except OSError:
                pass
    result["held"] = True
    return result


def release(root, token, check_mode=False):
    """Remove the run lock when it holds ``token``. A missing lock is not an error
    (changed false: a reboot empties /run); a lock with another token is refused."""
    root = root or "/"
    path = lock_path(root)
    result = {"path": path, "changed": False, "held": False}
    current = read(root)
    if current is None:
        result["msg"] = "no run lock at %s: nothing to release" % _shown(root)
        return result
    if current.get("token") != token:
        raise LockError("not released, the token does not match: %s" % describe(current, root))
    result["changed"] = True
    result["holder"] = current
    if check_mode:
        return result
    os.unlink(path)
    if current.get("made_run_dir"):
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass
    return result


def refuse_foreign(root):
    """For a module changing the host under its per-call lock: the refusal text when a run
    lock is held by another run than the one in ``GPUHOST_TUNING_RUN_LOCK``, else None."""
    current = read(root)
    if current is None:
        return None
    token = os.environ.get(ENV_TOKEN) or None
    if token is not None and current.get("token") == token:
        return None
    return describe(current, root)
