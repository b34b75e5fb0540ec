# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the files of one root (a host's or a container's) say about its NVIDIA driver:
driver versions, dpkg's status, nvidia-installer's own records and the user-space
libraries the loader would load. Read-only, through hostfs (bounded, inside the root).

- dpkg's status: Debian's packages (maintainer ``Debian NVIDIA Maintainers``), NVIDIA's
  repository packages (maintainer ``NVIDIA <cudatools@nvidia.com>``, as a real H200
  machine's ``cuda-compat-13-0`` stanza shows); ``cuda-compat-*``, ``libxnvctrl0`` and the
  like are no driver packages;
- nvidia-installer (the ``.run``; NVIDIA/nvidia-installer's backup.c): its backup log
  ``/var/lib/nvidia/log``, first line ``1.0-<digits> (<version>)``, second the driver's
  description, then the files it installed (``.ko`` ones unless ``--no-kernel-module``);
  ``/usr/bin/nvidia-uninstall`` is its link to nvidia-installer;
- the libraries: ``libcuda.so.1`` (else ``libnvidia-ml.so.1``) in the first folder the
  loader searches (``/etc/ld.so.conf`` with its includes, then the default folders, then
  Debian's private ``nvidia/current`` behind update-alternatives), links followed inside
  the root; the version is the final file's (``libcuda.so.590.48.01``). CUDA's
  forward-compatibility folder (``/usr/local/cuda-*/compat``) counts only when the loader
  path lists it. ``nvidia_libraries`` lists every NVIDIA library carrying the driver
  version the same way, and ``driver_packages`` every driver package of dpkg's status:
  a root mixing versions (libcuda at 590.48.01, libnvidia-ml at 580.95.05) breaks
  ``nvidia-smi`` with a version mismatch.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

# NVIDIA's driver versions: 580.95.05, 535.183.01, 550.54.14, 390.157, 550.54
VERSION_RE = re.compile(r"^[0-9]{3}\.[0-9]{2,3}(\.[0-9]{2})?$")
VERSION_WANTED = ("an NVIDIA driver version NNN.NN.NN or NNN.NN such as 590.48.01 (a Debian "
                  "package version such as 590.48.01-1~deb12u1 without its revision)")

DPKG_STATUS = "/var/lib/dpkg/status"
RUN_LOG = "/var/lib/nvidia/log"             # nvidia-installer's BACKUP_LOG
RUN_UNINSTALL = "/usr/bin/nvidia-uninstall"  # the .run's link to nvidia-installer
NVIDIA_MAINTAINER = "@nvidia.com"           # NVIDIA <cudatools@nvidia.com>

# Packages of the kernel side (Debian, NVIDIA's Debian and Ubuntu repositories) and of the
# user space; cuda-compat-*, libxnvctrl0 (nvidia-settings) and the like are neither. Ubuntu's
# archive names carry the branch (libnvidia-compute-580, nvidia-dkms-580-open, and still
# nvidia-utils-595 there); NVIDIA's Ubuntu repository drops it from 590 on
# (libnvidia-compute, nvidia-dkms-open, nvidia-open: NVIDIA's driver installation guide,
# "Recent Updates", "Ubuntu 590 and later packages",
# https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/recent-updates.html),
# so each name is matched with and without ``-<branch>``.
_B = r"(-[0-9]{3})?"
KERNEL_PACKAGES = re.compile(
    r"^(nvidia-kernel-dkms|nvidia-open-kernel-dkms|nvidia-kernel-open-dkms|"
    r"nvidia-tesla-[0-9]+-kernel-dkms|nvidia-dkms" + _B + r"(-server)?(-open)?|"
    r"nvidia-kernel-source" + _B + r"(-server)?(-open)?|"
    r"nvidia-kernel-common" + _B + r"(-server)?)$")
USERSPACE_PACKAGES = re.compile(
    r"^(libcuda1|libnvidia-ml1|nvidia-smi|nvidia-driver(-bin|-cuda|-libs)?|"
    r"nvidia-driver" + _B + r"(-server)?(-open)?|nvidia-open" + _B + r"|"
    r"nvidia-headless(-no-dkms)?" + _B + r"(-server)?(-open)?|"
    r"libnvidia-(compute|common|decode|encode|extra|fbc1|gl|gpucomp)" + _B + r"(-server)?|"
    r"nvidia-(compute-)?utils" + _B + r"(-server)?|nvidia-tesla-[0-9]+-driver|"
    r"cuda-drivers" + _B + r"|libnvidia-cfg1" + _B + r"(-server)?|nvidia-persistenced|"
    r"nvidia-cuda-mps)$")
# Debian's nvidia-kernel-common (20151021+15) and nvidia-persistenced follow their own
# uploads; the unbranched nvidia-kernel-common of NVIDIA's repository carries the driver's
# version. A package of those names counts as a driver package only at a driver version.
_OWN_STREAM_NAMES = re.compile(r"^nvidia-kernel-common$")
# A branch-numbered name of the Ubuntu schemes: libnvidia-compute-580,
# nvidia-dkms-580-open, nvidia-utils-580-server, cuda-drivers-580 (Debian's
# nvidia-tesla-535-driver keeps its branch inside the name: no scheme of its own).
_BRANCHED = re.compile(r"^(?P<head>[a-z0-9.+-]+?)-(?P<branch>[0-9]{3})"
                       r"(?P<tail>(-server)?(-open)?)$")


def driver_side(packages, pattern):
    """The packages of ``packages`` whose names ``pattern`` matches, those of their own
    version streams (``_OWN_STREAM_NAMES``) only at a driver version."""
    return [p for p in matching(packages, pattern)
            if not _OWN_STREAM_NAMES.match(p["name"]) or upstream_version(p["version"])]


def branch_of(version):
    """``590.48.01`` -> ``590``."""
    return (version or "").split(".", 1)[0]


def scheme_names(name, version):
    """The names ``name`` (an installed driver package) may have at driver ``version``,
    in the order tried: itself, then its scheme's name at that branch (Ubuntu's archive:
    libnvidia-compute-580 -> libnvidia-compute-595), then the other scheme's (NVIDIA's
    repository from 590: libnvidia-compute-580 -> libnvidia-compute; back to 580:
    libnvidia-compute -> libnvidia-compute-580). A name of neither scheme (Debian's
    libcuda1, nvidia-driver) is itself only."""
    out = [name]
    branch = branch_of(version)
    match = _BRANCHED.match(name)
    if match:
        out.append("%s-%s%s" % (match.group("head"), branch, match.group("tail")))
        out.append(match.group("head") + match.group("tail"))
    elif pattern_unbranched(name) and branch.isdigit():
        head, tail = _split_tail(name)
        out.append("%s-%s%s" % (head, branch, tail))
    seen = []
    for item in out:
        if item not in seen:
            seen.append(item)
    return seen


# The unbranched names of NVIDIA's Ubuntu repository that had a branch-numbered name before
# 590 (the guide's rename table, and the metapackages beside it).
_UNBRANCHED = re.compile(
    r"^(libnvidia-(cfg1|common|compute|decode|encode|extra|fbc1|gl|gpucomp)|"
    r"nvidia-dkms(-open)?|nvidia-driver(-open)?|nvidia-kernel-common|"
    r"nvidia-kernel-source(-open)?|nvidia-(compute-)?utils|nvidia-headless(-no-dkms)?(-open)?|"
    r"cuda-drivers)$")


def pattern_unbranched(name):
    """Whether ``name`` is an unbranched name of NVIDIA's Ubuntu repository (590 on)."""
    return bool(_UNBRANCHED.match(name or ""))


def _split_tail(name):
    """``nvidia-dkms-open`` -> ``("nvidia-dkms", "-open")``: where a branch goes."""
    for tail in ("-open",):
        if name.endswith(tail) and name != "nvidia-" + tail[1:]:
            return name[:-len(tail)], tail
    return name, ""


# Where the loader looks without ld.so.conf (Debian/Ubuntu multiarch, then the rest)
LOADER_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
               "/lib", "/usr/lib", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
# Debian keeps the files in a private folder behind update-alternatives' links
PRIVATE_DIRS = ("/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib/nvidia/current")
LD_SO_CONF = "/etc/ld.so.conf"
LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")
_SO_VERSION = re.compile(r"\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$")
# ld.so.conf's caps: a real one is a line or two, its ld.so.conf.d a handful of files of a
# few lines each (Debian 12/13, Ubuntu 24.04: 1-3 files, under 10 folders in all); over a
# cap the root's loader path is an error naming the file, never a slow pass.
_INCLUDE_MAX = 64            # ld.so.conf files followed at most (includes of includes)
LD_SO_CONF_BYTES = 64 << 10  # one ld.so.conf file
LD_SO_CONF_DIRS = 256        # folders listed in all of them
# Every NVIDIA user-space library that carries the driver version in its file name
# (libcuda.so.590.48.01, libnvidia-ml.so.590.48.01, libnvidia-ptxjitcompiler, -nvvm,
# -gpucomp, -cfg, -opencl, ...), found through its soname link or its versioned file;
# libnvidia-egl-wayland.so.1.1.13, libnvidia-container.so.1.17.8 carry their own versions
# and drop out by VERSION_RE.
_NVIDIA_SO = re.compile(r"^(libcuda|libnvidia-[A-Za-z0-9_-]+)\.so\.([0-9.]+)$")
# CUDA's forward-compatibility libraries are at their own driver version by design
# (cuda-compat-*: /usr/local/cuda-13.0/compat), never mixed user space
_COMPAT_DIR = re.compile(r"/cuda[^/]*/compat(/|$)|/cuda-compat")
# Driver packages of separate version streams (Debian's nvidia-settings, -xconfig,
# -modprobe and -persistenced follow their own uploads), not judged for mixing
_OWN_VERSIONS = re.compile(r"^(nvidia-settings|nvidia-xconfig|nvidia-modprobe|"
                           r"nvidia-persistenced|nvidia-support|nvidia-installer-cleanup|"
                           r"nvidia-kernel-common|nvidia-container-.*|libnvidia-container.*)$")
_DRIVER_PACKAGE = re.compile(r"^(libcuda|libnvidia-|nvidia-)")
# An NVIDIA user-space library a container config may bind from the host
_NVIDIA_LIB = re.compile(r"^(libcuda|libnvidia-[A-Za-z0-9_-]+)\.so(\.[0-9.]+)?$")


class DriverStateError(ValueError):
    """A bad option (a version that is not one, a container that has no config)."""


def check_version(option, value):
    """Refuse (DriverStateError naming ``option``) what is not an NVIDIA driver version."""
    if not isinstance(value, str) or not VERSION_RE.match(value):
        raise DriverStateError("%s: %r is not %s" % (option, value, VERSION_WANTED))
    return value


def upstream_version(version):
    """The driver version of a Debian package version: ``590.48.01-1~deb12u1`` ->
    ``590.48.01`` (epoch and revision dropped); None when what is left is not one."""
    text = (version or "").split(":", 1)[-1]
    if "-" in text:
        text = text.rsplit("-", 1)[0]
    return text if VERSION_RE.match(text) else None


def so_version(name):
    """``libcuda.so.590.48.01`` -> ``590.48.01``; None for ``libcuda.so.1``."""
    match = _SO_VERSION.search(name or "")
    return match.group(1) if match and VERSION_RE.match(match.group(1)) else None


def dpkg_packages(fs_root):
    """Installed packages of the dpkg status under ``fs_root`` (a folder on this machine):
    ``[{name, version, maintainer, source}]``; None when there is no status file. Read a
    line at a time under the stored-output cap (a full host's status is a few MiB)."""
    path = host_path(fs_root, DPKG_STATUS)
    out = []
    fields = {}

    def take():
        if "installed" in fields.get("Status", "").split() and fields.get("Package"):
            out.append({"name": fields["Package"], "version": fields.get("Version", ""),
                        "maintainer": fields.get("Maintainer", ""),
                        "source": fields.get("Source", "").split(" ", 1)[0] or None})

    try:
        with hostfs.open_read(path, "r", hostfs.OUTPUT_LIMIT, encoding="utf-8",
                              errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    take()
                    fields = {}
                elif not line[:1].isspace() and ":" in line:
                    key, _sep, value = line.partition(":")
                    if key in ("Package", "Status", "Version", "Maintainer", "Source"):
                        fields[key] = value.strip()
            take()
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) in (2, 20):  # ENOENT, ENOTDIR
            return None
        raise
    return out


_RUN_VERSION = re.compile(r"(?:^|[\s(])([0-9]+(?:\.[0-9]+){1,3})(?:$|[\s)])")


def run_record(fs_root):
    """nvidia-installer's backup log under ``fs_root``: ``{version, description, path,
    kernel_modules}`` (``kernel_modules``: whether it installed ``.ko`` files, i.e. not
    ``--no-kernel-module``), or None when absent. The first line is ``1.0-5904801
    (590.48.01)``: the version in parentheses (older installers: ``1.0-9742`` only)."""
    path = host_path(fs_root, RUN_LOG)
    try:
        with hostfs.open_read(path, "r", encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
            description = handle.readline().strip()
            kos = False
            for line in handle:
                head, _sep, name = line.partition(": ")
                if head.strip().isdigit() and ".ko" in name and "/lib/modules/" in name:
                    kos = True
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) in (2, 20):
            return None
        raise
    found = [m for m in _RUN_VERSION.findall(first) if len(m) >= 5]
    return {"version": found[-1] if found else None, "description": description or None,
            "path": RUN_LOG, "kernel_modules": kos}


def matching(found, pattern):
    return [p for p in found or [] if pattern.match(p["name"])]


def listed(packages):
    return [{"name": p["name"], "version": p["version"]} for p in packages]


def _over(fs_root, path, what):
    return hostfs.HostFileError(host_path(fs_root, path), "%s: the loader path of this root "
                                "is not read (a real ld.so.conf is a few lines); trim it"
                                % what)


def _conf_dirs(fs_root, path, seen, out, listed):
    """Folders ``path`` (an ld.so.conf inside the root) lists, includes followed, each once
    (``listed``: the set of ``out``); over a cap (LD_SO_CONF_BYTES a file, _INCLUDE_MAX
    files, LD_SO_CONF_DIRS folders) a HostFileError naming the file."""
    if path in seen:
        return
    if len(seen) >= _INCLUDE_MAX:
        raise _over(fs_root, path, "more than %d ld.so.conf files included" % _INCLUDE_MAX)
    seen.add(path)
    try:
        text = read_text(host_path(fs_root, path), limit=LD_SO_CONF_BYTES)
    except hostfs.TooLarge:
        raise _over(fs_root, path, "over %d KiB" % (LD_SO_CONF_BYTES >> 10))
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line.split(None, 1)[1].strip() if " " in line else ""
            if not pattern.startswith("/"):
                pattern = os.path.join(os.path.dirname(path), pattern)
            folder, name = os.path.split(pattern)
            try:
                names = sorted(hostfs.listdir(host_path(fs_root, folder)))
            except OSError:
                continue
            for entry in names:
                if fnmatch.fnmatch(entry, name):
                    _conf_dirs(fs_root, folder + "/" + entry, seen, out, listed)
        elif line.startswith("/"):
            folder = line.rstrip("/") or "/"
            if folder not in listed:
                if len(out) >= LD_SO_CONF_DIRS:
                    raise _over(fs_root, path, "more than %d folders listed"
                                % LD_SO_CONF_DIRS)
                listed.add(folder)
                out.append(folder)


def loader_dirs(fs_root):
    """The folders the loader searches inside ``fs_root``, each once: ``/etc/ld.so.conf``'s
    (includes followed, under its caps) first, then the default ones, then Debian's private
    NVIDIA folders."""
    out = []
    listed = set()
    _conf_dirs(fs_root, LD_SO_CONF, set(), out, listed)
    for folder in list(LOADER_DIRS) + list(PRIVATE_DIRS):
        if folder not in listed:
            listed.add(folder)
            out.append(folder)
    return out


def resolved_version(fs_root, path):
    """``(version, final path)`` of ``path`` followed inside ``fs_root`` (links resolved
    there, as the loader inside the container would), or ``(None, None)`` when missing."""
    target = kernels.resolve_under(fs_root, path)
    if target is None or not hostfs.isfile(target):
        return None, None
    final = "/" + os.path.relpath(target, os.path.abspath(fs_root)) if fs_root != "/" \
        else target
    return so_version(os.path.basename(final)), final


def nvidia_libraries(fs_root, dirs=None):
    """``[{name, version, path}]``: every NVIDIA user-space library of ``fs_root`` that
    carries the driver version, as the loader would load it - per library (``libcuda``,
    ``libnvidia-ml``, ...) the first folder of the loader's search holding it, through its
    soname link (``libnvidia-ml.so.1`` -> its file's version) else its versioned file
    (``libnvidia-gpucomp.so.590.48.01``) when there is one version of it. CUDA's compat
    folders are left out."""
    seen = {}
    for folder in dirs or loader_dirs(fs_root):
        if _COMPAT_DIR.search(folder):
            continue
        try:
            names = hostfs.listdir(host_path(fs_root, folder))
        except OSError:
            continue
        here = {}
        for name in names:
            match = _NVIDIA_SO.match(name)
            if not match or match.group(1) in seen:
                continue
            stem, suffix = match.groups()
            path = folder.rstrip("/") + "/" + name
            if VERSION_RE.match(suffix):
                here.setdefault(stem, {"links": [], "files": []})["files"].append(
                    (suffix, path))
            elif suffix.isdigit():
                version, final = resolved_version(fs_root, path)
                if final and version:
                    here.setdefault(stem, {"links": [], "files": []})["links"].append(
                        (version, path))
        for stem, found in here.items():
            chosen = found["links"]
            if not chosen and len(set(v for v, _p in found["files"])) == 1:
                # loaded by its full name (DT_NEEDED of a library of its own version): one
                # file is what the loader takes; several are leftovers no link selects
                chosen = found["files"]
            seen[stem] = sorted(set(chosen))
    return [{"name": path.rsplit("/", 1)[-1], "version": version, "path": path}
            for stem in sorted(seen) for version, path in seen[stem]]


def driver_packages(packages):
    """The installed packages of ``packages`` (``dpkg_packages``) that carry the NVIDIA
    driver's version (libcuda1, libnvidia-ml1, libnvidia-compute-580, nvidia-utils-580,
    ...): ``[{name, version, upstream}]``; those of their own version streams
    (``_OWN_VERSIONS``) and any whose version is no driver version left out."""
    out = []
    for package in packages or []:
        if not _DRIVER_PACKAGE.match(package["name"]) or _OWN_VERSIONS.match(package["name"]):
            continue
        upstream = upstream_version(package["version"])
        if upstream:
            out.append({"name": package["name"], "version": package["version"],
                        "upstream": upstream})
    return out


def mixed_versions(libs, packages):
    """``["libcuda.so.1 590.48.01 (<path>)", "package libnvidia-ml1 580.95.05-1", ...]``
    when ``libs`` (``nvidia_libraries``) and ``packages`` (``driver_packages``) are not
    all at one version, else ``[]``."""
    versions = set(lib["version"] for lib in libs) | set(p["upstream"] for p in packages)
    if len(versions) < 2:
        return []
    return (["%s %s (%s)" % (lib["name"], lib["version"], lib["path"]) for lib in libs]
            + ["package %s %s" % (p["name"], p["version"]) for p in packages])


def libraries(fs_root, dirs=None):
    """``{lib: (version, path as the loader finds it, final file)}`` for libcuda.so.1 and
    libnvidia-ml.so.1: the first folder of the loader's search (``dirs``, default
    ``loader_dirs``) that holds each."""
    found = {}
    for folder in dirs or loader_dirs(fs_root):
        for lib in LIBS:
            if lib in found:
                continue
            path = folder.rstrip("/") + "/" + lib
            version, final = resolved_version(fs_root, path)
            if final:
                found[lib] = (version, path, final)
    return found


# --------------------------------------------------------------------------- bind mounts


def bound_sources(root, config):
    """Live ``lxc.mount.entry`` binds of NVIDIA user-space files or folders of the host:
    ``[(source, version or None, evidence paths, missing)]``. A versioned file
    (``libcuda.so.580.95.05``) is read by its name and looked for on the host (links
    followed inside ``root``): ``missing`` when it is not there, which LXC skips without a
    word for an ``optional`` bind, so the container starts without that library."""
    out = []
    for entry in config.mount_entries():
        source = entry.get("source") or ""
        if not source.startswith("/") or source.startswith("/dev/"):
            continue
        name = os.path.basename(source.rstrip("/"))
        if _NVIDIA_LIB.match(name) or name == "nvidia-smi":
            version = so_version(name)
            final = source
            missing = False
            if version is None and name != "nvidia-smi":
                version, final = resolved_version(root, source)
            elif version is not None:
                _found, final = resolved_version(root, source)
                missing = final is None
            out.append((source, version, [p for p in (source, final) if p], missing))
        elif hostfs.isdir(host_path(root, source)):
            version, final = resolved_version(root, source.rstrip("/") + "/" + LIBS[0])
            if final:
                out.append((source, version, [source.rstrip("/") + "/" + LIBS[0], final],
                            False))
                # every other NVIDIA library of the bound folder, each at its version
                for lib in nvidia_libraries(root, [source.rstrip("/") or "/"]):
                    if lib["version"] != version:
                        out.append((source, lib["version"], [lib["path"]], False))
    return out


def versioned_binds(config):
    """``[{index, source, target, version}]``: the live ``lxc.mount.entry`` lines that bind
    a host file named with a driver version (``/usr/lib/x86_64-linux-gnu/
    libcuda.so.580.95.05``), the ones a driver upgrade must rewrite."""
    out = []
    for entry in config.mount_entries():
        source = entry.get("source") or ""
        name = os.path.basename(source)
        if source.startswith("/") and _NVIDIA_LIB.match(name) and so_version(name):
            out.append({"index": entry["index"], "source": source,
                        "target": entry.get("target"), "version": so_version(name)})
    return out


def renamed_source(source, version):
    """``/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05`` at ``590.48.01``."""
    old = so_version(os.path.basename(source))
    return source[:len(source) - len(old)] + version if old else source
