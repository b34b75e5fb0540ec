# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What staging an NVIDIA driver (driver_stage.py) reads and writes besides the commands it
runs: apt's and df's output parsed, the ``.run``'s makeself header checked without running
it, the folder staged files are kept in for a back-out, and bounded, atomic file copies.

Every file staging writes is created new (``hostfs.create_temp``: ``O_CREAT|O_EXCL|
O_NOFOLLOW`` under a fresh name, a folder by an exclusive ``mkdir``) and renamed into place,
so a link, FIFO or file planted at a temporary name is never followed, truncated or removed
through. Every file it copies is opened by ``hostfs.open_source``: never through a link as
its last name, never waiting on a FIFO, a regular file or skipped with a warning naming it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_state import (
    upstream_version,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path

# The makeself header of NVIDIA's .run (NVIDIA-Linux-x86_64-590.48.01.run) carries
# label="NVIDIA Accelerated Graphics Driver for Linux-x86_64 590.48.01".
RUN_LABEL = re.compile(r'^label="NVIDIA Accelerated Graphics Driver for Linux-'
                       r'(?P<arch>[A-Za-z0-9_]+) (?P<version>[0-9.]+)"\s*$', re.M)
RUN_HEADER_BYTES = 64 * 1024
KEEP_DIR = "/var/lib/gpuhost-tuning/driver"


class StageError(Exception):
    """Staging refused or failed; ``details`` go into the task's result."""

    def __init__(self, msg, **details):
        super(StageError, self).__init__(msg)
        self.details = details


def parse_madison(text):
    """``apt-cache madison`` lines -> ``{package: [versions, as listed]}``."""
    found = {}
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 3 and parts[0] and parts[1]:
            versions = found.setdefault(parts[0], [])
            if parts[1] not in versions:
                versions.append(parts[1])
    return found


def pick_versions(madison, packages, version):
    """For each package the candidate whose upstream part is ``version`` (the first listed,
    apt's preference order), under its own name only. Returns ``(chosen {pkg: debver},
    missing [messages])``."""
    chosen, _renamed, missing = pick_schemes(madison, dict((p, [p]) for p in packages),
                                             version)
    return chosen, missing


def pick_schemes(madison, names, version):
    """``names``: ``{installed package: [names it may have at version]}``
    (``driver_records.scheme_names``: itself first, then the other naming schemes). For
    each, the first name whose candidates list ``version`` (apt's repository list decides
    which scheme the target is in: NVIDIA's repository has libnvidia-compute at 590.48.01,
    none of libnvidia-compute-580). Returns ``(chosen {name: debver}, renamed {installed:
    new name}, missing [messages])``."""
    chosen, renamed, missing = {}, {}, []
    for installed in sorted(names):
        tried = names[installed] or [installed]
        for name in tried:
            match = [v for v in madison.get(name, []) if upstream_version(v) == version]
            if match:
                chosen[name] = match[0]
                if name != installed:
                    renamed[installed] = name
                break
        else:
            listed = madison.get(installed, [])
            have = sorted({upstream_version(v) or v for v in listed})
            others = [n for n in tried if n != installed]
            missing.append("%s %s (apt knows %s%s)" % (
                installed, version, ", ".join(have) if have else "no version",
                "; nor %s at it" % " or ".join(others) if others else ""))
    return chosen, renamed, missing


def removed(renamed):
    """apt-get's ``package-`` arguments (remove in the same transaction) for the installed
    names a renamed package replaces: libnvidia-compute-580 goes as libnvidia-compute comes
    in, whether or not the new package declares the conflict."""
    return ["%s-" % old for old in sorted(renamed)]


def parse_show_sizes(text):
    """Sum of ``Installed-Size`` (KiB) and ``Size`` (bytes, as KiB) over ``apt-cache show``
    stanzas."""
    total = 0
    for line in (text or "").splitlines():
        if line.startswith("Installed-Size:"):
            total += bounded.int_of(line.split(":", 1)[1], 0)
        elif line.startswith("Size:"):
            total += (bounded.int_of(line.split(":", 1)[1], 0) + 1023) // 1024
    return total


def parse_df_free(text):
    """Free KiB from ``df -Pk /`` (POSIX format: the 4th field of the last line)."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if len(lines) < 2:
        return None
    fields = lines[-1].split()
    return bounded.int_of(fields[3]) if len(fields) > 3 else None


def run_header(root, path, version):
    """Check that ``path`` (under root) is NVIDIA's ``.run`` for ``version`` by its
    makeself header, never by running it. Returns ``{arch, version, size}``; raises
    StageError naming what it is instead."""
    full = host_path(root, path)
    if not hostfs.isfile(full):
        raise StageError("run_file %s does not exist on the host (copy the .run there "
                         "first)" % path)
    with hostfs.open_read(full, "rb") as handle:
        data = handle.read(RUN_HEADER_BYTES)
    text = data.decode("latin-1")
    if not text.startswith("#!/bin/sh") or "Makeself" not in text:
        raise StageError("%s is not an NVIDIA .run installer: no makeself header (it starts "
                         "with %r)" % (path, text[:40]))
    match = RUN_LABEL.search(text)
    if not match:
        raise StageError("%s is a makeself archive but not NVIDIA's driver installer (no "
                         "label \"NVIDIA Accelerated Graphics Driver for Linux-<arch> "
                         "<version>\")" % path)
    if match.group("version") != version:
        raise StageError("%s installs NVIDIA %s, not the target %s" % (
            path, match.group("version"), version))
    return {"arch": match.group("arch"), "version": match.group("version"),
            "size": hostfs.getsize(full)}


def kept_run(version, arch="x86_64"):
    """Where a staged ``.run`` is kept on the host for a later back-out."""
    return "%s/NVIDIA-Linux-%s-%s.run" % (KEEP_DIR, arch, version)


def last_lines(text, count=3):
    """The last lines of a command's output, and before them the lines that say why
    (dpkg's ``cannot copy extracted data ... (No space left on device)``)."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    why = [ln for ln in lines[:-count] if "No space left" in ln or ln.startswith("E: ")]
    return " / ".join(why[-2:] + lines[-count:]) or "(no output)"


def same_file(one, two):
    """Byte-equal, compared in bounded chunks (each opened by ``hostfs.open_source``)."""
    with os.fdopen(hostfs.open_source(one)[0], "rb") as a, \
            os.fdopen(hostfs.open_source(two)[0], "rb") as b:
        while True:
            x, y = a.read(1 << 20), b.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def keep_folder(root, folder):
    """Make ``folder`` (a host path under ``root``) for kept files; neither the part that
    exists nor what is made may lead out of the root."""
    existing = folder
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    # the part that exists must not lead out of the root before anything is created below it
    hostfs.folder_in_root(root, existing, "the keep folder %s" % folder)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    hostfs.folder_in_root(root, folder, "the keep folder %s" % folder)


def copy_atomic(root, source, dest, mode=0o700):
    """Copy a (large) file into ``dest`` atomically: a new temporary file beside it
    (``hostfs.create_temp``), renamed over ``dest``. ``source`` is opened by ``open_source``
    (hostfs.NotRegularFile when it is no regular file: nothing is written)."""
    folder = os.path.dirname(dest)
    keep_folder(root, folder)
    src, _st = hostfs.open_source(source)
    try:
        fd, tmp = hostfs.create_temp(folder, os.path.basename(dest), 0o600, root=root)
        try:
            with os.fdopen(fd, "wb") as out:
                hostfs.copy_fd(src, out)
                out.flush()
                os.fsync(out.fileno())
                os.fchmod(out.fileno(), mode)
            os.rename(tmp, dest)
        except BaseException:
            _unlink(tmp)
            raise
    finally:
        os.close(src)


def kept_build(name, version):
    """Where the previous version's DKMS build (per kernel) and source are kept."""
    return "%s/dkms/%s/%s" % (KEEP_DIR, name, version)


def copy_tree(root, source, dest, warnings=None):
    """Copy folder ``source`` to ``dest`` (both under ``root``; nothing may be at dest):
    files and symlinks as they are, into a new temporary folder beside ``dest``
    (``hostfs.create_temp``: a fresh name, never one planted there) renamed into place, so
    a half copy never stands at ``dest``. A source entry that is no regular file, link or
    folder (a FIFO) is left out, a warning naming it added to ``warnings``."""
    folder = os.path.dirname(dest)
    keep_folder(root, folder)
    real = hostfs.realpath(source)
    if not os.path.isdir(real) or os.path.islink(real):
        raise StageError("%s is not a folder inside root %s: not copied to %s" % (
            source, root, dest))
    if os.path.lexists(dest):
        raise StageError("%s already exists: not copied over (remove it, or move it aside, "
                         "and run again)" % dest)
    _none, tmp = hostfs.create_temp(folder, os.path.basename(dest), 0o755, root=root,
                                    directory=True)
    try:
        for top, dirs, files in os.walk(real):
            rel = os.path.relpath(top, real)
            out = os.path.normpath(os.path.join(tmp, rel))
            if rel != ".":
                os.mkdir(out, 0o755)
            for name in list(dirs):
                if os.path.islink(os.path.join(top, name)):
                    dirs.remove(name)
                    files.append(name)
            for name in files:
                _copy_entry(os.path.join(top, name), out, name, warnings)
        os.rename(tmp, dest)
    except BaseException:
        _remove_tree(tmp)
        raise


def _copy_entry(src, out, name, warnings):
    """One entry of copy_tree: a link as a link, a regular file as a new file of its mode."""
    if os.path.islink(src):
        os.symlink(os.readlink(src), os.path.join(out, name))
        return
    try:
        fd, st = hostfs.open_source(src)
    except hostfs.NotRegularFile as exc:
        if warnings is not None:
            warnings.append(str(exc))
        return
    try:
        dest_fd, _path = hostfs.create_temp(out, name, 0o600, unique=False)
        with os.fdopen(dest_fd, "wb") as handle:
            hostfs.copy_fd(fd, handle)
            os.fchmod(handle.fileno(), st.st_mode & 0o7777)
    finally:
        os.close(fd)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_tree(path):
    """Remove a folder this module created (a temporary copy): links are removed as links,
    never followed (os.walk does not enter a linked folder)."""
    for folder, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(folder, name))
        for name in dirs:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                os.unlink(full)
            else:
                os.rmdir(full)
    os.rmdir(path)


def keep_build(root, name, version, kernels, check_mode=False, warnings=None):
    """Keep ``name``/``version``'s DKMS build for each of ``kernels`` (its
    /var/lib/dkms/<name>/<version>/<kernel> folder) and its source (/usr/src/<name>-
    <version>) under kept_build(), before an install whose package scripts remove them
    (Debian's prerm runs ``dkms remove --all``; NVIDIA's installer uninstalls the previous
    driver). A back-out to that version then needs no build. Returns the kernels newly
    kept (in check mode: that would be)."""
    keep = host_path(root, kept_build(name, version))
    tree = host_path(root, "/var/lib/dkms/%s/%s" % (name, version))
    done = []
    for kernel in kernels:
        built = os.path.join(tree, kernel)
        if not hostfs.isdir(built) or os.path.isdir(os.path.join(keep, kernel)):
            continue
        done.append(kernel)
        if not check_mode:
            copy_tree(root, built, os.path.join(keep, kernel), warnings)
    source = host_path(root, "/usr/src/%s-%s" % (name, version))
    if done and not check_mode and not os.path.isdir(os.path.join(keep, "source")) \
            and hostfs.isfile(os.path.join(source, "dkms.conf")):
        copy_tree(root, source, os.path.join(keep, "source"), warnings)
    return done


def restore_build(root, name, version, kernels, warnings=None):
    """Put a kept build back (keep_build): the source when /usr/src lacks it, and each
    kernel's built folder dkms does not have, so dkms sees the version built and only
    installs it. Returns the kernels put back."""
    keep = host_path(root, kept_build(name, version))
    if not os.path.isdir(keep):
        return []
    source = host_path(root, "/usr/src/%s-%s" % (name, version))
    if not hostfs.isfile(os.path.join(source, "dkms.conf")) and \
            os.path.isdir(os.path.join(keep, "source")) and not os.path.lexists(source):
        copy_tree(root, os.path.join(keep, "source"), source, warnings)
    done = []
    tree = host_path(root, "/var/lib/dkms/%s/%s" % (name, version))
    for kernel in kernels:
        if os.path.isdir(os.path.join(keep, kernel)) and \
                not os.path.lexists(os.path.join(tree, kernel)):
            copy_tree(root, os.path.join(keep, kernel), os.path.join(tree, kernel), warnings)
            done.append(kernel)
    return done


ARCHIVES = "/var/cache/apt/archives"
# apt-get's install of the driver's packages, on the host and in a container alike: a
# back-out is a downgrade, nothing recommended comes along, changed config files are kept.
APT_INSTALL = ["install", "-y", "--allow-downgrades", "--no-install-recommends",
               "-o", "Dpkg::Options::=--force-confold"]


def pinned(packages):
    """``{package: debver}`` -> apt's ``package=debver`` arguments in name order; one
    without a version is left out."""
    return ["%s=%s" % (n, v) for n, v in sorted(packages.items()) if v]


def deb_names(folder, package, debver):
    """``<package>_<version>_<arch>.deb`` in ``folder`` (apt writes an epoch's ``:`` as
    ``%3a``)."""
    want = "%s_%s_" % (package, debver.replace(":", "%3a"))
    try:
        names = hostfs.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if n.startswith(want) and n.endswith(".deb"))


def deb_file(package, debver, arch):
    """The name apt gives a downloaded ``.deb`` in its cache."""
    return "%s_%s_%s.deb" % (package, debver.replace(":", "%3a"), arch)


def kept_ct_debs(vmid):
    """Where a container's previous packages' ``.deb`` files are kept on the host."""
    return "%s/containers/%s/debs" % (KEEP_DIR, vmid)


# What dpkg-query prints per package for the keep: its cache file's name parts and its
# Installed-Size (KiB), which bounds the size of a pulled .deb (deb_cap).
QUERY_FORMAT = "${Package} ${Version} ${Architecture} ${Installed-Size}\n"
# A .deb is its files compressed plus tar's and ar's headers: never twice the installed
# size and a MiB. That figure comes from the container's own dpkg status, a tenant's file
# (``Installed-Size: 1099511627776`` asked for 2 PiB): it is never more than
# DEB_CAP_CEILING, which is also the cap of a package whose status has no Installed-Size.
# The ceiling, from data: Debian 12 non-free's 216 NVIDIA packages (2026-12-02) are at most
# 45,004,248 bytes (nvidia-kernel-source 535.261.03-1), the driver's user-space .debs (libcuda1,
# libnvidia-ml1, nvidia-smi, ...) a few MB each; 512 MiB is over ten times the largest, room
# for a later driver's growth, and still a bounded cost to the host's disk per package.
DEB_CAP_SLACK = 1024 * 1024
DEB_CAP_CEILING = 512 * 1024 * 1024
DEB_CAP_UNKNOWN = DEB_CAP_CEILING
# Free space a pull leaves on the filesystem of the host's keep folder, whatever the cap
# says: the host's root filesystem also holds /var/log, apt's cache and the DKMS builds.
HOST_FREE_MARGIN = 1024 * 1024 * 1024


def deb_cap(installed_kib):
    """The most bytes a pulled ``.deb`` of that Installed-Size (KiB, or None) may have:
    twice that and a MiB, never over DEB_CAP_CEILING."""
    if installed_kib is None:
        return DEB_CAP_UNKNOWN
    return min(2 * 1024 * installed_kib + DEB_CAP_SLACK, DEB_CAP_CEILING)


def free_bytes(folder):
    """Bytes free to an unprivileged writer on the filesystem of ``folder`` (statvfs: the
    host's own figure, never a tenant's)."""
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def pull_cap(folder, cap):
    """The most bytes one pull into ``folder`` may write: ``cap`` (deb_cap), and never more
    than the filesystem's free space less HOST_FREE_MARGIN (0: no room, do not pull)."""
    return max(0, min(cap, free_bytes(folder) - HOST_FREE_MARGIN))


def parse_query_files(text, packages):
    """``dpkg-query -W -f QUERY_FORMAT`` lines -> ``{cache file name: most bytes}`` for
    those of ``{package: debver}`` installed at that version (the container's figures read
    bounded: a number of more than 20 digits, or not ASCII digits, counts as none)."""
    out = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) in (3, 4) and packages.get(fields[0]) == fields[1]:
            size = bounded.int_of(fields[3]) if len(fields) == 4 else None
            if size is not None and size < 0:
                size = None
            out[deb_file(*fields[:3])] = deb_cap(size)
    return out


def keep_part(part, dest, ok=True):
    """A file pulled to ``part`` becomes ``dest`` when ``ok`` and it is a ``.deb`` (an ar
    archive, read by ``open_source``: a regular file); otherwise it is removed (a link
    itself, never what it leads to). Returns whether it was kept."""
    good = False
    if ok:
        try:
            fd, _st = hostfs.open_source(part)
        except OSError:
            fd = None
        if fd is not None:
            with os.fdopen(fd, "rb") as handle:
                good = handle.read(8) == b"!<arch>\n"
    if good:
        os.rename(part, dest)
    elif os.path.lexists(part):
        os.unlink(part)
    return good


def keep_debs(root, packages, check_mode=False, warnings=None):
    """Copy the installed ``{package: debver}``'s .debs from apt's cache into
    KEEP_DIR/debs (apt may clean its cache; the back-out then needs no download).
    A cached name that is no regular file (a link, a FIFO) is not kept, a warning naming
    it added to ``warnings``. Returns the file names newly kept."""
    cache = host_path(root, ARCHIVES)
    keep = host_path(root, KEEP_DIR + "/debs")
    return _copy_debs(root, packages, cache, keep, check_mode, warnings, "not kept")


def _copy_debs(root, packages, source, dest, check_mode, warnings, what, only_missing=False):
    done = []
    for package, debver in sorted(packages.items()):
        if only_missing and deb_names(dest, package, debver or ""):
            continue
        for name in deb_names(source, package, debver or ""):
            if os.path.isfile(os.path.join(dest, name)):
                continue
            path = os.path.join(source, name)
            try:
                why = hostfs.source_problem(path)
            except FileNotFoundError:
                continue  # gone since it was listed
            if why is None and not check_mode:
                try:
                    copy_atomic(root, path, os.path.join(dest, name), 0o644)
                except hostfs.NotRegularFile as exc:  # replaced since it was looked at
                    why = str(exc)
            if why is not None:
                if warnings is not None:
                    warnings.append(why if why.startswith(path) else
                                    hostfs.source_refused(path, why, what))
                continue
            done.append(name)
    return done


def unkeep_debs(root, packages, warnings=None):
    """Put kept .debs (keep_debs) of ``{package: debver}`` back into apt's cache where it
    lacks them, so apt installs them without a download. A kept name that is no regular
    file is left out, with a warning. Returns the names put back."""
    cache = host_path(root, ARCHIVES)
    keep = host_path(root, KEEP_DIR + "/debs")
    return _copy_debs(root, packages, keep, cache, False, warnings, "not put back",
                      only_missing=True)
