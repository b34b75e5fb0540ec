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
import tempfile

# Caps of one read (bytes). A file over its cap is refused (HostFileError, the cap named):
# a runaway file where a small one belongs is a finding, never the host's memory.
READ_LIMIT = 4 << 20      # read_text, read_bytes, open_read: sysfs, procfs, config files
OUTPUT_LIMIT = 16 << 20   # a command output a capture stored (nvidia-smi -q -x, the journal)
LOG_LIMIT = 256 << 20     # read_lines: a log's newest 256 MiB (older bytes are left unread)
LINE_LIMIT = 64 << 10     # read_lines: a longer line is skipped and counted

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | \
    getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _mib(size):
    return "%d MiB" % (size >> 20) if size >= 1 << 20 and not size % (1 << 20) else \
        "%d KiB" % (size >> 10) if size >= 1 << 10 and not size % (1 << 10) else "%d bytes" % size


class HostFileError(OSError):
    """A host file the reading layer refuses: not a regular file where one is meant (a FIFO
    would block the read forever, a device may never end), or larger than the cap of its
    read. ``filename`` is the path; the message names it, what it is and what to do."""

    def __init__(self, path, message):
        OSError.__init__(self, None, "%s: %s" % (path, message), path)

    def __str__(self):
        return str(self.strerror)


class NotRegularFile(HostFileError):
    pass


class TooLarge(HostFileError):
    pass


def _kind(mode):
    for test, name in ((_stat.S_ISFIFO, "a FIFO"), (_stat.S_ISSOCK, "a socket"),
                       (_stat.S_ISCHR, "a character device"), (_stat.S_ISBLK, "a block device"),
                       (_stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


# ---------------------------------------------------------------------------------------
# reading sessions: cached link resolution, refusals collected

_SESSIONS = []


class session(object):
    """One reading pass over a host (an audit): while active, link resolutions inside a root
    are cached (the tree must not change meanwhile: writers never run inside one) and every
    refused file, read cut at its cap or line skipped is kept in ``problems``, a list of
    ``(section, message)`` the audit reports as errors."""

    def __init__(self):
        self.problems = []
        self.cache = {}

    def __enter__(self):
        _SESSIONS.append(self)
        return self

    def __exit__(self, *exc):
        _SESSIONS.remove(self)
        return False


def problem(section, message):
    """Keep ``message`` (once) in every active session's ``problems``."""
    for active in _SESSIONS:
        if (section, message) not in active.problems:
            active.problems.append((section, message))


def _refuse(path, st):
    if _stat.S_ISDIR(st.st_mode):  # as open() says it
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    exc = NotRegularFile(path, "%s, not a regular file: not read (a host tree unpacked with "
                               "tar -x recreates FIFOs and devices: put the file there or "
                               "remove it)" % _kind(st.st_mode))
    problem("files", str(exc))
    raise exc


def _too_large(path, limit, size=None):
    exc = TooLarge(path, "%s, over the %s this read takes: not read (a log or a runaway file "
                         "where a small file belongs?)" % (
                             "%d bytes" % size if size is not None else "larger", _mib(limit)))
    problem("files", str(exc))
    raise exc


# ---------------------------------------------------------------------------------------
# roots: every path under a root other than / is resolved inside it

# The roots other than / that host_path has joined paths to, as given and absolute (trailing
# / dropped): a path under one of them is resolved inside it before it is opened, listed or
# stat'ed, the way the kernel resolves it in a chroot (hence the capture reads the same).
_ROOTS = set()
_SEEN = set()


def _register(root):
    _SEEN.add(root)
    for key in (root.rstrip("/"), os.path.abspath(root)):
        if key and key != "/":
            _ROOTS.add(key)


def host_path(root, path):
    """Return ``path`` (absolute on the host) joined under ``root``. The readers here resolve
    what lies under a root other than ``/`` inside it (``resolve_links``' rule)."""
    root = root or "/"
    if root != "/" and root not in _SEEN:
        _register(root)
    return os.path.join(root, path.lstrip("/"))


def _root_of(path):
    """``(root, rel)`` of the innermost registered root ``path`` lies under, or ``(None, None)``."""
    i = len(path)
    while i > 0:
        head = path[:i]
        if head in _ROOTS:
            return head, path[i + 1:]
        i = path.rfind("/", 0, i)
    return None, None


def _walk_raw(root, rel, follow=True):
    """``rel`` resolved inside ``root`` by ``walk_in_root`` with plain lstat/readlink: the
    resolved ``a/b`` (no link on it but the last name with ``follow`` off)."""

    def look(name, last):
        if last and not follow:
            return None
        full = root + "/" + name
        try:
            st = os.lstat(full)
        except OSError:
            return None
        return os.readlink(full) if _stat.S_ISLNK(st.st_mode) else None

    try:
        return walk_in_root(rel, look)[1:]
    except LinkLoop:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), root + "/" + rel)


def _step(root, base, name):
    """``(rel, st)``: the resolved ``base`` (a folder under root, ``a/b``) with ``name``
    resolved after it, and what lstat said of it (a stat result, the OSError it raised, or
    None when a link was followed: not looked at)."""
    if name in ("", "."):
        return base, None
    if name == "..":
        return base.rpartition("/")[0], None
    rel = base + "/" + name if base else name
    full = root + "/" + rel
    try:
        st = os.lstat(full)
        if not _stat.S_ISLNK(st.st_mode):
            return rel, st
        target = os.readlink(full)
    except OSError as exc:
        return rel, exc
    return _walk_raw(root, target if target.startswith("/") or not base else
                     base + "/" + target), None


def _dir_in_root(root, folder, cache):
    """``folder`` (a path under ``root``, lexical) resolved: ``a/b`` relative to root."""
    if len(folder) <= len(root):
        return ""
    if cache is not None:
        hit = cache.get(folder)
        if hit is not None:
            return hit[1]
    parent, _sep, name = folder.rpartition("/")
    out = _step(root, _dir_in_root(root, parent, cache), name)[0]
    if cache is not None:
        cache[folder] = (root, out)
    return out


def _in_root(path, follow=True):
    """``(real, st)``: ``path`` as a path on this machine that holds no symlink (but its
    last name with ``follow`` off) and never leaves the registered root it lies under, and
    its lstat (a stat result, the OSError it raised, or None: not looked at). ``path``
    itself (and None) when it is under no root: the live host, where the kernel resolves."""
    if not _ROOTS:
        return path, None
    folder, _sep, name = path.rpartition("/")
    if _SESSIONS:
        cache = _SESSIONS[-1].cache
        hit = cache.get(folder)
        if hit is not None:
            root, base = hit
        else:
            root, rel = _root_of(path)
            if root is None or not rel:
                return path, None
            base = _dir_in_root(root, folder, cache)
    else:
        root, base = _checked_folder(path, folder)
        if root is None:
            return path, None
    if follow or name in ("", ".", ".."):
        rel, st = _step(root, base, name)
    else:
        rel = base + "/" + name if base else name
        try:
            st = os.lstat(root + "/" + rel)
        except OSError as exc:
            st = exc
    return (root + "/" + rel if rel else root), st


# Outside a session (a run that writes between its reads), each folder's resolution is
# kept with the identity of the folder it reached and used again only while the resolved
# path still reaches that very folder (one stat instead of an lstat per name on the way):
# a link put on the way since then changes what it reaches, and the folder is resolved
# again. Bounded: emptied at _FOLDERS_MAX entries.
_FOLDERS = {}
_FOLDERS_MAX = 20000


def _checked_folder(path, folder):
    """``(root, resolved folder rel)`` of ``path``'s folder, or ``(None, None)`` when
    ``path`` is under no root (or is one)."""
    hit = _FOLDERS.get(folder)
    if hit is not None:
        root, base, ident = hit
        try:
            st = os.stat(root + "/" + base if base else root)
            if (st.st_dev, st.st_ino) == ident:
                return root, base
        except OSError:
            pass
    root, rel = _root_of(path)
    if root is None or not rel:
        return None, None
    base = _dir_in_root(root, folder, None)
    try:
        st = os.stat(root + "/" + base if base else root)
    except OSError:
        return root, base
    if len(_FOLDERS) >= _FOLDERS_MAX:
        _FOLDERS.clear()
    _FOLDERS[folder] = (root, base, (st.st_dev, st.st_ino))
    return root, base


def _resolved(path, follow=True):
    """``_in_root``, errors named by ``path`` (a loop of links: ELOOP)."""
    try:
        return _in_root(path, follow)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)


def _complete(path, real, st):
    """``st`` of ``_in_root`` made a stat result (lstat when not looked at yet); the
    OSError raised naming ``path``."""
    if st is None:
        try:
            st = os.lstat(real)
        except OSError as exc:
            st = exc
    if isinstance(st, OSError):
        raise type(st)(st.errno, st.strerror, path)
    return st


def _stat_in_root(path, follow=True):
    """The stat of ``path`` inside its root (links followed there; the last one too with
    ``follow``); OSError naming ``path``."""
    real, st = _resolved(path, follow)
    if real is path:
        try:
            return os.stat(real) if follow else os.lstat(real)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, path)
    return _complete(path, real, st)


# Active recorders: objects with ``note(path, kind)``, kind ``read`` (content used), ``list``
# (names used) or ``stat`` (existence, kind or link target used).
_RECORDERS = []


def _note(path, kind):
    for recorder in _RECORDERS:
        recorder.note(path, kind)


class recording(object):
    """Context manager: ``recorder.note(path, kind)`` for every path the readers below touch
    while it is active."""

    def __init__(self, recorder):
        self.recorder = recorder

    def __enter__(self):
        _RECORDERS.append(self.recorder)
        return self.recorder

    def __exit__(self, *exc):
        _RECORDERS.remove(self.recorder)
        return False


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


def write_in_place(path, text):
    """Write a kernel interface file (sysfs/procfs) in place, the way the kernel expects
    (one write). Under a root the path is resolved inside it (never written outside); a
    FIFO, socket or device is refused (NotRegularFile), a FIFO without blocking.

    Raises OSError as is; callers turn it into a message naming what was written.
    """
    real, st = _resolved(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (_FLAGS & ~os.O_RDONLY)
    try:
        if real is not path:
            flags |= _NOFOLLOW
            try:
                st = _complete(path, real, st)
            except OSError:
                st = None  # missing: created, as open(path, "w") does
            if st is not None and not _stat.S_ISREG(st.st_mode):
                _refuse(path, st)
        fd = os.open(real, flags, 0o666)
    except HostFileError:
        raise
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            _refuse(path, st)
        data = text.encode("utf-8") if isinstance(text, str) else text
        while data:
            data = data[os.write(fd, data):]
    except HostFileError:
        raise
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, path)
    finally:
        os.close(fd)


def atomic_write(path, data, mode=None, preserve=True, chmod=True, root=None):
    """Write ``data`` (bytes or text) to ``path`` atomically.

    A temporary file is created in the same folder and renamed over ``path``, so a reader
    sees the old or the new file, never half of one. With ``preserve`` the existing file's
    mode and owner are kept; ``chmod=False`` never calls chmod (pmxcfs refuses it): the
    temporary file is created with the old file's mode instead, and the old owner and group
    are put back only when they differ, a refusal ignored (pmxcfs shows root:www-data by
    itself; a plain filesystem would otherwise leave the writer's owner). ``mode`` applies
    to new files (and to existing ones when ``preserve`` is off).

    With ``root`` (other than ``/``), the folder must resolve inside it (``folder_in_root``):
    a folder that is a link out of the root is refused (PathError naming the link) before
    the temporary file is made.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if root is not None:
        folder_in_root(root, folder, "the folder of %s" % path)
    old = None
    try:
        old = os.stat(path)
    except OSError:
        old = None
    if chmod:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                                   dir=folder)
    else:
        # No chmod/chown allowed (pmxcfs): create the temp file with the old file's mode
        # (or ``mode``) so a plain filesystem keeps it too; the umask still applies.
        create_mode = (old.st_mode & 0o777) if old is not None else (mode or 0o644)
        fd, tmp = _create_temp(folder, os.path.basename(path), create_mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if chmod:
            if old is not None and preserve:
                os.chmod(tmp, old.st_mode & 0o7777)
                try:
                    os.chown(tmp, old.st_uid, old.st_gid)
                except OSError:
                    pass
            elif mode is not None:
                os.chmod(tmp, mode)
            else:
                os.chmod(tmp, 0o644)
        elif old is not None and preserve:
            _restore_owner(tmp, old)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _restore_owner(path, old):
    """chown ``path`` to ``old``'s owner and group when they differ; a refusal is ignored."""
    now = os.stat(path)
    if (now.st_uid, now.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.chown(path, old.st_uid, old.st_gid)
        except OSError:
            pass


def _create_temp(folder, name, create_mode):
    """A new temporary file in ``folder``: O_EXCL and O_NOFOLLOW, so a name planted there
    (a link, a FIFO) is never opened, only skipped."""
    for attempt in range(100):
        tmp = os.path.join(folder, ".%s.%d.%d.tmp" % (name, os.getpid(), attempt))
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                           create_mode), tmp
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, "no free temporary file name in %s" % folder)


def unified_diff_dict(path, before, after):
    """The ``diff`` entry Ansible renders for a file change."""
    return {
        "before_header": path,
        "after_header": path,
        "before": before,
        "after": after,
    }


# ---------------------------------------------------------------------------------------
# roots and paths that must stay under them


class PathError(ValueError):
    """A root that is not a folder, or a path that leaves its root; the message names both."""


def check_root(root):
    """Refuse a root that cannot be meant: empty (an unset variable), missing, not a
    folder, or one that only resolves to ``/`` (``//``, ``/tmp/..``): the live host is
    written only when the root is given as ``/``."""
    if root is None or root == "":
        raise PathError("root: %r is empty: give / for the live host or the folder of a host "
                        "tree (an unset variable?)" % (root,))
    if not isinstance(root, str):
        raise PathError("root: %r is not a path" % (root,))
    if root == "/":
        return
    if not os.path.isdir(root):
        raise PathError("root: %s %s: give / for the live host or an existing folder of a "
                        "host tree" % (root, "is not a folder" if os.path.lexists(root)
                                       else "does not exist"))
    if os.path.realpath(root) == "/":
        raise PathError("root: %s resolves to / : write / itself to act on the live host"
                        % root)


class LinkLoop(ValueError):
    """More symlinks on one path than the kernel follows (40)."""


def walk_in_root(path, look, limit=40):
    """Walk host path ``path`` a name at a time inside a root, following symlinks as the
    kernel does but never above the root: a relative target from the link's folder, an
    absolute one from the root, ``..`` stopping at the root.

    ``look(rel, last)`` is called with every name reached (``rel`` relative to the root,
    ``a/b``; ``last``: nothing follows it) and returns the link target when ``rel`` is a
    symlink, False to stop the walk, anything else to go on. Returns the resolved host path
    (``/a/b``), or None when ``look`` stopped it; LinkLoop after ``limit`` links."""
    pending = [p for p in path.split("/") if p]
    done = []
    hops = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        rel = "/".join(done + [name])
        target = look(rel, not pending)
        if target is False:
            return None
        if isinstance(target, str):
            hops += 1
            if hops > limit:
                raise LinkLoop("too many levels of symlinks resolving %s" % path)
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p] + pending
        else:
            done.append(name)
    return "/" + "/".join(done)


def resolve_links(root, path, limit=40):
    """Host path ``path`` with every symlink on it resolved inside ``root`` (``walk_in_root``;
    the links read are recorded): the resolved host path, ``/a/b``. LinkLoop after
    ``limit`` links."""
    root = os.path.abspath(root or "/")

    def look(rel, _last):
        # rel is made of names already resolved: plain lstat is right (and recorded)
        full = os.path.join(root, rel)
        _note(full, "stat")
        try:
            if not _stat.S_ISLNK(os.lstat(full).st_mode):
                return None
            return os.readlink(full)
        except OSError:
            return None

    return walk_in_root(path, look, limit)


def inside_root(root, full):
    """True when ``full`` (a path on this machine), resolved with symlinks and ``..``, is
    ``root`` or below it."""
    if (root or "/") == "/":
        return True
    base = os.path.realpath(root)
    real = os.path.realpath(full)
    return real == base or real.startswith(base.rstrip("/") + "/")


def under_root(root, path, what="path", follow=True):
    """``host_path(root, path)``, refused (PathError) when it resolves outside ``root``:
    ``..`` components, or a symlink on the way that points out of the tree. With
    ``follow=False`` a link as the last component is not followed (it is the entry itself
    that is recorded, replaced or removed)."""
    full = host_path(root, path)
    check = full if follow else os.path.dirname(full.rstrip("/"))
    if not inside_root(root, check) or (not follow and ".." in path.split("/")):
        raise PathError("%s: %s resolves to %s, outside root %s: refused (paths are host "
                        "paths inside the root)" % (what, path, os.path.realpath(full), root))
    return full


# ---------------------------------------------------------------------------------------
# one changing run per root

LOCK_PATH = "/run/gpuhost-tuning.lock"


def folder_in_root(root, folder, what="folder"):
    """Refuse (PathError) a ``folder`` (a path on this machine, ``root`` or below it) that
    resolves outside ``root``: the first folder on the way that is a symlink leading out
    is named with its target. ``root`` ``/`` (the live host) takes any folder. Locks and
    temporary files are created only where this passes, so a tree whose ``run`` links to
    this machine's ``/run`` never puts a lock there."""
    root = root or "/"
    if root == "/":
        return folder
    base = os.path.abspath(root)
    full = os.path.abspath(folder)
    if full != base and not full.startswith(base.rstrip("/") + "/"):
        raise PathError("%s: %s is not under root %s: refused (locks and temporary files "
                        "are created inside the root only)" % (what, folder, root))
    step = base
    for name in os.path.relpath(full, base).split("/"):
        if name in ("", "."):
            continue
        step = os.path.join(step, name)
        if os.path.islink(step) and not inside_root(root, step):
            raise PathError(
                "%s: %s is a symbolic link to %s, out of root %s: refused (locks and "
                "temporary files are created inside the root only; make %s a folder of the "
                "tree or a link inside it)" % (what, step, os.readlink(step), root, step))
    if not inside_root(root, full):
        raise PathError("%s: %s resolves to %s, outside root %s: refused (locks and "
                        "temporary files are created inside the root only)"
                        % (what, folder, os.path.realpath(full), root))
    return folder


class LockError(Exception):
    """Another run holds the root's lock; the message names the holder."""


class RootLock(object):
    """``<root>/run/gpuhost-tuning.lock``, held with ``flock`` while a run changes the host.

    The holder writes ``pid host time what`` into it, so a second run names the first in
    its refusal. On release the file is removed (and ``<root>/run`` when this lock created
    it); a waiter that opened the removed file notices the inode changed and retries.
    """

    def __init__(self, root, what):
        self.root = root or "/"
        self.what = what
        self.path = host_path(self.root, LOCK_PATH)
        self.fd = None
        self.made_dir = False

    def acquire(self):
        import fcntl
        import socket
        import time
        import stat as stat_mod
        folder = os.path.dirname(self.path)
        folder_in_root(self.root, folder, "lock %s" % self.path)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
            self.made_dir = True
        for _attempt in range(20):
            # no link followed, no FIFO or device opened: the lock is a plain file of the tree
            try:
                kind = os.lstat(self.path).st_mode
            except OSError:
                kind = None
            if kind is not None and not stat_mod.S_ISREG(kind):
                self._undo_dir()
                raise LockError("%s is %s, not a regular file: refused (the lock is a plain "
                                "file; remove what is there)" % (
                                    self.path, "a symbolic link to %s" % os.readlink(self.path)
                                    if stat_mod.S_ISLNK(kind) else "a special file"))
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                             0o644)
            except OSError as exc:
                self._undo_dir()
                if exc.errno == errno.ELOOP:
                    raise LockError("%s is a symbolic link to %s: refused (the lock is a plain "
                                    "file; remove the link)" % (self.path,
                                                                os.readlink(self.path)))
                raise
            if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                self._undo_dir()
                raise LockError("%s is not a regular file: refused (the lock is a plain file; "
                                "remove what is there)" % self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (IOError, OSError):
                try:
                    holder = os.read(fd, 512).decode("utf-8", "replace").strip()
                finally:
                    os.close(fd)
                self._undo_dir()
                raise LockError(
                    "another gpuhost.tuning run is changing this host: %s is held by %s; wait "
                    "for it to finish (two runs at once would record a half-tuned state)"
                    % (LOCK_PATH if self.root == "/" else self.path, holder or "an unknown run"))
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, ("pid %d on %s since %s (%s)\n" % (
                os.getpid(), socket.gethostname(),
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), self.what)).encode("utf-8"))
            self.fd = fd
            return self
        raise LockError("could not take %s: it keeps being replaced" % self.path)

    def _undo_dir(self):
        if self.made_dir:
            try:
                os.rmdir(os.path.dirname(self.path))
            except OSError:
                pass
            self.made_dir = False

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None
        self._undo_dir()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
