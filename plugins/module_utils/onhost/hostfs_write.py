# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host file writes under a root: kernel interface files in place, every other file
atomically (temporary file, fsync, rename) with its mode and owner kept; the diff of a
change. Imported through ``hostfs``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat as _stat
import tempfile

from .hostfs_base import (
    _complete,
    _FLAGS,
    HostFileError,
    _NOFOLLOW,
    _refuse,
    _resolved,
)
from .hostfs_root import (
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
