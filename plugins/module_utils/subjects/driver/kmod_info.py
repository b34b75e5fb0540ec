# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A kernel module file's own facts and which file ``modprobe`` loads for a kernel: what
the next boot will actually load, whatever the DKMS tree says.

- The module's ``.modinfo``: an ELF section of ``key=value`` strings, each ended by a NUL
  (the kernel's ``MODULE_INFO``/``MODULE_VERSION`` put them there; ``modinfo`` prints
  them): ``version=590.48.01``, ``vermagic=6.14.11-5-bpo12-pve SMP preempt mod_unload
  modversions``. Read through the ELF section header table (ELF64 and ELF32, either byte
  order; ``e_shnum`` 0 and ``e_shstrndx`` SHN_XINDEX as the ELF spec extends them): the
  header, the table, the section-name table and ``.modinfo`` only, each under its cap,
  never the whole file (an NVIDIA module is 50-100 MB).
- Compressed modules (dkms 3.2.x installs ``.ko.xz`` for Debian 13's kernels, dkms 3.0.x
  plain ``.ko``; kmod also loads ``.ko.gz`` and ``.ko.zst``): ``.xz`` and ``.gz`` are
  decompressed streaming by Python's ``lzma``/``gzip`` (seeks re-read, output capped);
  ``.zst`` (no standard-library zstd before Python 3.14) is read by ``modinfo -F`` through
  the collection's runner, bounded in time, or refused naming the file.
- Which file: ``/lib/modules/<kernel>/modules.dep`` (what ``depmod`` wrote, its
  ``depmod.d`` search and override rules applied; modprobe loads the path it lists for a
  module, ``-`` and ``_`` alike in names). Without modules.dep, depmod's own default order
  decides (kmod's depmod.c: with no ``search`` line ``updates`` comes first, every other
  folder after): ``updates/dkms``, ``updates``, then ``extra`` and
  ``kernel/drivers/video``, where dkms and the ``.run`` put NVIDIA's modules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import lzma
import os
import struct
import zlib

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")   # kmod's module extensions
MODULES_DEP = "/lib/modules/%s/modules.dep"
# depmod's default order without modules.dep (see the module docstring)
SEARCH_ORDER = ("updates/dkms", "updates", "extra", "kernel/drivers/video")

SECTION_TABLE_MAX = 4 << 20    # section headers: 65536 of 64 bytes
NAMES_MAX = 4 << 20            # .shstrtab
MODINFO_MAX = 1 << 20          # .modinfo: a few KiB in a real module
UNPACKED_MAX = 1 << 30         # a compressed module's ELF: offsets past this are refused
PACKED_MAX = 1 << 30           # bytes read of a compressed module (both passes)
MODULES_DEP_MAX = 32 << 20     # modules.dep: under 1 MiB for a Proxmox kernel

_SHN_XINDEX = 0xFFFF
_DKMS_HINT = "dkms install -m %s -v %s -k %s --force"


class ModuleInfoError(ValueError):
    """A module file that cannot be read as a kernel module; the message names the file,
    what is wrong and what to do."""


def _name(module):
    return module.replace("-", "_")


def module_name(path):
    """``nvidia-uvm`` of ``.../nvidia-uvm.ko.xz``, None for what is no module file."""
    base = os.path.basename(path)
    for suffix in SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return None


# --------------------------------------------------------------------------- ELF


def _read_at(handle, offset, size, what, path):
    if offset < 0 or size < 0 or offset + size > UNPACKED_MAX:
        raise ModuleInfoError("%s: %s at %d+%d lies past %d MiB: not a kernel module"
                              % (path, what, offset, size, UNPACKED_MAX >> 20))
    handle.seek(offset)
    data = handle.read(size)
    if len(data) != size:
        raise ModuleInfoError("%s: cut short (%s at %d+%d past its end): not a complete "
                              "kernel module" % (path, what, offset, size))
    return data


def elf_modinfo(handle, path):
    """``{key: [values]}`` of the ``.modinfo`` section of the ELF file open as ``handle``
    (seekable, binary); ModuleInfoError naming ``path`` when it is no ELF module."""
    ident = handle.read(64)
    if len(ident) < 52 or ident[:4] != b"\x7fELF":
        raise ModuleInfoError("%s: %s, not an ELF kernel module" % (
            path, "empty" if not ident else "%d bytes without the ELF magic" % len(ident)
            if ident[:4] != b"\x7fELF" else "cut short"))
    if ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ModuleInfoError("%s: ELF class %d, data %d not understood" % (
            path, ident[4], ident[5]))
    end = "<" if ident[5] == 1 else ">"
    if ident[4] == 2:
        if len(ident) < 64:
            raise ModuleInfoError("%s: ELF64 header cut short" % path)
        shoff, = struct.unpack(end + "Q", ident[0x28:0x30])
        shentsize, shnum, shstrndx = struct.unpack(end + "HHH", ident[0x3A:0x40])
        fmt, want = end + "IIQQQQIIQQ", 64
    else:
        shoff, = struct.unpack(end + "I", ident[0x20:0x24])
        shentsize, shnum, shstrndx = struct.unpack(end + "HHH", ident[0x2E:0x34])
        fmt, want = end + "IIIIIIIIII", 40
    if shoff == 0 or shentsize < want:
        raise ModuleInfoError("%s: no ELF section table (offset %d, entry size %d): not a "
                              "kernel module" % (path, shoff, shentsize))

    def section(index):
        raw = _read_at(handle, shoff + index * shentsize, want, "section header", path)
        fields = struct.unpack(fmt, raw)
        # name, type, flags, addr, offset, size, link, info, align, entsize
        return fields[0], fields[4], fields[5], fields[6]

    if shnum == 0 or shstrndx == _SHN_XINDEX:
        _n, _o, size0, link0 = section(0)
        shnum = shnum or size0
        shstrndx = link0 if shstrndx == _SHN_XINDEX else shstrndx
    if not 0 < shnum <= SECTION_TABLE_MAX // shentsize or shstrndx >= shnum:
        raise ModuleInfoError("%s: %d sections (names in %d): not a kernel module"
                              % (path, shnum, shstrndx))
    table = _read_at(handle, shoff, shnum * shentsize, "section table", path)
    sections = [struct.unpack(fmt, table[i * shentsize:i * shentsize + want])
                for i in range(shnum)]
    names_at, names_size = sections[shstrndx][4], sections[shstrndx][5]
    if names_size > NAMES_MAX:
        raise ModuleInfoError("%s: section names of %d bytes, over %d MiB" % (
            path, names_size, NAMES_MAX >> 20))
    names = _read_at(handle, names_at, names_size, "section names", path)
    for fields in sections:
        start = fields[0]
        if names[start:start + 9] == b".modinfo\x00":
            if fields[5] > MODINFO_MAX:
                raise ModuleInfoError("%s: .modinfo of %d bytes, over %d KiB" % (
                    path, fields[5], MODINFO_MAX >> 10))
            data = _read_at(handle, fields[4], fields[5], ".modinfo", path)
            return _pairs(data)
    raise ModuleInfoError("%s: an ELF file without a .modinfo section: not a kernel module"
                          % path)


def _pairs(data):
    out = {}
    for item in data.split(b"\x00"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            out.setdefault(key.decode("ascii", "replace"), []).append(
                value.decode("utf-8", "replace"))
    return out


# --------------------------------------------------------------------------- files


def modinfo(path, runner=None, label=None):
    """``{key: [values]}`` of the module file at ``path`` (a path on this machine; reads
    resolve inside its root): plain, ``.xz`` or ``.gz`` read here, ``.zst`` by ``modinfo``
    through ``runner``. ModuleInfoError naming the file (``label``, default ``path``)
    when unreadable."""
    label = label or path
    try:
        if path.endswith(".ko.zst"):
            try:
                from compression import zstd  # Python 3.14 and later
            except ImportError:
                return _modinfo_command(hostfs.realpath(path), runner, label)
            with hostfs.open_read(path, "rb", PACKED_MAX) as raw:
                with zstd.ZstdFile(raw) as handle:
                    return elf_modinfo(handle, label)
        limit = PACKED_MAX if path.endswith((".xz", ".gz")) else \
            SECTION_TABLE_MAX + NAMES_MAX + MODINFO_MAX + 4096
        with hostfs.open_read(path, "rb", limit) as raw:
            if path.endswith(".xz"):
                with lzma.LZMAFile(raw) as handle:
                    return elf_modinfo(handle, label)
            if path.endswith(".gz"):
                import gzip
                with gzip.GzipFile(fileobj=raw) as handle:
                    return elf_modinfo(handle, label)
            return elf_modinfo(raw, label)
    except ModuleInfoError:
        raise
    except (IOError, OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
        raise ModuleInfoError("%s: not readable as a kernel module (%s)" % (label, exc))


def _modinfo_command(path, runner, label):
    if runner is None or not runner.which("modinfo"):
        raise ModuleInfoError(
            "%s: a zstd-compressed module, which this Python cannot read and no modinfo "
            "is at hand to read it (install kmod, or run the module on the host)" % label)
    rc, out, err = runner.run(["modinfo", "-F", "version", path], check=False,
                              timeout=QUERY_TIMEOUT_S)
    version = (out or "").strip().splitlines()
    if rc != 0:
        raise ModuleInfoError("%s: modinfo exited %s: %s" % (label, rc, (err or "").strip()))
    _rc, magic, _err = runner.run(["modinfo", "-F", "vermagic", path], check=False,
                                  timeout=QUERY_TIMEOUT_S)
    out = {}
    if version:
        out["version"] = [version[0]]
    if (magic or "").strip():
        out["vermagic"] = [magic.strip().splitlines()[0]]
    return out


def modules_dep(root, kernel, names):
    """``{module: path relative to /lib/modules/<kernel>}`` for ``names`` as modules.dep
    lists them (``-`` and ``_`` alike), or None when the kernel has no modules.dep. Read a
    line at a time under MODULES_DEP_MAX."""
    wanted = dict((_name(n), n) for n in names)
    found = {}
    path = host_path(root, MODULES_DEP % kernel)
    try:
        with hostfs.open_read(path, "r", MODULES_DEP_MAX, encoding="utf-8",
                              errors="replace") as handle:
            for line in handle:
                head = line.split(":", 1)[0].strip()
                name = module_name(head)
                if name is not None and _name(name) in wanted:
                    found.setdefault(wanted[_name(name)], head)
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) in (2, 20):
            return None
        raise
    return found


def _by_search_order(root, kernel, module):
    lib = host_path(root, "/lib/modules/%s" % kernel)
    for folder in SEARCH_ORDER:
        for suffix in SUFFIXES:
            for name in (module, _name(module)):
                if hostfs.lexists(os.path.join(lib, folder, name + suffix)):
                    return "%s/%s%s" % (folder, name, suffix)
    return None


def picked(root, kernel, modules, runner=None):
    """Which file of each of ``modules`` (names, ``nvidia``, ``nvidia-uvm``) the kernel
    ``kernel`` loads, and what it holds: ``[{module, path, source, version, vermagic,
    error}]`` (``path`` a host path; ``source`` ``modules.dep`` or ``search order``;
    ``error`` a sentence saying what is wrong with it, None when it reads)."""
    listed = modules_dep(root, kernel, modules)
    out = []
    for module in modules:
        item = {"module": module, "path": None, "version": None, "vermagic": None,
                "error": None,
                "source": "modules.dep" if listed is not None else "search order"}
        rel = listed.get(module) if listed is not None else \
            _by_search_order(root, kernel, module)
        if rel is None:
            item["error"] = ("%s lists no %s module: modprobe will not find it (run depmod "
                             "%s)" % (MODULES_DEP % kernel, module, kernel)
                             if listed is not None else
                             "no %s module under /lib/modules/%s (%s)" % (
                                 module, kernel, ", ".join(SEARCH_ORDER)))
            out.append(item)
            continue
        item["path"] = "/lib/modules/%s/%s" % (kernel, rel.lstrip("/"))
        try:
            info = modinfo(host_path(root, item["path"]), runner, item["path"])
        except ModuleInfoError as exc:
            item["error"] = str(exc)
            out.append(item)
            continue
        item["version"] = (info.get("version") or [None])[0]
        magic = (info.get("vermagic") or [""])[0].split()
        item["vermagic"] = magic[0] if magic else None
        out.append(item)
    return out


def judge(item, target, kernel, dkms_name="nvidia"):
    """The refusal for one ``picked`` item against ``target``, None when it is right. The
    ``vermagic`` release is reported, not judged: dkms builds against the headers the
    kernel's ``build`` link names, and a test kernel release borrowing another's headers
    is no defect of the module."""
    fix = _DKMS_HINT % (dkms_name, target, kernel)
    if item["error"]:
        return "host: the next kernel %s would not load nvidia %s: %s; %s" % (
            kernel, target, item["error"], fix)
    if item["version"] != target:
        return ("host: the next kernel %s loads %s (%s), which holds %s, not %s: %s" % (
            kernel, item["path"], item["source"],
            "version %s" % item["version"] if item["version"] else "no version string",
            target, fix))
    return None
