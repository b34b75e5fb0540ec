# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Packing what the audit read into a tar.gz that audits the same elsewhere.

``capture(root, wanted)`` runs the audit while recording every path it opens, lists or
checks under ``root``, then packs them (symlinks as links, folders the audit listed with
their sub-folders and links, files read to their end) with :class:`CaptureBuilder`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gzip
import hashlib
import io
import os
import stat
import tarfile
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs


class ReadRecorder(object):
    """Notes every path under ``root`` the readers open, list, check or read as a link
    while active (a context manager around :class:`hostfs.recording`: the readers go through
    ``hostfs``, which tells the active recorders what they touched).

    ``paths``: host path -> ``read`` (content used), ``list`` (names used) or ``stat``
    (existence/kind used). The audit itself never needs it; capture does.
    """

    _STRENGTH = {"stat": 0, "list": 1, "read": 2}

    def __init__(self, root):
        self.root = os.path.abspath(root or "/")
        self.paths = {}
        self._active = None

    def note(self, path, kind):
        try:
            path = os.fsdecode(path)
        except TypeError:
            return
        if not isinstance(path, str) or not path.startswith("/"):
            return
        path = os.path.normpath(path)
        if self.root != "/":
            if path != self.root and not path.startswith(self.root + "/"):
                return
            path = "/" + os.path.relpath(path, self.root) if path != self.root else "/"
        old = self.paths.get(path)
        if old is None or self._STRENGTH[kind] > self._STRENGTH[old]:
            self.paths[path] = kind

    def __enter__(self):
        self._active = hostfs.recording(self)
        self._active.__enter__()
        return self

    def __exit__(self, *exc):
        self._active.__exit__(*exc)
        self._active = None
        return False


# Files bigger than this are packed as a marker holding their size and SHA-256 (two markers
# are equal exactly when the files were: what the DKMS reader's byte comparison needs).
CAPTURE_MAX_FILE = 4 * 1024 * 1024
CAPTURE_PREFIXES = ("/sys/", "/proc/", "/etc/", "/lib/", "/lib64/", "/usr/lib/", "/usr/src/",
                    "/var/lib/dkms", "/boot", "/run/modprobe.d",
                    # Fabric Manager's package version and unit state (NVSwitch hosts only).
                    "/var/lib/dpkg/status", "/run/systemd/units",
                    # VMs' hookscripts on the default storage and which VMs run (passthrough).
                    "/var/lib/vz/snippets/", "/run/qemu-server/")
# Read wherever they are: the NVIDIA user-space library links in a container's root file
# system (a ZFS subvolume's mount point can be anything).
CAPTURE_NAMES = ("libcuda.so.1", "libnvidia-ml.so.1")
# ... and a container's own groups, which devN entries' gid= are checked against (devnodes).
CAPTURE_SUFFIXES = ("/etc/group",)
_READ_CHUNK = 65536


def _wanted_path(path):
    return any(path == p.rstrip("/") or path.startswith(p if p.endswith("/") else p + "/")
               or path == p for p in CAPTURE_PREFIXES) or \
        path.rsplit("/", 1)[-1] in CAPTURE_NAMES or path.endswith(CAPTURE_SUFFIXES)


class CaptureBuilder(object):
    """Collect entries (dirs, links, files) relative to ``root`` and write a tar.gz."""

    def __init__(self, root):
        self.root = os.path.abspath(root or "/")
        self.entries = {}
        self.skipped = []
        self.bytes = 0

    def _full(self, rel):
        return os.path.join(self.root, rel) if rel else self.root

    def _add_dir(self, rel, st):
        if rel and rel not in self.entries:
            self.entries[rel] = ("dir", st.st_mode & 0o7777, st.st_mtime, None)

    def _add_link(self, rel, st, target):
        self.entries[rel] = ("link", 0o777, st.st_mtime, target)

    def _add_file(self, rel, st, content):
        old = self.entries.get(rel)
        if old is not None and old[0] == "file" and old[3] is not None and content is None:
            return
        self.entries[rel] = ("file", st.st_mode & 0o7777, st.st_mtime, content)

    def _read(self, full, rel):
        """Read a file to its end (sysfs sizes lie: they say 4096 and hold less)."""
        chunks = []
        total = 0
        digest = hashlib.sha256()
        try:
            with io.open(full, "rb", buffering=0) as handle:
                while True:
                    chunk = handle.read(_READ_CHUNK)
                    if not chunk:
                        break
                    total += len(chunk)
                    digest.update(chunk)
                    if total <= CAPTURE_MAX_FILE:
                        chunks.append(chunk)
        except (IOError, OSError) as exc:
            self.skipped.append({"path": "/" + rel, "error": exc.strerror or str(exc)})
            return None
        if total > CAPTURE_MAX_FILE:
            return ("gpuhost-capture: file of %d bytes, sha256 %s\n"
                    % (total, digest.hexdigest())).encode()
        return b"".join(chunks)

    def add(self, path, kind):
        """Add host path ``path`` and every link and folder on the way to it."""

        def look(rel, last):
            full = self._full(rel)
            try:
                st = os.lstat(full)
            except OSError:
                return False
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(full)
                except OSError:
                    return False
                self._add_link(rel, st, target)
                return target
            if not last:
                if not stat.S_ISDIR(st.st_mode):
                    return False
                self._add_dir(rel, st)
            elif stat.S_ISDIR(st.st_mode):
                self._add_dir(rel, st)
                if kind == "list":
                    self._add_children(rel)
            elif stat.S_ISREG(st.st_mode):
                self._add_file(rel, st, self._read(full, rel) if kind == "read" else None)
            return None

        try:
            hostfs.walk_in_root(path, look)
        except hostfs.LinkLoop:
            pass

    def _add_children(self, rel):
        """Names of a listed folder: folders and links always (empty), plain files as empty
        placeholders outside /sys and /proc (there a missing attribute beats an empty one)."""
        full = self._full(rel)
        pseudo = rel.startswith(("sys/", "proc/")) or rel in ("sys", "proc")
        try:
            names = os.listdir(full)
        except OSError:
            return
        for name in names:
            child = rel + "/" + name
            try:
                st = os.lstat(os.path.join(full, name))
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                if child not in self.entries:
                    try:
                        self._add_link(child, st, os.readlink(os.path.join(full, name)))
                    except OSError:
                        pass
            elif stat.S_ISDIR(st.st_mode):
                self._add_dir(child, st)
            elif stat.S_ISREG(st.st_mode) and not pseudo:
                self._add_file(child, st, None)

    def add_content(self, path, data, mtime=None):
        """Add a file that is no host file (a command's output), with its folders."""
        rel = path.strip("/")
        parts = rel.split("/")
        now = time.time() if mtime is None else mtime
        for index in range(1, len(parts)):
            folder = "/".join(parts[:index])
            if folder not in self.entries:
                self.entries[folder] = ("dir", 0o755, now, None)
        self.entries[rel] = ("file", 0o644, now, data)

    def write(self, fileobj, manifest=None):
        """Write the tar.gz (entries sorted so parents come first) to ``fileobj``; the gzip
        header carries no time stamp, so the same tree packs to the same bytes."""
        with gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=0) as gz, tarfile.open(
                fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in sorted(self.entries):
                kind, mode, mtime, data = self.entries[rel]
                info = tarfile.TarInfo(rel)
                info.mode = mode
                info.mtime = int(mtime)
                info.uname = info.gname = "root"
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    info.mode = mode | 0o700
                    tar.addfile(info)
                elif kind == "link":
                    info.type = tarfile.SYMTYPE
                    info.linkname = data
                    tar.addfile(info)
                else:
                    data = data or b""
                    info.size = len(data)
                    info.mode = mode | 0o600
                    self.bytes += len(data)
                    tar.addfile(info, io.BytesIO(data))
            if manifest is not None:
                data = manifest.encode("utf-8")
                info = tarfile.TarInfo(".gpuhost-capture.json")
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))


def capture(root, wanted=None, runner=None):
    """Audit ``root`` while recording reads; return ``(builder, audit_result, recorded)``.
    The command outputs the audit used (``nvidia-smi -q -x``, the kernel log's XID lines)
    are packed under ``/.gpuhost-capture/``, where an offline audit reads them."""
    recorder = ReadRecorder(root)
    outputs = cmdout.CommandOutputs(root, runner)
    result = audit.audit(root, wanted, recorder=recorder, outputs=outputs)
    builder = CaptureBuilder(root)
    recorded = dict((p, k) for p, k in recorder.paths.items() if _wanted_path(p))
    for path in sorted(recorded):
        builder.add(path, recorded[path])
    for path, data in sorted(outputs.captured().items()):
        builder.add_content(path, data)
    return builder, result, recorded
