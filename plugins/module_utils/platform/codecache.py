# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's bytecode cache for a module run from AnsiballZ's zip.

AnsiballZ ships source only, and ``zipimport`` never writes bytecode, so every module call
compiles every file it imports: for ``host_audit`` on the seed tree about 0.19 s of CPU for
the collection's files and 0.12 s for ansible's module_utils, against 0.3 s for the rest of
the call (2026-12-05, Python 3.11). :class:`Store` keeps each compiled file on the host, in a
folder of the remote user's own (``~/.ansible/gpuhost-tuning/pycache``, beside Ansible's
``~/.ansible/tmp``), so a host compiles a file once per version of it, as Python does for
files on disk. It is the transport's cache, not host state: nothing under ``root`` is read or
written, and check mode is the same run.

- **Key:** an entry's name is the SHA-256 of the interpreter's bytecode magic, the file's
  path inside the zip and its source bytes; the entry repeats the magic and the digest,
  then the length and CRC-32 of the marshalled code that follows. A changed file, another
  Python or another collection version is a new entry, never a stale one.
- **Trust:** the folder is used only when it is a real folder (not a link) owned by the
  effective user with no group or other access (made 0700), and an entry only when it is a
  regular file of that user, no one else may write, under ``ENTRY_MAX`` bytes, opened
  without following links. Anything else, a bad header or a load error: the file is
  compiled from the zip as without the cache. Writes are a new file renamed over the entry.
- **Bounds:** on the first write of a run (a miss: a new version arrived) entries not
  written for ``KEEP_DAYS`` are removed, and the oldest beyond ``ENTRIES_MAX``; a run that
  finds everything writes nothing. One version of the collection and of ansible's
  module_utils is about 2-3 MB.
- **Settings:** ``GPUHOST_TUNING_CODE_CACHE`` in the module's environment: ``off`` turns the
  cache off, an absolute path puts it there (the tests use their own folder).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import importlib.util
import marshal
import os
import pwd
import stat
import time
import struct
import types
import zlib

ENV = "GPUHOST_TUNING_CODE_CACHE"
HOME_FOLDER = os.path.join(".ansible", "gpuhost-tuning", "pycache")
ENTRY_MAX = 8 * 1024 * 1024
KEEP_DAYS = 30
ENTRIES_MAX = 4096
SCAN_MAX = 16384        # names looked at by one prune, whatever else the folder holds
TAG = b"gpuhost-tuning-code\0"
SUFFIX = ".pyc"


def folder_from_env(environ=None):
    """The cache folder the environment asks for, or None for no cache."""
    environ = os.environ if environ is None else environ
    wanted = environ.get(ENV)
    if wanted is not None:
        wanted = wanted.strip()
        if wanted.lower() in ("", "off", "0", "false", "no") or not os.path.isabs(wanted):
            return None
        return wanted
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return None
    return os.path.join(home, HOME_FOLDER) if os.path.isabs(home or "") else None


def _private_folder(path):
    """Whether ``path`` is a real folder of this user that no one else may enter."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            and not info.st_mode & 0o077)


def _sums(body):
    """The length and CRC-32 of an entry's code, as stored before it."""
    return struct.pack("<II", len(body) & 0xFFFFFFFF, zlib.crc32(body) & 0xFFFFFFFF)


class Store:
    """Compiled code of the files a module imports, kept in ``folder`` (see the module's text).

    Every method swallows its own OS errors: the worst a broken cache does is compile.
    """

    def __init__(self, folder):
        self.folder = folder
        self.usable = _private_folder(folder)
        self.pruned = False
        self.hits = 0
        self.writes = 0

    @staticmethod
    def digest(inner, source):
        """The entry's digest for ``source`` found at ``inner`` (its path inside the zip)."""
        sha = hashlib.sha256(importlib.util.MAGIC_NUMBER)
        sha.update(inner.encode("utf-8", "surrogateescape") + b"\0")
        sha.update(source)
        return sha.digest()

    def _path(self, digest):
        return os.path.join(self.folder, digest.hex() + SUFFIX)

    def load(self, inner, source):
        """The code object kept for this source, or None."""
        if not self.usable:
            return None
        digest = self.digest(inner, source)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            handle = os.open(self._path(digest), flags | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        try:
            info = os.fstat(handle)
            if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                    or info.st_mode & 0o022 or info.st_size > ENTRY_MAX):
                return None
            chunks, left = [], ENTRY_MAX + 1
            while left > 0:
                chunk = os.read(handle, min(left, 1024 * 1024))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(handle)
        header = importlib.util.MAGIC_NUMBER + TAG + digest
        body = data[len(header) + 8:]
        if (len(data) > ENTRY_MAX or not data.startswith(header)
                or data[len(header):len(header) + 8] != _sums(body)):
            return None
        try:
            code = marshal.loads(body)
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(code, types.CodeType):
            return None
        self.hits += 1
        return code

    def save(self, inner, source, code):
        """Keep ``code`` for this source; True when it was written."""
        if not self.usable and not self._make_folder():
            return False
        digest = self.digest(inner, source)
        body = marshal.dumps(code)
        data = importlib.util.MAGIC_NUMBER + TAG + digest + _sums(body) + body
        if len(data) > ENTRY_MAX:
            return False
        self._prune()
        temp = os.path.join(self.folder, ".%s.%d.%s.tmp" % (
            digest.hex()[:16], os.getpid(), os.urandom(4).hex()))
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        try:
            handle = os.open(temp, flags, 0o600)
        except OSError:
            return False
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(handle, view):]
            finally:
                os.close(handle)
            os.replace(temp, self._path(digest))
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass
            return False
        self.writes += 1
        return True

    def _make_folder(self):
        try:
            os.makedirs(self.folder, 0o700)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                return False
        self.usable = _private_folder(self.folder)
        return self.usable

    def _prune(self):
        """Once per run, before its first write: drop old entries and any beyond the cap."""
        if self.pruned:
            return
        self.pruned = True
        cutoff = time.time() - KEEP_DAYS * 86400
        kept = []
        try:
            with os.scandir(self.folder) as listing:
                for seen, entry in enumerate(listing):
                    if seen >= SCAN_MAX:
                        break
                    if not entry.name.endswith((SUFFIX, ".tmp")):
                        continue
                    info = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(info.st_mode):
                        continue
                    stale = info.st_mtime < (cutoff if entry.name.endswith(SUFFIX)
                                             else time.time() - 3600)
                    if stale:
                        os.unlink(entry.path)
                    elif entry.name.endswith(SUFFIX):
                        kept.append((info.st_mtime, entry.path))
            for _mtime, path in sorted(kept)[:max(0, len(kept) - ENTRIES_MAX)]:
                os.unlink(path)
        except OSError:
            pass
