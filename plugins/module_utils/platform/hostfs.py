# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host file access under a root.

Every reader and writer in this collection resolves host paths (``/sys``, ``/proc``,
``/etc``, ``/lib/modules``, ``/var/lib``) under a ``root``: ``/`` on a live host, a
temporary tree in tests, an unpacked capture in an offline audit.

Readers go through the functions here (``read_text``, ``read_bytes``, ``listdir``, ``isdir``,
``islink``, ``readlink``, ...) rather than ``open`` and ``os`` directly: while a recorder is
active (``recording``), each notes the path it touched, which is what a capture packs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import io
import os
import stat as _stat

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs_base import (  # noqa: F401
    _complete,
    _FLAGS,
    host_path,
    HostFileError,
    _in_root,
    _kind,
    LINE_LIMIT,
    LinkLoop,
    LOG_LIMIT,
    _mib,
    _NOFOLLOW,
    _note,
    NotRegularFile,
    OUTPUT_LIMIT,
    problem,
    READ_LIMIT,
    recording,
    _refuse,
    _resolved,
    _ROOTS,
    session,
    _stat_in_root,
    _too_large,
    TooLarge,
    walk_in_root,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs_root import (  # noqa: F401
    check_root,
    folder_in_root,
    inside_root,
    LOCK_PATH,
    LockError,
    PathError,
    resolve_links,
    RootLock,
    under_root,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs_write import (  # noqa: F401
    atomic_write,
    copy_fd,
    create_temp,
    open_source,
    source_problem,
    source_refused,
    unified_diff_dict,
    write_in_place,
)

# every name the readers and writers use, this file's own and its siblings' (one import
# place for them: hostfs)
__all__ = (
    "_complete", "_FLAGS", "host_path", "HostFileError", "_in_root", "_kind", "LINE_LIMIT",
    "LinkLoop", "LOG_LIMIT", "_mib", "_NOFOLLOW", "_note", "NotRegularFile", "OUTPUT_LIMIT",
    "problem", "READ_LIMIT", "recording", "_refuse", "_resolved", "_ROOTS", "session",
    "_stat_in_root", "_too_large", "TooLarge", "walk_in_root", "check_root", "folder_in_root",
    "inside_root", "LOCK_PATH", "LockError", "PathError", "resolve_links", "RootLock", "under_root",
    "atomic_write", "copy_fd", "create_temp", "open_source", "source_problem", "source_refused",
    "unified_diff_dict", "write_in_place", "open_read", "read_lines", "listdir", "walk", "isdir",
    "isfile", "exists", "lexists", "islink", "readlink", "realpath", "stat", "getsize", "read_text",
    "read_int", "read_bytes", "numbered_entries",
)


# ---------------------------------------------------------------------------------------
# reading


def _open_regular(path):
    """``(fd, stat)`` of the regular file ``path``, opened without blocking (O_NONBLOCK: a
    FIFO never waits for a writer) after resolving it inside its root; anything else
    refused (NotRegularFile naming the path and what it is). Under a root the kind is
    checked before the open (a device node in a tree is never opened) and the open does
    not follow a link; on the live host the open file is checked (fstat)."""
    if _ROOTS:
        try:
            real, st = _in_root(path)
            if real is not path:
                if st is None or isinstance(st, OSError):
                    st = _complete(path, real, st)
                if not _stat.S_ISREG(st.st_mode):
                    _refuse(path, st)
                return os.open(real, _FLAGS | _NOFOLLOW), st
        except HostFileError:
            raise
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, path)
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket: say so
            try:
                st = os.stat(path)
            except OSError:
                st = None
            if st is not None and not _stat.S_ISREG(st.st_mode):
                _refuse(path, st)
        raise type(exc)(exc.errno, exc.strerror, path)
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            _refuse(path, st)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read_all(path, limit=READ_LIMIT):
    """The bytes of ``path`` by plain ``os.read`` calls: an audit reads thousands of tiny
    sysfs files, and a text-mode ``open`` costs 2.5 times as much per file. Over ``limit``
    bytes: TooLarge (a disk file's size tells at once; sysfs and procfs sizes lie)."""
    fd, st = _open_regular(path)
    try:
        if st.st_size > limit:
            _too_large(path, limit, st.st_size)
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 65536 if limit - total >= 65536 else limit - total + 1)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                _too_large(path, limit)
            chunks.append(chunk)
    except HostFileError:
        raise
    except OSError as exc:  # a folder (EISDIR), EIO: named like open() names it
        raise type(exc)(exc.errno, exc.strerror, path)
    finally:
        os.close(fd)


class _BoundedRaw(io.RawIOBase):
    """A raw reader over a file descriptor that raises TooLarge past ``limit`` bytes."""

    def __init__(self, fd, path, limit):
        io.RawIOBase.__init__(self)
        self._fd = fd
        self._path = path
        self._left = limit
        self._limit = limit

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=os.SEEK_SET):
        return os.lseek(self._fd, offset, whence)

    def fileno(self):
        return self._fd

    def readinto(self, buffer):
        want = len(buffer)
        if want > self._left:
            want = self._left + 1
        data = os.read(self._fd, want)
        if len(data) > self._left:
            _too_large(self._path, self._limit)
        self._left -= len(data)
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        if not self.closed:
            os.close(self._fd)
        io.RawIOBase.close(self)


def open_read(path, mode="r", limit=READ_LIMIT, **kwargs):
    """``open`` for reading (``r`` or ``rb``, ``encoding``/``errors``/``newline`` as open
    takes them), recorded: a regular file only (see ``_open_regular``), reading past
    ``limit`` bytes raises TooLarge (so no line is longer either)."""
    _note(path, "read")
    fd, _st = _open_regular(path)
    handle = io.BufferedReader(_BoundedRaw(fd, path, limit))
    if "b" in mode:
        return handle
    return io.TextIOWrapper(handle, encoding=kwargs.get("encoding"),
                            errors=kwargs.get("errors"), newline=kwargs.get("newline"))


class read_lines(object):
    """The lines of a log (text, line ends dropped), read in bounded memory::

        with hostfs.read_lines(path, tail=True) as lines:
            for line in lines: ...

    At most ``limit`` bytes are read (with ``tail`` a plain file's last ``limit`` bytes,
    a log's newest; ``compressed``: gzip, its output counted); a line over ``line_limit``
    bytes is skipped, never held. After the loop ``long_lines`` counts the skipped lines,
    ``unread`` the bytes left unread (None: not known, a gzip cut at its cap) and
    ``notes()`` says both with the caps named."""

    def __init__(self, path, limit=LOG_LIMIT, line_limit=LINE_LIMIT, tail=False,
                 compressed=False, encoding="utf-8", errors="replace"):
        self.path = path
        self.limit = limit
        self.line_limit = line_limit
        self.tail = tail
        self.compressed = compressed
        self.encoding = encoding
        self.errors = errors
        self.long_lines = 0
        self.unread = 0
        self._file = None
        self._skip_first = False

    def __enter__(self):
        _note(self.path, "read")
        fd, st = _open_regular(self.path)
        try:
            if self.compressed:
                import gzip
                self._file = gzip.GzipFile(fileobj=io.FileIO(fd, "rb", closefd=True))
            else:
                self._file = io.FileIO(fd, "rb", closefd=True)
                if self.tail and st.st_size > self.limit:
                    self.unread = st.st_size - self.limit
                    os.lseek(fd, self.unread, os.SEEK_SET)
                    self._skip_first = True
        except BaseException:
            if self._file is None:
                os.close(fd)
            raise
        return self

    def __exit__(self, *exc):
        if self._file is not None:
            self._file.close()
        return False

    def _decode(self, data):
        if data.endswith(b"\r"):
            data = data[:-1]
        return data.decode(self.encoding, self.errors)

    def __iter__(self):
        pending = []
        size = 0
        skipping = self._skip_first
        total = 0
        limit = self.limit
        line_limit = self.line_limit
        while total < limit:
            try:
                chunk = self._file.read(min(65536, limit - total))
            except (EOFError, OSError) as exc:  # a truncated or broken gzip
                raise IOError(getattr(exc, "errno", None) or errno.EIO,
                              "%s: %s" % (self.path, exc), self.path)
            if not chunk:
                break
            total += len(chunk)
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    piece = chunk[start:]
                    if not skipping and piece:
                        if size + len(piece) > line_limit:
                            skipping = True
                            self.long_lines += 1
                            pending, size = [], 0
                        else:
                            pending.append(piece)
                            size += len(piece)
                    break
                piece = chunk[start:end]
                start = end + 1
                if skipping:
                    skipping = False
                elif size + len(piece) > line_limit:
                    self.long_lines += 1
                else:
                    yield self._decode(b"".join(pending) + piece if pending else piece)
                pending, size = [], 0
        else:
            if self._file.read(1):
                self.unread = None if self.compressed else self.unread + (
                    os.fstat(self._file.fileno()).st_size - self.unread - total)
        if pending and not skipping:
            yield self._decode(b"".join(pending))

    def notes(self):
        """What was left out, caps named: ``["1 line over 64 KiB skipped", ...]``."""
        out = []
        if self.long_lines:
            out.append("%d line%s over %s skipped" % (
                self.long_lines, "" if self.long_lines == 1 else "s", _mib(self.line_limit)))
        if self.unread is None:
            out.append("read only its first %s (its cap)" % _mib(self.limit))
        elif self.unread:
            out.append("read only its last %s (its cap): %d older bytes not read"
                       % (_mib(self.limit), self.unread))
        return out


def listdir(path):
    _note(path, "list")
    try:
        return os.listdir(_in_root(path)[0])
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)


def walk(path):
    """``os.walk``, each folder it lists recorded (and named as under ``path``)."""
    real = _resolved(path)[0]
    for folder, dirs, files in os.walk(real):
        if real is not path:
            folder = path + folder[len(real):]
        _note(folder, "list")
        yield folder, dirs, files


def _mode(path, follow=True):
    """st_mode of ``path`` (resolved inside its root), None when it cannot be stat'ed."""
    try:
        return _stat_in_root(path, follow).st_mode
    except (OSError, ValueError):
        return None


def isdir(path):
    _note(path, "stat")
    mode = _mode(path)
    return mode is not None and _stat.S_ISDIR(mode)


def isfile(path):
    """True for a regular file; a FIFO, socket or device where a file is looked for is also
    kept as a problem of the session (the audit names it)."""
    _note(path, "stat")
    mode = _mode(path)
    if mode is None:
        return False
    if _stat.S_ISREG(mode):
        return True
    if not _stat.S_ISDIR(mode):
        problem("files", "%s: %s, not a regular file: taken as missing" % (path, _kind(mode)))
    return False


def exists(path):
    _note(path, "stat")
    return _mode(path) is not None


def lexists(path):
    _note(path, "stat")
    return _mode(path, follow=False) is not None


def islink(path):
    _note(path, "stat")
    mode = _mode(path, follow=False)
    return mode is not None and _stat.S_ISLNK(mode)


def readlink(path):
    _note(path, "stat")
    try:
        return os.readlink(_in_root(path, follow=False)[0])
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)


def realpath(path):
    """``os.path.realpath``, links resolved inside the root ``path`` lies under; the path is
    recorded (a capture keeps every link on it)."""
    _note(path, "stat")
    real = _resolved(path)[0]
    return os.path.realpath(real) if real is path else real


def stat(path):
    _note(path, "stat")
    try:
        return _stat_in_root(path)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)


def getsize(path):
    return stat(path).st_size


def read_text(path, default=None, limit=READ_LIMIT):
    """Read a small text file, stripped, as UTF-8 (bad bytes replaced, line ends made
    ``\\n`` as text mode does). Return ``default`` when it does not exist. A file that is
    not a regular file, or over ``limit`` bytes, raises HostFileError naming it."""
    _note(path, "read")
    try:
        text = _read_all(path, limit).decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.EINVAL):
            return default
        raise
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def read_int(path, default=None, base=0):
    """Read an integer file (``0x10de``, ``-1``, ``4``); ``default`` when absent or empty."""
    text = read_text(path)
    if text is None or text == "":
        return default
    try:
        return int(text.split()[0], base)
    except ValueError:
        return default


def read_bytes(path, default=None, limit=READ_LIMIT):
    """The bytes of ``path`` (``default`` when it does not exist); HostFileError as
    ``read_text``."""
    _note(path, "read")
    try:
        return _read_all(path, limit)
    except (IOError, OSError) as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return default
        raise


def numbered_entries(folder, pattern, files_only=False):
    """``[(number, path)]``, sorted, of the entries of ``folder`` whose name matches the
    compiled ``pattern`` (its first group is the number): ``state3``, ``policy12``,
    ``129.conf``. An unreadable or missing folder gives ``[]``."""
    try:
        names = listdir(folder)
    except OSError:
        return []
    found = []
    for name in names:
        match = pattern.match(name)
        path = os.path.join(folder, name)
        if match and (not files_only or isfile(path)):
            found.append((int(match.group(1)), path))
    return sorted(found)
