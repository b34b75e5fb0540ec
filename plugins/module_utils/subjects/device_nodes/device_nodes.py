# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device nodes GPU containers need when they start: the ``device_nodes`` fact.

``/dev/nvidia-uvm`` (and ``nvidia-uvm-tools``, ``nvidia-modeset``, on a host without
nvidia-persistenced even ``/dev/nvidiaN`` and ``nvidiactl``) appear only when something
calls ``nvidia-modprobe`` (the first CUDA or ``nvidia-smi`` call does): containers started
at boot by ``pve-guests.service`` before that find them missing. A Proxmox 8.1+ ``devN:``
entry then stops the start (pve-container ``PVE::LXC::Tools::get_device_mode_and_rdev``:
"Device /dev/nvidia-uvm does not exist"); an ``lxc.mount.entry ... bind,optional`` starts
the container without the device (CUDA fails inside). What is read:

- the nodes every GPU container binds (``lxc.mount.entry`` sources under ``/dev/nvidia``,
  every ``devN:`` path): type and ``major:minor``, and for containers with
  ``features: nesting=1`` the ``/dev/char/<major>:<minor>`` links runc's systemd cgroup
  driver re-applies device rules through (nvidia-container-toolkit #48). Device nodes are
  not files a capture can carry (``unpack`` refuses them), so this is a listing kept with
  the command outputs (``/.gpuhost-capture/dev-nodes``): read from the live ``/dev``,
  stored in a capture, read back from the stored file elsewhere (a test tree is such a
  root). Its format, one node per line, the path last::

      c 195:0 /dev/nvidia0           character device, decimal major:minor
      - - /dev/nvidia-uvm            missing
      f - /dev/nvidia-uvm            another kind (f file, d folder, b block, o other)
      l ../nvidia0 /dev/char/195:0   a link and its target

- each ``devN:`` entry's ``gid=`` against the container's own ``/etc/group`` (its root
  file system as ``drift`` finds it, or ``/var/lib/lxc/<vmid>/rootfs`` while it runs);
- the systemd units ordered ``Before=pve-guests.service`` (and udev rules) that create the
  late nodes, by their ``ExecStart``/``RUN`` commands, and whether each unit is enabled.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat as _stat

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import container_driver
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path

OUTPUT_NAME = "dev-nodes"
UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
UDEV_DIRS = ("/etc/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d")
MAX_UNITS = 4000        # unit files looked at per folder (a bounded read)
MAX_PATHS = 512         # nodes listed
UNIT_NAME = "gpuhost-nvidia-device-nodes.service"

# Node name -> the /proc/devices names its major comes from (195 is fixed: nvidia-frontend
# or nvidia), and whether it is one of the nodes nvidia-modprobe creates late.
_DRIVERS = (
    (re.compile(r"^/dev/nvidia(\d+|ctl|-modeset)$"), ("nvidia-frontend", "nvidia"), 195),
    (re.compile(r"^/dev/nvidia-uvm(-tools)?$"), ("nvidia-uvm",), None),
    (re.compile(r"^/dev/nvidia-caps/nvidia-cap\d+$"), ("nvidia-caps",), None),
    (re.compile(r"^/dev/nvidia-nvswitch(\d+|ctl)$"), ("nvidia-nvswitch",), None),
    (re.compile(r"^/dev/dri/(card|renderD)\d+$"), ("drm",), 226),
)
# What a command creates: nvidia-modprobe -u -c=0 (nvidia-uvm, nvidia-uvm-tools), -m
# (nvidia-modeset), -c=N without -u (nvidiaN, nvidiactl); nvidia-smi (every nvidiaN and
# nvidiactl, through nvidia-modprobe).
LATE = re.compile(r"^/dev/nvidia(\d+|ctl|-modeset|-uvm|-uvm-tools)$")


def expected_majors(path, char_majors):
    """``(driver names, majors)`` a node at ``path`` must have, or ``(None, None)`` for a
    node this module has no rule for; majors empty when the driver is not registered."""
    for pattern, names, fixed in _DRIVERS:
        if pattern.match(path):
            majors = []
            for name in names:
                for major in char_majors.get(name) or []:
                    if int(major) not in majors:
                        majors.append(int(major))
            if fixed is not None and majors and fixed not in majors:
                majors.append(fixed)
            return names, majors
    return None, None


def bound_paths(config):
    """``[{path, how, optional, options}]``: the nodes a container config binds (mount
    entries under /dev/nvidia, every devN path)."""
    out = []
    for entry in config.mount_entries():
        source = entry.get("source") or ""
        if not source.startswith("/dev/nvidia"):
            continue
        opts = (entry.get("options") or "").split(",")
        out.append({"path": source, "how": "lxc.mount.entry", "optional": "optional" in opts,
                    "folder": "create=dir" in opts, "options": {}})
    for dev in config.dev_entries():
        if dev.get("path"):
            out.append({"path": dev["path"], "how": dev["key"], "optional": False,
                        "folder": False, "options": dev.get("options") or {}})
    return out


def nesting(config):
    """True when the live config has ``features: ...nesting=1...``."""
    for part in (config.get("features") or "").split(","):
        name, _sep, value = part.strip().partition("=")
        if name == "nesting" and value.strip() == "1":
            return True
    return False


# --- the node listing --------------------------------------------------------------------


def _describe(root, path):
    full = host_path(root, path)
    if hostfs.islink(full):
        try:
            return "l %s %s" % (hostfs.readlink(full), path)
        except OSError:
            return "- - %s" % path
    try:
        st = hostfs.stat(full)
    except (OSError, ValueError):
        return "- - %s" % path
    mode = st.st_mode
    if _stat.S_ISCHR(mode) or _stat.S_ISBLK(mode):
        return "%s %d:%d %s" % ("c" if _stat.S_ISCHR(mode) else "b", os.major(st.st_rdev),
                                os.minor(st.st_rdev), path)
    kind = "f" if _stat.S_ISREG(mode) else "d" if _stat.S_ISDIR(mode) else "o"
    return "%s - %s" % (kind, path)


def listing(root, paths, char_links=True):
    """The listing text of ``paths`` under ``root`` (and, with ``char_links``, the
    ``/dev/char`` link of each character device found)."""
    lines = []
    seen = set()
    for path in paths[:MAX_PATHS]:
        if path in seen:
            continue
        seen.add(path)
        line = _describe(root, path)
        lines.append(line)
        if char_links and line.startswith("c "):
            link = "/dev/char/" + line.split()[1]
            if link not in seen:
                seen.add(link)
                lines.append(_describe(root, link))
    return "".join(line + "\n" for line in lines)


def parse_listing(text):
    """``{path: {kind, major, minor, target}}`` of a listing (lines not understood are
    skipped)."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        kind, value, path = parts
        item = {"kind": {"-": "missing"}.get(kind, kind), "major": None, "minor": None,
                "target": None}
        if kind in ("c", "b"):
            major, _sep, minor = value.partition(":")
            if not (major.isdigit() and minor.isdigit()):
                continue
            item["major"], item["minor"] = int(major), int(minor)
        elif kind == "l":
            item["target"] = value
        elif kind not in ("-", "f", "d", "o"):
            continue
        out[path] = item
    return out


# --- units and udev rules ----------------------------------------------------------------


def _creates(command):
    """The late node patterns one command line creates: ``uvm``, ``modeset``, ``gpus``."""
    words = command.replace("'", " ").replace('"', " ").replace(";", " ; ").replace(
        "&&", " ; ").split()
    made = set()
    for index, word in enumerate(words):
        base = word.rsplit("/", 1)[-1]
        if base == "nvidia-smi":
            made.add("gpus")
        elif base == "nvidia-modprobe":
            args = []
            for arg in words[index + 1:]:
                if arg == ";":
                    break
                args.append(arg)
            minor = any(re.match(r"^(-c|--create-nvidia-device-file)(=?\d+)?$", a)
                        for a in args)
            uvm = any(a in ("-u", "--unified-memory") for a in args)
            if uvm and minor:
                made.add("uvm")
            elif minor:
                made.add("gpus")
            if any(a in ("-m", "--modeset") for a in args):
                made.add("modeset")
    return made


def covers(made, path):
    """True when what a unit makes (``_creates``) includes the node ``path``."""
    name = path[len("/dev/"):]
    if name in ("nvidia-uvm", "nvidia-uvm-tools"):
        return "uvm" in made
    if name == "nvidia-modeset":
        return "modeset" in made
    return "gpus" in made


def _unit_values(text, key):
    out = []
    section = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section is None or line.startswith(("#", ";")) or "=" not in line:
            continue
        name, _sep, value = line.partition("=")
        if name.strip() == key:
            out.append(value.strip())
    return out


def _enabled_names(root):
    """Names of the units a ``*.wants`` or ``*.requires`` folder of /etc/systemd/system
    links (what ``systemctl enable`` made)."""
    names = set()
    base = host_path(root, "/etc/systemd/system")
    try:
        folders = hostfs.listdir(base)
    except OSError:
        return names
    for folder in folders:
        if not folder.endswith((".wants", ".requires")):
            continue
        try:
            names.update(hostfs.listdir(base + "/" + folder)[:MAX_UNITS])
        except OSError:
            continue
    return names


def node_units(root):
    """``[{name, path, before_guests, enabled, creates}]``: service units that run a
    command creating NVIDIA nodes (the first file of a name wins, /etc first; in the
    package folders only units named ``*nvidia*``), and udev rules that do (``enabled``
    true: udev reads every rules file)."""
    out = []
    seen = set()
    enabled = None
    for folder in UNIT_DIRS:
        try:
            names = sorted(hostfs.listdir(host_path(root, folder)))[:MAX_UNITS]
        except OSError:
            continue
        for name in names:
            if not name.endswith(".service") or name in seen:
                continue
            # the operator's own units are read whatever their name; packaged ones only
            # when they are NVIDIA's (nvidia-persistenced.service), so an audit does not
            # read (and a capture carry) every unit of the distribution
            if folder != UNIT_DIRS[0] and "nvidia" not in name:
                continue
            seen.add(name)
            path = host_path(root, folder + "/" + name)
            try:
                text = hostfs.read_text(path, default=None)
            except hostfs.HostFileError:
                continue
            if not text or "nvidia" not in text:
                continue
            made = set()
            for key in ("ExecStartPre", "ExecStart", "ExecStartPost"):
                for command in _unit_values(text, key):
                    made |= _creates(command)
            if not made:
                continue
            before = " ".join(_unit_values(text, "Before")).split()
            if enabled is None:
                enabled = _enabled_names(root)
            out.append({"name": name, "path": folder + "/" + name,
                        "before_guests": "pve-guests.service" in before,
                        "enabled": name in enabled, "creates": sorted(made)})
    for folder in UDEV_DIRS:
        try:
            names = sorted(hostfs.listdir(host_path(root, folder)))[:MAX_UNITS]
        except OSError:
            continue
        for name in names:
            if not name.endswith(".rules") or name in seen:
                continue
            if folder != UDEV_DIRS[0] and "nvidia" not in name:
                continue
            seen.add(name)
            try:
                text = hostfs.read_text(host_path(root, folder + "/" + name), default=None)
            except hostfs.HostFileError:
                continue
            made = set()
            for line in (text or "").splitlines():
                if line.lstrip().startswith("#"):
                    continue
                for match in re.finditer(r'RUN\+?="([^"]*)"', line):
                    made |= _creates(match.group(1))
            if made:
                out.append({"name": name, "path": folder + "/" + name,
                            "before_guests": True, "enabled": True, "creates": sorted(made)})
    return out


# --- the container's groups --------------------------------------------------------------


def parse_groups(text):
    """``{gid: name}`` of an ``/etc/group`` text."""
    out = {}
    for line in (text or "").splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[2].strip().isdigit():
            out.setdefault(int(fields[2]), fields[0])
    return out


def container_groups(root, vmid, config, stores):
    """``({gid: name} or None, where or why not)`` of the container's ``/etc/group``."""
    values = config.get_all("rootfs")
    fs_path, reason = container_driver.rootfs_path(values[0] if values else None, stores)
    running = "/var/lib/lxc/%s/rootfs" % vmid
    candidates = [p for p in (fs_path, running) if p]
    for base in candidates:
        path = base.rstrip("/") + "/etc/group"
        try:
            text = hostfs.read_text(host_path(root, path), default=None)
        except hostfs.HostFileError as exc:
            return None, str(exc)
        if text is not None:
            return parse_groups(text), path
    if fs_path:
        reason = "%s not mounted on the host (no etc/group)" % fs_path
    return None, reason or "root file system not found"


# --- the fact ----------------------------------------------------------------------------


def produce_listing(root, paths):
    """A ``cmdout`` producer: the listing of the live ``/dev`` (no command is run)."""
    def produce(_runner):
        return listing(root, paths), {"source": "live /dev", "error": None}
    return produce


def collect(root, outputs, config_dir, char_majors):
    """The ``device_nodes`` fact: ``{available, error, containers: [...], units: [...]}``.

    Each container: ``{vmid, onboot, nesting, nodes: [{path, how, optional, folder, kind,
    major, minor, driver, majors, char_link, gid, group}], groups_source, groups_note}``.
    ``available`` is false (and nothing judged) when the listing is neither live nor
    stored."""
    containers = []
    paths = []
    stores = None
    for vmid, path in lxc.list_configs(root, config_dir):
        config = lxc.LxcConfig.read(path)
        bound = bound_paths(config)
        if not bound:
            continue
        ct = {"vmid": vmid, "onboot": config.onboot, "nesting": nesting(config),
              "nodes": bound, "groups_source": None, "groups_note": None}
        if any("gid" in b["options"] for b in bound):
            if stores is None:
                stores = container_driver.storages(root)
            groups, where = container_groups(root, vmid, config, stores)
            if groups is None:
                ct["groups_note"] = where
            else:
                ct["groups_source"] = where
            for node in bound:
                gid = node["options"].get("gid")
                if gid is not None:
                    node["gid"] = gid
                    node["group"] = (groups or {}).get(int(gid)) if gid.isdigit() else None
        containers.append(ct)
        paths += [b["path"] for b in bound]
    out = {"available": False, "error": None, "source": None, "containers": containers,
           "units": []}
    if not containers:
        out["available"] = True
        return out
    text = outputs.get(OUTPUT_NAME, produce_listing(root, paths))
    info = outputs.info.get(OUTPUT_NAME) or {}
    out["source"] = info.get("source")
    if text is None:
        out["error"] = info.get("error") or "no device-node listing"
        return out
    nodes = parse_listing(text)
    for ct in containers:
        for node in ct["nodes"]:
            seen = nodes.get(node["path"])
            node.update({"kind": seen["kind"] if seen else None,
                         "major": seen["major"] if seen else None,
                         "minor": seen["minor"] if seen else None})
            names, majors = expected_majors(node["path"], char_majors or {})
            node["driver"] = names[0] if names else None
            node["majors"] = majors
            if seen and seen["kind"] == "c":
                link = nodes.get("/dev/char/%d:%d" % (seen["major"], seen["minor"]))
                node["char_link"] = _link_ok(link, node["path"])
    # units matter only for containers that start at boot and bind a late node
    if any(ct["onboot"] and any(LATE.match(n["path"]) for n in ct["nodes"])
           for ct in containers):
        out["units"] = node_units(root)
    out["available"] = True
    return out


def _link_ok(link, path):
    """``ok``, ``missing`` or ``wrong`` for a /dev/char link meant to name ``path``."""
    if link is None or link["kind"] == "missing":
        return "missing"
    if link["kind"] != "l":
        return "wrong"
    target = link["target"] or ""
    if target.startswith("/"):
        return "ok" if target == path else "wrong"
    parts = ["dev", "char"]
    for piece in target.split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece and piece != ".":
            parts.append(piece)
    return "ok" if "/" + "/".join(parts) == path else "wrong"
