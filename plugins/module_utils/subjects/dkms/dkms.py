# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DKMS: parse ``dkms status`` and read the DKMS tree offline (building and installing a
module is in subjects/dkms/dkms_build.py).

Layout of the tree (dkms 2.x/3.x, checked against dkms 3.0.10 on Debian 12):

- ``/var/lib/dkms/<name>/<ver>/source`` -> ``/usr/src/<name>-<ver>``: the module is *added*;
- ``/var/lib/dkms/<name>/<ver>/<kernel>/<arch>/module/<mod>.ko[.xz|.zst]``: *built*;
- ``/var/lib/dkms/<name>/kernel-<kernel>-<arch>`` -> ``<ver>/<kernel>/<arch>`` (relative
  link): *installed*; the copies live in ``/lib/modules/<kernel>/updates/dkms/`` on Debian,
  Ubuntu and Proxmox (dkms overrides ``DEST_MODULE_LOCATION`` there), elsewhere in
  ``DEST_MODULE_LOCATION``.
- ``/var/lib/dkms/<name>/original_module/<kernel>/<arch>``: in-tree modules dkms moved away.

dkms decides the state from these paths, and so do ``tree_status`` (for offline audits) and
``dkms_write.ensure`` (which never trusts an exit code alone). Checked again against dkms
3.2.2 on Debian 13 (Proxmox VE 9): the same tree and status lines; modules installed as
``.ko.xz`` for Debian's 6.12 kernels; other status warnings (``WARNINGS``); exit 21, not 1,
for missing headers, and ``dkms autoinstall`` exits 0 without a word for a kernel whose
headers are missing (3.0.10: 11 and the error), so no exit code is evidence.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernels import (
    has_headers,
    installed_kernels,
    headers_package,
    kernel_sort_key,
    resolve_under,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms.dkms_conf import (
    parse_conf,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.fabric_manager.fabric_manager import (  # noqa: E501
    package_version,
)

DKMS_TREE = "/var/lib/dkms"
MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")
# dkms installs here on Debian, Ubuntu and Proxmox whatever dkms.conf says
DEBIAN_DEST = "/updates/dkms"
STATE_RANK = {None: 0, "added": 1, "built": 2, "installed": 3}
WANTED_STATES = ("built", "installed")

# The warnings ``dkms status`` appends, by wording: dkms 3.0.x (3.0.10, Debian 12 and
# Proxmox VE 8) and the wording dkms 3.2.2 (Debian 13, Proxmox VE 9) prints, read in its
# module_status_built_extra(); 3.0.10 repeats the diff warning once per module, 3.2.2
# prints it once. Which applies: the dkms version in dpkg's status under the root.
WARNINGS = {
    "3.0": {"original": "original_module exists",
            "missing": "WARNING! Missing some built modules!",
            "diff": "WARNING! Diff between built and installed module!"},
    "3.2": {"original": "Original modules exist",
            "missing": "Built modules are missing in the kernel modules folder",
            "diff": "Differences between built and installed modules"},
}

_WARNING_RE = re.compile(r"\(([^()]*)\)")
_KERNEL_DIR_RE = re.compile(r"^[0-9]+\..*")


class DkmsError(Exception):
    """A DKMS step failed; the message says what, where, and what to do."""

    def __init__(self, msg, **details):
        super(DkmsError, self).__init__(msg)
        self.details = details


def version_key(version):
    """Sort key for module versions (``590.48.01`` > ``580.159.04`` > ``470.57.02``)."""
    return kernel_sort_key(version)


# --------------------------------------------------------------------------- dkms status


def parse_status_line(line):
    """Parse one ``dkms status`` line; None for blank or unrecognised lines.

    Formats: ``nvidia/590.48.01, 6.14.11-5-bpo12-pve, x86_64: installed`` (dkms >= 2.8.6),
    ``nvidia, 470.57.02, 5.10.0-8-amd64, x86_64: installed`` (dkms <= 2.8.5),
    ``nvidia/590.48.01: added``, ``nvidia, 470.57.02: added``, each optionally followed by
    warnings in parentheses.
    """
    line = line.strip()
    if not line or ": " not in line and not line.endswith(":"):
        return None
    if line.startswith(("Error!", "Warning!", "Deprecated")):
        return None
    ids, _sep, rest = line.partition(": ")
    fields = [f.strip() for f in ids.split(",")]
    if "/" in fields[0]:
        name, _sep, version = fields[0].partition("/")
        others = fields[1:]
    else:
        if len(fields) < 2:
            return None
        name, version = fields[0], fields[1]
        others = fields[2:]
    kernel = others[0] if len(others) >= 1 else None
    arch = others[1] if len(others) >= 2 else None
    rest = rest.strip()
    warnings = [w.strip() for w in _WARNING_RE.findall(rest)]
    state_text = _WARNING_RE.sub("", rest).strip()
    state = state_text.split()[0] if state_text else None
    if not name or not version or not state:
        return None
    return {
        "name": name,
        "version": version,
        "kernel": kernel,
        "arch": arch,
        "state": state,
        "warning": "; ".join(warnings) if warnings else None,
        "warnings": warnings,
    }


def parse_status(text):
    """Parse ``dkms status`` output (both formats) into a list of entries:
    ``{name, version, kernel, arch, state, warning, warnings}``. ``kernel``/``arch`` are None
    for ``added``; ``warning`` joins the parenthesised warnings with ``; `` (None if none)."""
    entries = []
    for line in (text or "").splitlines():
        entry = parse_status_line(line)
        if entry is not None:
            entries.append(entry)
    return entries


def find_entry(entries, name, version, kernel, arch=None):
    """The entry for one module/version/kernel (and arch when given), else None."""
    for entry in entries:
        if (entry["name"] == name and entry["version"] == version
                and entry["kernel"] == kernel and (arch is None or entry["arch"] == arch)):
            return entry
    return None


def state_for(entries, name, version, kernel, arch=None):
    """``installed``, ``built``, ``added`` (known but not built for that kernel) or None."""
    entry = find_entry(entries, name, version, kernel, arch)
    if entry is not None:
        return entry["state"]
    for entry in entries:
        if entry["name"] == name and entry["version"] == version:
            return "added"
    return None

# --------------------------------------------------------------------------- dkms.conf


def read_conf(root, name, version, kernel=None):
    """Parsed dkms.conf of an added module (through its ``source`` link), or None."""
    path = resolve_under(root, "%s/%s/%s/source/dkms.conf" % (DKMS_TREE, name, version))
    try:
        with hostfs.open_read(path, "r", encoding="utf-8", errors="replace") as handle:
            return parse_conf(handle.read(), kernel)
    except (IOError, OSError, TypeError):
        return None


# --------------------------------------------------------------------------- tree reader


def _find_ko(folder, module):
    for suffix in MODULE_SUFFIXES:
        path = os.path.join(folder, module + suffix)
        if hostfs.isfile(path):
            return path
    return None


def _listdir(path):
    try:
        return sorted(hostfs.listdir(path))
    except OSError:
        return []


def _built_names(root, name, version, kernel, arch):
    """Module names dkms expects in the built tree (dkms.conf; else what is there)."""
    conf = read_conf(root, name, version, kernel)
    if conf and conf["modules"]:
        return [m["dest"] for m in conf["modules"]], conf
    folder = host_path(root, "%s/%s/%s/%s/%s/module" % (DKMS_TREE, name, version, kernel, arch))
    names = []
    for entry in _listdir(folder):
        for suffix in MODULE_SUFFIXES:
            if entry.endswith(suffix):
                names.append(entry[: -len(suffix)])
                break
    return names, conf


def _dest_locations(conf_module):
    locations = [DEBIAN_DEST]
    if conf_module and conf_module.get("location"):
        locations.append("/" + conf_module["location"].strip("/"))
    for extra in ("/updates", "/extra", "/kernel/drivers/video"):
        if extra not in locations:
            locations.append(extra)
    return locations


def installed_modules(root, name, version, kernel):
    """Host paths of the ``.ko`` files (``.ko``, ``.ko.xz``, ``.ko.zst``) this DKMS module
    has under ``/lib/modules/<kernel>``: ``/updates/dkms`` first, then the dkms.conf
    ``DEST_MODULE_LOCATION``. Module names come from dkms.conf, else from the built tree."""
    conf = read_conf(root, name, version, kernel)
    if conf and conf["modules"]:
        wanted = conf["modules"]
    else:
        arches = _listdir(host_path(root, "%s/%s/%s/%s" % (DKMS_TREE, name, version, kernel)))
        names = []
        for arch in arches:
            names.extend(_built_names(root, name, version, kernel, arch)[0])
        wanted = [{"dest": n, "location": ""} for n in sorted(set(names))]
    found = []
    lib = host_path(root, "/lib/modules/%s" % kernel)
    for module in wanted:
        for location in _dest_locations(module):
            path = _find_ko(lib + location, module["dest"])
            if path:
                found.append("/" + os.path.relpath(path, os.path.abspath(root or "/")))
                break
    return found


_SAMPLE = 1 << 20


def _same_bytes(path_a, path_b):
    """Whether the built and the installed module look identical: same size, same first and
    last MiB. An NVIDIA .ko is 50-100 MB per kernel; reading it whole on every audit of every
    host costs more than the warning is worth, and a rebuild or re-sign changes the size or
    the signature at the end."""
    try:
        size = hostfs.getsize(path_a)
        if size != hostfs.getsize(path_b):
            return False
        with hostfs.open_read(path_a, "rb") as a, hostfs.open_read(path_b, "rb") as b:
            if a.read(_SAMPLE) != b.read(_SAMPLE):
                return False
            if size > 2 * _SAMPLE:
                a.seek(-_SAMPLE, os.SEEK_END)
                b.seek(-_SAMPLE, os.SEEK_END)
                return a.read() == b.read()
            return a.read() == b.read()
    except (IOError, OSError):
        return False


def wording(root="/"):
    """``WARNINGS``' key for the dkms installed under ``root``: ``3.2`` for dkms 3.1 and
    later (only 3.0.10 and 3.2.2 are checked), else ``3.0`` (also when dpkg's status has
    no dkms: a tree without it keeps the wording tree_status always had)."""
    _package, version = package_version(root, "dkms")
    match = re.match(r"^(\d+)\.(\d+)", version or "")
    if match and (int(match.group(1)), int(match.group(2))) >= (3, 1):
        return "3.2"
    return "3.0"


def tree_status(root="/"):
    """What ``dkms status`` would print, read from ``/var/lib/dkms`` under ``root`` without
    running dkms. Same entries as ``parse_status`` plus ``modules`` (installed ``.ko`` host
    paths, for installed entries). Warnings in the installed dkms' words (``WARNINGS``,
    ``wording``: read only when there is one to word): the original module kept, the
    installed copy differing from the built one (also when it is missing)."""
    tree = host_path(root, DKMS_TREE)
    entries = []
    words = {}
    for name in _listdir(tree):
        mod_dir = os.path.join(tree, name)
        if not hostfs.isdir(mod_dir) or hostfs.islink(mod_dir):
            continue
        versions = [v for v in _listdir(mod_dir)
                    if not v.startswith("kernel-") and v != "original_module"
                    and hostfs.isdir(os.path.join(mod_dir, v))]
        for version in sorted(versions, key=version_key):
            vdir = os.path.join(mod_dir, version)
            source = os.path.join(vdir, "source")
            if not (hostfs.islink(source) or hostfs.isdir(source)):
                continue
            built_any = False
            kernels = [k for k in _listdir(vdir)
                       if _KERNEL_DIR_RE.match(k) and hostfs.isdir(os.path.join(vdir, k))]
            for kernel in sorted(kernels, key=kernel_sort_key):
                for arch in _listdir(os.path.join(vdir, kernel)):
                    entry = _tree_entry(root, name, version, kernel, arch, words)
                    if entry is not None:
                        built_any = True
                        entries.append(entry)
            if not built_any:
                entries.append({"name": name, "version": version, "kernel": None,
                                "arch": None, "state": "added", "warning": None,
                                "warnings": [], "modules": []})
    return entries


def _word(root, words, kind):
    """The warning ``kind`` in the root's dkms words; ``words`` caches the lookup."""
    if "key" not in words:
        words["key"] = wording(root)
    return WARNINGS[words["key"]][kind]


def _tree_entry(root, name, version, kernel, arch, words):
    base = host_path(root, "%s/%s/%s/%s/%s" % (DKMS_TREE, name, version, kernel, arch))
    module_dir = os.path.join(base, "module")
    if not hostfs.isdir(module_dir):
        return None
    names, conf = _built_names(root, name, version, kernel, arch)
    if not names:
        return None
    built = {n: _find_ko(module_dir, n) for n in names}
    if not all(built.values()):
        # dkms: is_module_built fails, the kernel does not show at all
        return None
    link = host_path(root, "%s/%s/kernel-%s-%s" % (DKMS_TREE, name, kernel, arch))
    installed = False
    if hostfs.islink(link):
        target = resolve_under(root, "%s/%s/kernel-%s-%s" % (DKMS_TREE, name, kernel, arch))
        installed = target is not None and hostfs.realpath(target) == hostfs.realpath(base)
    warnings = []
    if hostfs.isdir(host_path(root, "%s/%s/original_module/%s/%s"
                              % (DKMS_TREE, name, kernel, arch))):
        warnings.append(_word(root, words, "original"))
    modules = []
    if installed:
        conf_modules = {m["dest"]: m for m in (conf or {}).get("modules", [])}
        lib = host_path(root, "/lib/modules/%s" % kernel)
        for module in names:
            dest = None
            for location in _dest_locations(conf_modules.get(module)):
                dest = _find_ko(lib + location, module)
                if dest:
                    break
            if dest:
                modules.append("/" + os.path.relpath(dest, os.path.abspath(root or "/")))
            if not dest or not _same_bytes(built[module], dest):
                diff = _word(root, words, "diff")
                if words["key"] == "3.0" or diff not in warnings:
                    warnings.append(diff)
    return {
        "name": name,
        "version": version,
        "kernel": kernel,
        "arch": arch,
        "state": "installed" if installed else "built",
        "warning": "; ".join(warnings) if warnings else None,
        "warnings": warnings,
        "modules": modules,
    }


def known_versions(entries, name):
    """Versions of ``name`` in status entries, newest last."""
    return sorted({e["version"] for e in entries if e["name"] == name}, key=version_key)


# --------------------------------------------------------------------------- build/install


def status(runner, name=None, version=None, kernel=None, dkms="dkms"):
    """Run ``dkms status`` (optionally narrowed) and parse it."""
    args = [dkms, "status"]
    if name:
        args += ["-m", name]
        if version:
            args += ["-v", version]
    if kernel:
        args += ["-k", kernel]
    _rc, out, _err = runner.run(args, hint="is dkms installed?", timeout=QUERY_TIMEOUT_S)
    return parse_status(out)


def installed_basis(entries, running, next_boot):
    """Which DKMS modules the kernel ``next_boot`` needs: ``({name: version}, {name: kernel})``.

    The modules installed for the running kernel; when it has none (booted from outside this
    root: a container, a VM with a direct kernel boot, a capture; or a kernel DKMS never
    built for), those installed for any kernel but ``next_boot`` stand in, per name the
    version of the newest such kernel. The second dict names the kernel each was found on.
    ``entries``: ``tree_status`` or parsed ``dkms status``."""
    on_running = {}
    for entry in entries:
        if running and entry["kernel"] == running and entry["state"] == "installed":
            on_running[entry["name"]] = entry["version"]
    if on_running:
        return on_running, dict((name, running) for name in on_running)
    found = {}
    for entry in entries:
        kernel = entry["kernel"]
        if entry["state"] != "installed" or not kernel or kernel == next_boot:
            continue
        old = found.get(entry["name"])
        key = kernel_sort_key(kernel)
        if old is None or key > kernel_sort_key(old[1]):
            found[entry["name"]] = (entry["version"], kernel)
    return (dict((name, v[0]) for name, v in found.items()),
            dict((name, v[1]) for name, v in found.items()))


def needed_modules(entries, running, next_boot):
    """The names of the DKMS modules kernel ``next_boot`` needs (see ``installed_basis``),
    sorted: one rule for the audit's DKMS finding and role kernel_upgrade's gate."""
    return sorted(installed_basis(entries, running, next_boot)[0])


def coverage(root="/", names=None, entries=None):
    """For every installed kernel and every DKMS module (``names``, default all the tree
    knows), the newest version's state there - the reboot gate: a kernel the host may boot
    whose NVIDIA module is not installed leaves the GPUs without a driver.

    Returns a list of ``{kernel, name, version, state, warning, headers, headers_package,
    ok}`` sorted by kernel then name; ``ok`` is True when the state is ``installed`` with
    no warning. ``entries`` defaults to ``tree_status(root)`` (pass parsed ``dkms status``
    output on a live host).
    """
    entries = tree_status(root) if entries is None else entries
    wanted = sorted(set(names) if names else {e["name"] for e in entries})
    out = []
    for release in installed_kernels(root):
        for name in wanted:
            versions = known_versions(entries, name)
            version = versions[-1] if versions else None
            entry = find_entry(entries, name, version, release) if version else None
            state = entry["state"] if entry else ("added" if version else None)
            warning = entry["warning"] if entry else None
            out.append({
                "kernel": release,
                "name": name,
                "version": version,
                "state": state,
                "warning": warning,
                "headers": has_headers(root, release),
                "headers_package": headers_package(release),
                "ok": state == "installed" and not warning,
            })
    return out
