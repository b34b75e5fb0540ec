# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed and running kernels, their headers and package names, under a root.

A kernel counts as installed when ``/lib/modules/<k>`` holds its modules (a ``kernel/``
folder or ``modules.builtin``) or ``/boot/vmlinuz-<k>`` exists. A ``/lib/modules/<k>``
holding only ``build``/``source`` links (headers without the image), DKMS leftovers under
``updates/`` and the ``modules.dep`` depmod then writes is not a kernel. Headers count
when ``/lib/modules/<k>/build`` resolves (under root) to a folder holding ``include``,
the test dkms itself makes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)

_VERSION_RE = re.compile(r"Linux version (\S+)")
_UPSTREAM_RE = re.compile(r"^(\d+(?:\.\d+)*)(?:-(\d+))?")
_VMLINUZ_RE = re.compile(r"(?:^|/)(?:vmlinuz|vmlinux|bzImage|kernel)-([^/\s]+)$")


def running_kernel(root="/"):
    """Release of the running kernel (``6.8.12-9-pve``), or None when unknown.

    Reads ``/proc/sys/kernel/osrelease``, else parses ``/proc/version``.
    """
    text = read_text(host_path(root, "/proc/sys/kernel/osrelease"))
    if text:
        return text.split()[0]
    text = read_text(host_path(root, "/proc/version"))
    if text:
        match = _VERSION_RE.search(text)
        if match:
            return match.group(1)
    return None


def kernel_sort_key(release):
    """Version-aware sort key for kernel releases.

    ``6.14.11-5-bpo12-pve`` > ``6.8.12-9-pve`` > ``6.1.0-56-amd64`` > ``6.1.0-9-amd64``.
    Upstream version numbers first, then the ABI number, then the rest piece by piece
    (numbers as numbers).
    """
    release = release or ""
    match = _UPSTREAM_RE.match(release)
    if match:
        upstream = tuple(int(p) for p in match.group(1).split("."))
        abi = int(match.group(2)) if match.group(2) else -1
        rest = release[match.end():]
    else:
        upstream, abi, rest = (), -1, release
    pieces = []
    for index, token in enumerate(re.split(r"(\d+)", rest)):
        # re.split with a group alternates text, number, text, ...: positions keep types apart
        pieces.append(int(token) if index % 2 else token)
    return (upstream, abi, tuple(pieces))


def _has_modules(folder):
    """The image's modules are there: ``kernel/`` or ``modules.builtin`` (both shipped by
    the image package). ``modules.dep`` alone is not enough: ``dkms install`` runs depmod,
    which writes ``modules.dep`` into a headers-only ``/lib/modules/<k>`` (seen with
    linux-headers-6.1.0-56-amd64 and no image)."""
    return hostfs.isdir(os.path.join(folder, "kernel")) or hostfs.isfile(
        os.path.join(folder, "modules.builtin"))


def installed_kernels(root="/"):
    """Releases of the installed kernels, oldest first (see module docstring)."""
    found = set()
    modules = host_path(root, "/lib/modules")
    try:
        names = hostfs.listdir(modules)
    except OSError:
        names = []
    for name in names:
        if _has_modules(os.path.join(modules, name)):
            found.add(name)
    boot = host_path(root, "/boot")
    try:
        names = hostfs.listdir(boot)
    except OSError:
        names = []
    for name in names:
        if name.startswith("vmlinuz-") and len(name) > len("vmlinuz-"):
            path = os.path.join(boot, name)
            if hostfs.isfile(path):
                found.add(name[len("vmlinuz-"):])
    return sorted(found, key=kernel_sort_key)


def newest_kernel(root="/"):
    kernels = installed_kernels(root)
    return kernels[-1] if kernels else None


def initramfs_kernels(installed, running=None, next_boot=None, also=()):
    """The kernels whose initramfs must carry the modprobe.d options: every kernel that may
    boot - the running one, the newest installed, the one the boot loader boots next and
    ``also`` (an upgrade's target) - among ``installed`` (an initramfs is made only for an
    installed kernel), oldest first. One rule for the audit's remedy and role boot_config."""
    installed = list(installed or [])
    picked = set([running, next_boot] + list(also or []))
    if installed:
        picked.add(sorted(installed, key=kernel_sort_key)[-1])
    return sorted((k for k in picked if k and k in installed), key=kernel_sort_key)


def resolve_under(root, path, max_links=40):
    """Resolve ``path`` (absolute on the host) under ``root``, following symlinks the way
    the host would: absolute link targets start again at ``root``. Return the resolved
    path under root (it may not exist); None on a link loop."""
    try:
        resolved = hostfs.resolve_links(root, path, max_links)
    except hostfs.LinkLoop:
        return None
    root = os.path.abspath(root or "/")
    return root if resolved == "/" else host_path(root, resolved)


def headers_dir(root, release):
    """Where ``/lib/modules/<release>/build`` leads under root, or None when it does not
    resolve to a folder."""
    target = resolve_under(root, "/lib/modules/%s/build" % release)
    if target and hostfs.isdir(target):
        return target
    return None


def has_headers(root, release):
    """True when ``/lib/modules/<release>/build`` resolves (under root) to headers.

    A dangling ``build`` link (headers package removed, or never installed) is not headers.
    Like dkms, a headers tree must hold ``include``.
    """
    target = headers_dir(root, release)
    return bool(target) and hostfs.exists(os.path.join(target, "include"))


def release_flavour(release):
    """``proxmox``, ``debian``, ``ubuntu`` or ``unknown`` from a release string."""
    release = release or ""
    if release.endswith("-pve"):
        return "proxmox"
    if re.search(r"-(amd64|arm64|cloud-amd64|cloud-arm64|rt-amd64|rt-arm64|686|686-pae)$",
                 release):
        return "debian"
    if re.search(r"-(generic|lowlatency|aws|azure|gcp|oracle|kvm|nvidia)(-\d+k)?$", release):
        return "ubuntu"
    return "unknown"


def _pve_legacy(release):
    """Proxmox kernels before 6.2 shipped as ``pve-kernel-*``/``pve-headers-*``."""
    match = _UPSTREAM_RE.match(release)
    if not match:
        return False
    nums = tuple(int(p) for p in match.group(1).split(".")[:2])
    return nums < (6, 2)


def headers_package(release):
    """Debian package that ships the headers for ``release``.

    ``6.14.11-5-bpo12-pve`` -> ``proxmox-headers-6.14.11-5-bpo12-pve``;
    ``6.1.0-56-amd64`` -> ``linux-headers-6.1.0-56-amd64``.
    """
    if release_flavour(release) == "proxmox":
        return ("pve-headers-%s" if _pve_legacy(release) else "proxmox-headers-%s") % release
    return "linux-headers-%s" % release


def image_package(release):
    """Debian package that ships the kernel image for ``release``.

    ``6.14.11-5-bpo12-pve`` -> ``proxmox-kernel-6.14.11-5-bpo12-pve-signed``;
    ``6.1.0-56-amd64`` -> ``linux-image-6.1.0-56-amd64``.
    """
    if release_flavour(release) == "proxmox":
        if _pve_legacy(release):
            return "pve-kernel-%s" % release
        return "proxmox-kernel-%s-signed" % release
    return "linux-image-%s" % release


def kernel_flavour(root="/"):
    """Flavour (``proxmox``, ``debian``, ``ubuntu``, ``unknown``) of the running kernel,
    else of the newest installed one."""
    release = running_kernel(root) or newest_kernel(root)
    return release_flavour(release)


def kernel_info(root, release):
    """What is on disk for one kernel: image, initrd, config, modules, headers."""
    return {
        "release": release,
        "vmlinuz": hostfs.isfile(host_path(root, "/boot/vmlinuz-%s" % release)),
        "initrd": hostfs.isfile(host_path(root, "/boot/initrd.img-%s" % release)),
        "config": hostfs.isfile(host_path(root, "/boot/config-%s" % release)),
        "modules": _has_modules(host_path(root, "/lib/modules/%s" % release)),
        "headers": has_headers(root, release),
        "headers_package": headers_package(release),
        "image_package": image_package(release),
    }


def kernel_from_path(path):
    """Kernel release from an image path: ``/boot/vmlinuz-6.1.0-56-amd64``,
    ``/EFI/proxmox/6.8.12-9-pve/vmlinuz-6.8.12-9-pve``, kernel-install's
    ``/<token>/6.1.0-56-amd64/linux``; None when the path does not say."""
    if not path:
        return None
    path = path.strip()
    # GRUB paths may carry a device or a btrfs subvolume prefix: (hd0,gpt2)/@/boot/...
    path = re.sub(r"^\([^)]*\)", "", path)
    match = _VMLINUZ_RE.search(path)
    if match:
        return match.group(1)
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[-1] in ("linux", "vmlinuz") and re.match(r"^\d+\.", parts[-2]):
        return parts[-2]
    return None
