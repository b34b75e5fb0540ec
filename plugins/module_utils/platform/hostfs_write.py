# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host file writes under a root: kernel interface files in place, every other file
atomically (temporary file, fsync, rename) with its mode and owner kept; every file or
folder a writer stages into created new (``create_temp``); the files a writer copies opened
without following a link or waiting on a FIFO (``open_source``); the diff of a change.
Imported through ``hostfs``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import errno
import os
import stat as _stat

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs_base import (
    _complete,
    _FLAGS,
    HostFileError,
    _kind,
    _NOFOLLOW,
    NotRegularFile,
    _refuse,
    _resolved,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs_root import (
    folder_in_root,
)


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
    # no chmod/chown allowed (pmxcfs): the temp file is created with the old file's mode (or
    # ``mode``) so a plain filesystem keeps it too; the umask still applies
    create_mode = 0o600 if chmod else (old.st_mode & 0o777) if old is not None else (
        mode or 0o644)
    fd, tmp = create_temp(folder, os.path.basename(path), create_mode)
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


# O_CLOEXEC: a command the writer runs meanwhile does not inherit the file
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def create_temp(folder, name, mode=0o600, root=None, directory=False, unique=True):
    """The one way a writer creates a file or folder to stage into: a temporary file
    renamed over its target, a kept copy, a pulled ``.part``, a folder copied into place.

    Created new in ``folder``, never through what is there: a file with
    ``O_CREAT|O_EXCL|O_NOFOLLOW`` (a link, FIFO or file planted at the name is never
    opened, followed, truncated or removed), a folder with an exclusive ``mkdir``. With
    ``unique`` (the default) the name is fresh, ``.<name>.<pid>.<random>.tmp``, so a
    stale or planted temporary name is left alone; ``unique=False`` creates ``name``
    itself (EEXIST when anything is there). With ``root`` (other than ``/``) ``folder``
    must resolve inside it (``folder_in_root``: PathError naming a link out of the root).

    Returns ``(fd, path)``: ``fd`` open for writing (the caller closes it), None for a
    folder."""
    if root is not None:
        folder_in_root(root, folder, "the folder of %s" % os.path.join(folder, name))
    for _attempt in range(100 if unique else 1):
        if unique:
            path = os.path.join(folder, ".%s.%d.%s.tmp" % (
                name, os.getpid(), binascii.hexlify(os.urandom(4)).decode("ascii")))
        else:
            path = os.path.join(folder, name)
        try:
            if directory:
                os.mkdir(path, mode)
                return None, path
            return os.open(path, _CREATE, mode), path
        except OSError as exc:
            if exc.errno != errno.EEXIST or not unique:
                raise type(exc)(exc.errno, exc.strerror, path)
    raise OSError(errno.EEXIST, "no free temporary name in %s" % folder, folder)


def source_problem(path):
    """Why ``path`` is no file a writer copies (its folders resolved inside its root, its
    last name not followed): ``"a symbolic link to X"``, ``"a FIFO"``, ``"a folder"``, or
    None for a regular file. A missing path raises OSError."""
    real = _resolved(path, follow=False)[0]
    st = os.lstat(real)
    if _stat.S_ISREG(st.st_mode):
        return None
    if _stat.S_ISLNK(st.st_mode):
        return "a symbolic link to %s" % os.readlink(real)
    return "a folder" if _stat.S_ISDIR(st.st_mode) else _kind(st.st_mode)


def source_refused(path, why, what="not copied"):
    """The words for a source file a writer leaves alone (a warning, or NotRegularFile's):
    ``<path>: <why>, not a regular file: <what> (...)``, as the readers word a file they
    do not read."""
    return "%s: %s" % (path, _refusal(why, what))


def _refusal(why, what):
    return ("%s, not a regular file: %s (copies are made of regular files only, never "
            "through a link or from a FIFO; put the file itself there or remove it)"
            % (why, what))


def open_source(path):
    """``(fd, stat)`` of ``path`` opened to be copied: its folders resolved inside its root,
    the file itself never followed (``O_NOFOLLOW``), never waited on (``O_NONBLOCK``: a FIFO
    answers at once; a device is never opened, lstat tells first) and a regular file by
    ``fstat``; anything else NotRegularFile in ``source_refused``'s words. The caller
    closes ``fd``."""
    why = source_problem(path)
    fd = None
    if why is None:
        try:
            fd = os.open(_resolved(path, follow=False)[0], _FLAGS | _NOFOLLOW)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO):  # a link, a socket put there since
                raise type(exc)(exc.errno, exc.strerror, path)
            why = "a symbolic link or socket"
    if fd is not None:
        st = os.fstat(fd)
        if _stat.S_ISREG(st.st_mode):
            return fd, st
        os.close(fd)
        why = _kind(st.st_mode)
    raise NotRegularFile(path, _refusal(why, "not copied"))


def copy_fd(fd, out):
    """The bytes of open file ``fd`` (``open_source``'s) into file object ``out``, 1 MiB at
    a time."""
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        out.write(chunk)


def unified_diff_dict(path, before, after):
    """The ``diff`` entry Ansible renders for a file change."""
    return {
        "before_header": path,
        "after_header": path,
        "before": before,
        "after": after,
    }
