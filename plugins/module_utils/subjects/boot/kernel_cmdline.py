# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel command line a host boots with: parse it and find the file it lives in (editing
it is in subjects/boot/kernel_cmdline_write.py).

Backends:

- ``systemd-boot``: ``/etc/kernel/cmdline``, one line, read by ``proxmox-boot-tool`` (Proxmox
  VE with ESPs listed in ``/etc/kernel/proxmox-boot-uuids``) and by ``kernel-install``. For
  proxmox-boot-tool it must hold ``root=`` (missing file: it falls back to /proc/cmdline).
- ``grub``: ``GRUB_CMDLINE_LINUX_DEFAULT`` in ``/etc/default/grub``, possibly overridden
  by ``/etc/default/grub.d/*.cfg`` (sourced after it, in name order; the last assignment
  wins, and a drop-in may extend it with ``$GRUB_CMDLINE_LINUX_DEFAULT``). Parameters
  already in ``GRUB_CMDLINE_LINUX`` are replaced or removed there; new ones go to the
  effective ``GRUB_CMDLINE_LINUX_DEFAULT``. Every other byte is kept.

Nothing here runs the refresh (``proxmox-boot-tool refresh``, ``update-grub``,
``kernel-install``): callers report ``refresh_required`` and the command.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host.procfs import (
    split_cmdline,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

KERNEL_CMDLINE = "/etc/kernel/cmdline"
PBT_UUIDS = "/etc/kernel/proxmox-boot-uuids"
GRUB_DEFAULT = "/etc/default/grub"
GRUB_D = "/etc/default/grub.d"
GRUB_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
LOADER_CONFS = ("/boot/efi/loader/loader.conf", "/efi/loader/loader.conf",
                "/boot/loader/loader.conf")
BACKENDS = ("auto", "systemd-boot", "grub")


class BootConfigError(Exception):
    """The boot configuration cannot be read or edited as asked."""


# --------------------------------------------------------------------------- tokens


def tokenize(cmdline):
    """Split a command line like the kernel does: on whitespace, except inside double
    quotes (``param="a b"`` is one token). Tokens keep their quotes. A file we are about to
    edit must have balanced quotes."""
    if (cmdline or "").count('"') % 2:
        raise BootConfigError("unbalanced double quote in kernel command line: %s" % cmdline)
    return split_cmdline(cmdline or "")


def split_token(token):
    """``(name, value)``; value None for a flag; quotes around the value are removed
    (``a="b c"`` -> ``("a", "b c")``), as is a quote around the whole token."""
    if token.startswith('"') and token.endswith('"') and len(token) >= 2:
        token = token[1:-1]
    name, sep, value = token.partition("=")
    if not sep:
        return name, None
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return name, value


def norm_name(name):
    """Parameter names compare with ``-`` and ``_`` as the same (kernel ``parameq``)."""
    return (name or "").replace("-", "_")


def parse(cmdline):
    """List of ``(name, value)`` in order (value None for flags)."""
    return [split_token(t) for t in tokenize(cmdline)]


def get(cmdline, name):
    """The last value of ``name`` (what the kernel uses), True for a flag, None if absent."""
    found = None
    for key, value in parse(cmdline):
        if norm_name(key) == norm_name(name):
            found = True if value is None else value
    return found


def has_root(cmdline):
    return any(key == "root" for key, _v in parse(cmdline))


def format_value(value):
    """Ansible/YAML value -> kernel text: True -> flag (None), False -> ``off`` (YAML's
    unquoted off/no/false), numbers as strings."""
    if value is True:
        return None
    if value is False:
        return "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_UNSAFE_VALUE = re.compile(r"[\x00-\x1f\x7f$`\\'\";]")


def validate(params, absent):
    """Refuse edits that can only be mistakes; raise BootConfigError."""
    params = params or {}
    absent = absent or []
    for name in params:
        if not name or any(c.isspace() or c in "\"'" for c in str(name)) or "=" in str(name):
            raise BootConfigError("invalid kernel parameter name %r" % name)
    for spec in absent or []:
        if not spec or any(c.isspace() for c in spec.split("=", 1)[0]):
            raise BootConfigError("invalid kernel parameter in absent: %r" % spec)
        if spec.split("=", 1)[0] == "root":
            raise BootConfigError("refusing to remove root= from the kernel command line: the "
                                  "host would not find its root file system")
    for name, value in params.items():
        if name in absent:
            raise BootConfigError("%s is both in params and in absent" % name)
        if isinstance(value, (dict,)):
            raise BootConfigError("value of %s must be a string, number, true, false/null or "
                                  "a list, not a mapping" % name)
        values = value if isinstance(value, (list, tuple)) else [value]
        if name == "root" and any(v is None or isinstance(v, bool) for v in values):
            raise BootConfigError("refusing to remove root= from the kernel command line (root: "
                                  "%r): the host would not find its root file system" % (value,))
        for item in values:
            if isinstance(item, str) and _UNSAFE_VALUE.search(item):
                raise BootConfigError(
                    "value of %s (%r) holds a newline, quote, backslash, '$', '`' or ';': a "
                    "kernel parameter never needs them, and GRUB's files are sourced by a shell"
                    % (name, item))


# --------------------------------------------------------------------------- detection


def parse_pbt_status(text):
    """Modes from ``proxmox-boot-tool status``: list of ``(uuid, mode)``, mode ``uefi``
    (systemd-boot) or ``grub``."""
    found = []
    for line in (text or "").splitlines():
        match = re.match(r"^\s*(\S+) is configured with: (\w+)", line)
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def _exists(root, path):
    return hostfs.exists(host_path(root, path))


def boot_tool(root="/"):
    """Which tool turns the configuration into boot entries: ``proxmox-boot-tool``,
    ``kernel-install`` (systemd-boot without Proxmox), ``grub`` or ``unknown``."""
    if _exists(root, PBT_UUIDS):
        return "proxmox-boot-tool"
    if _exists(root, KERNEL_CMDLINE) or any(_exists(root, p) for p in LOADER_CONFS):
        return "kernel-install"
    if _exists(root, GRUB_DEFAULT) or _exists(root, "/boot/grub/grub.cfg"):
        return "grub"
    return "unknown"


def detect_backend(root="/", runner=None):
    """``{"backend": "systemd-boot"|"grub", "tool": ..., "reason": ...}``.

    ``/etc/kernel/proxmox-boot-uuids`` or ``/etc/kernel/cmdline`` present: systemd-boot
    (proxmox-boot-tool or kernel-install), else GRUB. With a ``runner`` (pass one only for
    the live host, ``root=/``), ``proxmox-boot-tool status`` decides, since proxmox-boot-tool also
    manages GRUB ESPs (legacy BIOS); offline, a proxmox-boot-tool host without
    ``/etc/kernel/cmdline`` and without ``/sys/firmware/efi`` is taken as GRUB.
    """
    tool = boot_tool(root)
    if tool == "proxmox-boot-tool":
        if runner is not None and runner.which("proxmox-boot-tool"):
            rc, out, _err = runner.run(["proxmox-boot-tool", "status"], check=False,
                                       timeout=QUERY_TIMEOUT_S)
            modes = {mode for _uuid, mode in parse_pbt_status(out)} if rc == 0 else set()
            if modes == {"grub"}:
                return {"backend": "grub", "tool": tool,
                        "reason": "proxmox-boot-tool status: ESPs configured with grub"}
            if "uefi" in modes:
                return {"backend": "systemd-boot", "tool": tool,
                        "reason": "proxmox-boot-tool status: ESPs configured with uefi"}
        if _exists(root, KERNEL_CMDLINE) or hostfs.isdir(host_path(root, "/sys/firmware/efi")):
            return {"backend": "systemd-boot", "tool": tool,
                    "reason": "%s present" % PBT_UUIDS}
        return {"backend": "grub", "tool": tool,
                "reason": "%s present, booted without EFI: proxmox-boot-tool manages GRUB"
                          % PBT_UUIDS}
    if tool == "kernel-install":
        return {"backend": "systemd-boot", "tool": tool,
                "reason": "%s or a systemd-boot loader.conf present" % KERNEL_CMDLINE}
    return {"backend": "grub", "tool": "grub" if tool == "grub" else "unknown",
            "reason": "no %s and no %s" % (PBT_UUIDS, KERNEL_CMDLINE)}


# --------------------------------------------------------------------------- systemd-boot


def proc_cmdline_base(root):
    """/proc/cmdline without what the boot loader adds (``BOOT_IMAGE=``, ``initrd=``)."""
    text = read_text(host_path(root, "/proc/cmdline")) or ""
    tokens = [t for t in tokenize(text)
              if split_token(t)[0] not in ("BOOT_IMAGE", "initrd")]
    return " ".join(tokens)


# --------------------------------------------------------------------------- GRUB

_ASSIGN_RE = re.compile(
    r"^(?P<lead>\s*(?:export\s+)?(?P<var>GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s#;\"']*)(?P<trail>.*)$")


def _unquote_shell(value):
    """-> (text, style) for a single shell word as written in /etc/default/grub."""
    if value.startswith('"'):
        inner = value[1:-1]
        return re.sub(r'\\(["\\$`])', r"\1", inner), '"'
    if value.startswith("'"):
        return value[1:-1], "'"
    return value, ""


def grub_files(root):
    """``/etc/default/grub`` then the ``grub.d/*.cfg`` drop-ins in the order GRUB sources
    them (host paths that exist)."""
    files = []
    if hostfs.isfile(host_path(root, GRUB_DEFAULT)):
        files.append(GRUB_DEFAULT)
    folder = host_path(root, GRUB_D)
    try:
        names = sorted(hostfs.listdir(folder))
    except OSError:
        names = []
    for name in names:
        if name.endswith(".cfg") and hostfs.isfile(os.path.join(folder, name)):
            files.append("%s/%s" % (GRUB_D, name))
    return files


def grub_assignments(text):
    """``[(line_index, var, value_text, style, match)]`` for the cmdline variables."""
    found = []
    lines = text.splitlines(True)
    for index, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            continue
        match = _ASSIGN_RE.match(line.rstrip("\r\n"))
        if not match:
            if re.match(r"^\s*(?:export\s+)?GRUB_CMDLINE_LINUX(?:_DEFAULT)?=", line):
                raise BootConfigError(
                    "cannot parse %r (multi-line or unbalanced quotes): edit it by hand"
                    % line.strip())
            continue
        value, style = _unquote_shell(match.group("value"))
        found.append((index, match.group("var"), value, style, match))
    return found


def _expand(value, env):
    return re.sub(r"\$\{?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)\}?",
                  lambda m: env.get(m.group(1), ""), value)


def grub_effective(root, files_text=None, files=None):
    """Effective ``{GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT}`` after sourcing every
    file in order (``files``: host paths, default those that exist)."""
    env = {var: "" for var in GRUB_VARS}
    for path in files if files is not None else grub_files(root):
        text = (files_text or {}).get(path)
        if text is None:
            with hostfs.open_read(host_path(root, path), "r", encoding="utf-8",
                                  newline="") as handle:
                text = handle.read()
        for _i, var, value, _s, _m in grub_assignments(text):
            env[var] = " ".join(_expand(value, env).split())
    return env


def _grub_cmdline(env):
    return " ".join(p for p in (env["GRUB_CMDLINE_LINUX"], env["GRUB_CMDLINE_LINUX_DEFAULT"])
                    if p)


# --------------------------------------------------------------------------- both


def configured_cmdline(root="/", runner=None):
    """The command line the next boot entries will carry (None when unknown): the content
    of ``/etc/kernel/cmdline`` for systemd-boot, the effective GRUB variables for GRUB."""
    return read_config(root, runner)["cmdline"]


def read_config(root="/", runner=None):
    """``{backend, tool, reason, cmdline, source}`` for the audit."""
    detected = detect_backend(root, runner)
    cmdline = None
    source = None
    try:
        if detected["backend"] == "systemd-boot":
            text = read_text(host_path(root, KERNEL_CMDLINE))
            if text is not None:
                cmdline, source = " ".join(text.split()), KERNEL_CMDLINE
            else:
                cmdline = proc_cmdline_base(root) or None
                source = "/proc/cmdline (%s missing)" % KERNEL_CMDLINE
        elif grub_files(root):
            cmdline = _grub_cmdline(grub_effective(root))
            source = ", ".join(grub_files(root))
    except (BootConfigError, OSError, UnicodeDecodeError):
        cmdline = None
    detected.update({"cmdline": cmdline, "source": source})
    return detected
