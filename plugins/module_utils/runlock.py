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
import json
import os
import socket
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
    LockError,
    RootLock,
    host_path,
)

RUN_LOCK_PATH = "/run/gpuhost-tuning.run.lock"
ENV_TOKEN = "GPUHOST_TUNING_RUN_LOCK"
# A run lock older than this is named "probably stale" in the refusal (never broken): a
# reboot_verify run with its default reboot timeouts stays well under it.
STALE_AFTER_S = 6 * 3600
HOLDER_FIELDS = ("controller", "user", "play", "purpose")


def lock_path(root):
    return host_path(root or "/", RUN_LOCK_PATH)


def _shown(root):
    root = root or "/"
    return RUN_LOCK_PATH if root == "/" else lock_path(root)


def read(root):
    """The holder recorded in the run lock, or None when there is none. A file that is not
    a JSON object is still a lock (``{"unreadable": text}``): it is never ignored."""
    try:
        with open(lock_path(root), "rb") as handle:
            text = handle.read(65536).decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            return None
        raise
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    return data if isinstance(data, dict) else {"unreadable": text.strip()[:200]}


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
            holder.get("purpose") or "a gpuhost.tuning run", holder.get("play") or "?",
            holder.get("user") or "?", holder.get("controller") or "?",
            holder.get("pid", "?"), holder.get("host") or "?")
        since = holder.get("since_epoch")
    text = "the run lock %s is held by %s" % (path, who)
    stale = False
    if isinstance(since, (int, float)):
        age = max(0, (now if now is not None else time.time()) - since)
        text += " since %s (%s ago)" % (holder.get("since", "?"), _age(age))
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


def acquire(root, holder, token=None, check_mode=False):
    """Take the run lock for ``holder`` (a dict of HOLDER_FIELDS). With ``token``: a lock
    already held with it is kept (changed false) and a missing one is taken again with it
    (after a reboot emptied /run). Raises LockError naming the holder when another run
    holds it. Check mode reads only and writes nothing."""
    root = root or "/"
    path = lock_path(root)
    token = token or new_token()
    result = {"path": path, "token": token, "changed": False, "held": False}
    current = read(root)
    if current is not None:
        if current.get("token") == token:
            result["held"] = True
            result["holder"] = current
            return result
        raise LockError(describe(current, root))
    now = time.time()
    record = dict((key, str(holder.get(key) or "")) for key in HOLDER_FIELDS)
    record.update({
        "host": socket.gethostname(), "pid": os.getppid(),
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
        temp = "%s.%d.tmp" % (path, os.getpid())
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
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
