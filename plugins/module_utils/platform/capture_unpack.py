# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A capture tarball (``host_capture``) unpacked for an offline audit, safely.

``tar -x`` recreates what a tarball describes: FIFOs (a reader then blocks forever), device
nodes, hard links to files outside the folder, links and names that lead out of it. A
capture holds folders, plain files and symlinks only, so ``check`` refuses everything else
and every name or link that leaves the tree, naming each member, before anything is
written; ``unpack`` then writes the members itself (no tarfile extraction): files created
new (``O_EXCL``, ``O_NOFOLLOW``), no set-id bits, links last.

Nothing is read whole before it is bounded: tarfile reads a GNU long name or link (``L``,
``K``) and a pax header (``x``, ``g``) whole before the member it describes is known, so
every read tarfile makes of the decompressed stream goes through ``_BoundedStream``, which
refuses one over MAX_HEADER_BYTES naming the header and its offset (a 3 MB ``.tar.gz``
whose long name claimed 700 MiB was a MemoryError).

An absolute link target means "from the host's root" in a host tree (the readers resolve it
inside the root, ``hostfs.walk_in_root``); it is written as the relative link that means the
same inside the folder, so nothing outside it is reached whoever follows it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bz2
import gzip
import io
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import zlib

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import create_temp

# A capture packs files over 4 MiB as a marker (capture.CAPTURE_MAX_FILE) and is a few MB
# in all; these bound what a damaged or hostile tarball can make us decompress and write.
MAX_MEMBERS = 200000
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
MAX_NAMED = 20
_LINK_HOPS = 40
# The most bytes tarfile may read at once from the decompressed stream: a GNU long name or
# link, or a pax header, is read whole (a path is at most 4 KiB; the pax headers of
# host_capture's PAX_FORMAT hold a long name and a link target), and _write reads a member's
# content in chunks of this size.
MAX_HEADER_BYTES = 1024 * 1024
_BLOCK = 512
_HEADER_KINDS = {b"L": "a GNU long name", b"K": "a GNU long link name",
                 b"x": "a pax extended header", b"X": "a pax extended header",
                 b"g": "a pax global header"}
# what a damaged stream raises besides tarfile's own errors (gzip's BadGzipFile is an OSError)
_DAMAGED = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)


class UnpackError(ValueError):
    """The tarball cannot be unpacked safely; the message names each refused member."""


def _name(member):
    name = member.name
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/")


def _kind(member):
    if member.isdir():
        return "dir"
    if member.issym():
        return "link"
    if member.isreg():
        return "file"
    if member.islnk():
        return "a hard link to %s" % member.linkname
    if member.ischr():
        return "a character device node"
    if member.isblk():
        return "a block device node"
    if member.isfifo():
        return "a FIFO"
    return "not a file, folder or symlink (tar type %r)" % member.type


def _escapes(kinds, name, target):
    """True when link ``name`` -> ``target`` (``target`` relative, or absolute from the
    tree's root), followed the way the kernel does through the links of the archive
    (``kinds``: name -> (kind, link target)), climbs above the tree."""
    done = name.split("/")[:-1]
    pending = [p for p in target.split("/") if p]
    if target.startswith("/"):
        done = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            if not done:
                return True
            done.pop()
            continue
        here = "/".join(done + [part])
        entry = kinds.get(here)
        if entry is not None and entry[0] == "link":
            hops += 1
            if hops > _LINK_HOPS:
                return False  # the kernel stops there too (ELOOP): it never leads anywhere
            if entry[1].startswith("/"):
                done = []
            pending = [p for p in entry[1].split("/") if p] + pending
        else:
            done.append(part)
    return False


def check(tar):
    """The members of open TarFile ``tar`` that may be written, in order; UnpackError naming
    every refused one (up to MAX_NAMED) when there is any."""
    refused = []
    members = []
    kinds = {}
    total = 0
    for member in tar:
        if len(members) >= MAX_MEMBERS:
            raise UnpackError("more than %d members: not a capture (refused before anything "
                              "was written)" % MAX_MEMBERS)
        name = _name(member)
        parts = name.split("/")
        kind = _kind(member)
        if member.name.startswith("/"):
            refused.append("%s: an absolute name" % member.name)
        elif ".." in parts:
            refused.append("%s: a name with .. (it leads out of the folder)" % member.name)
        elif kind not in ("dir", "link", "file"):
            refused.append("%s: %s" % (member.name, kind))
        elif name in ("", "."):
            continue  # the folder itself
        elif name in kinds:
            refused.append("%s: a second member of that name" % member.name)
        elif member.isreg() and member.size > MAX_MEMBER_BYTES:
            refused.append("%s: %d bytes, over the %d MiB a capture member can be"
                           % (member.name, member.size, MAX_MEMBER_BYTES // (1024 * 1024)))
        else:
            total += member.size if member.isreg() else 0
            if total > MAX_TOTAL_BYTES:
                raise UnpackError("over %d MiB of content: not a capture (refused before "
                                  "anything was written)" % (MAX_TOTAL_BYTES // (1024 * 1024)))
            kinds[name] = (kind, member.linkname if kind == "link" else None)
            members.append((name, member))
    for name, member in members:
        parents = name.split("/")[:-1]
        for depth in range(1, len(parents) + 1):
            above = "/".join(parents[:depth])
            if kinds.get(above, ("dir",))[0] != "dir":
                refused.append("%s: inside %s, which is a %s, not a folder"
                               % (member.name, above, kinds[above][0]))
                break
        if member.issym() and _escapes(kinds, name, member.linkname):
            refused.append("%s: a symbolic link to %s, which leads out of the folder"
                           % (member.name, member.linkname))
    if refused:
        more = len(refused) - MAX_NAMED
        raise UnpackError(
            "refused %d member%s, nothing was written: %s%s (a capture holds folders, plain "
            "files and links inside the tree only; make a new one with playbook "
            "gpuhost.tuning.capture)" % (
                len(refused), "" if len(refused) == 1 else "s", "; ".join(refused[:MAX_NAMED]),
                "; and %d more" % more if more > 0 else ""))
    return members


def _relink(name, target):
    """An absolute link target as the relative one that means the same inside the tree."""
    if not target.startswith("/"):
        return target
    target = posixpath.normpath(target)
    return posixpath.relpath(target.lstrip("/") or ".", posixpath.dirname(name) or ".")


class _BoundedStream(io.RawIOBase):
    """The decompressed tar stream as tarfile reads it: a read of more than
    MAX_HEADER_BYTES at once (a long name, long link or pax header claiming more: tarfile
    would read it whole) raises UnpackError naming the header, before anything is read."""

    def __init__(self, stream, path):
        io.RawIOBase.__init__(self)
        self._stream = stream
        self._path = path
        self._kind = b""
        self.name = path

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=os.SEEK_SET):
        return self._stream.seek(offset, whence)

    def tell(self):
        return self._stream.tell()

    def read(self, size=-1):
        if size is None or size < 0 or size > MAX_HEADER_BYTES:
            raise UnpackError(
                "capture %s: %s at byte %d of the tar stream claims %s, over the %d KiB a "
                "header can be: refused before reading it, nothing was written (a capture "
                "names short paths; make a new one with playbook gpuhost.tuning.capture)" % (
                    self._path, _HEADER_KINDS.get(self._kind, "a member header"),
                    self._stream.tell() - _BLOCK, "the rest of the stream" if size is None
                    or size < 0 else "%d bytes" % size, MAX_HEADER_BYTES // 1024))
        data = self._stream.read(size)
        if size == _BLOCK and len(data) == _BLOCK:
            self._kind = data[156:157]  # a header's type flag: what a long read would be
        return data

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        if not self.closed:
            self._stream.close()
        io.RawIOBase.close(self)


def _decompressed(handle):
    """The tar stream of file object ``handle``: gzip (host_capture's), bzip2, xz or none,
    told by the first bytes as tarfile's ``r:*`` tells them."""
    magic = handle.read(6)
    handle.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=handle, mode="rb")
    if magic[:3] == b"BZh":
        return bz2.BZ2File(handle)
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(handle)
    return handle


def open_tarball(path):
    """Open the capture at ``path``: a regular file (never a FIFO or a device: opening one
    would block or read without end); UnpackError otherwise. Its tar stream is read through
    ``_BoundedStream``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) |
                     getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnpackError("capture %s: %s" % (path, exc.strerror or exc))
    handle = os.fdopen(fd, "rb")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnpackError("capture %s is not a regular file: give the tarball that "
                              "playbook gpuhost.tuning.capture wrote" % path)
        return tarfile.open(fileobj=_BoundedStream(_decompressed(handle), path), mode="r:")
    except UnpackError:
        handle.close()
        raise
    except _DAMAGED + (ValueError,) as exc:
        handle.close()
        raise UnpackError("capture %s is not a tarball (%s): give the .tar.gz that playbook "
                          "gpuhost.tuning.capture wrote" % (path, exc))


def unpack(path, dest=None):
    """Unpack capture ``path`` into ``dest``, a new folder (default: a new private folder
    under the temporary directory, ``<tmp>/gpuhost-capture-*/root``, which the caller
    removes with its parent); returns ``(dest, members written)``. Every member is checked
    before the first one is written, so a refused tarball writes nothing; a failure while
    writing removes what was written."""
    with open_tarball(path) as tar:
        try:
            members = check(tar)
        except UnpackError:
            raise
        except _DAMAGED + (ValueError,) as exc:  # ValueError: a pax number of 5,000 digits
            raise UnpackError("capture %s is damaged (%s): nothing was written" % (path, exc))
        made = None
        if dest is None:
            made = tempfile.mkdtemp(prefix="gpuhost-capture-")
            dest = os.path.join(made, "root")
        try:
            os.mkdir(dest, 0o700)
            try:
                _write(tar, members, dest)
            except BaseException:
                shutil.rmtree(dest, ignore_errors=True)
                raise
        except BaseException as exc:
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
            if isinstance(exc, _DAMAGED) and not isinstance(exc, UnpackError):
                raise UnpackError("capture %s could not be unpacked into %s (%s): what was "
                                  "written is removed" % (path, dest, exc))
            raise
    return dest, len(members)


def remove_scratch(dest):
    """Remove a folder ``unpack`` made under the temporary directory (and its parent)."""
    shutil.rmtree(os.path.dirname(dest), ignore_errors=True)


def _write(tar, members, dest):
    dirs = []
    links = []
    for name, member in members:
        full = os.path.join(dest, name)
        parent = os.path.dirname(full)
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        if member.isdir():
            if not os.path.isdir(full):
                os.mkdir(full, 0o700)
            dirs.append((full, member))
        elif member.issym():
            links.append((full, _relink(name, member.linkname)))
        else:
            source = tar.extractfile(member)
            # created new, never through what is there (hostfs' create_temp, the name itself)
            fd, _full = create_temp(parent, os.path.basename(full),
                                    (member.mode & 0o777) | 0o600, unique=False)
            with os.fdopen(fd, "wb") as handle:
                left = member.size
                while left > 0:
                    chunk = source.read(min(left, MAX_HEADER_BYTES))
                    if not chunk:
                        break
                    handle.write(chunk)
                    left -= len(chunk)
            os.utime(full, (member.mtime, member.mtime))
    for full, target in links:
        os.symlink(target, full)
    for full, member in reversed(dirs):
        os.chmod(full, (member.mode & 0o777) | 0o700)
        os.utime(full, (member.mtime, member.mtime))
