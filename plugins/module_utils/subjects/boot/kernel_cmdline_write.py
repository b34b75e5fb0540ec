# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Editing the kernel command line a host boots with: plan the new line in the file it lives
in (``/etc/kernel/cmdline`` or GRUB's files), write it with every other byte kept, and verify
it; the kernel_cmdline module and the boot_config role.

Nothing here runs the refresh (``proxmox-boot-tool refresh``, ``update-grub``,
``kernel-install``): callers report ``refresh_required`` and the command. Parsing and reading
is subjects/boot/kernel_cmdline.py's; the audit imports only that (docs/architecture.md, "What the
audit
imports")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    atomic_write,
    host_path,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernel_cmdline import (
    BACKENDS,
    BootConfigError,
    GRUB_D,
    GRUB_DEFAULT,
    GRUB_VARS,
    KERNEL_CMDLINE,
    LOADER_CONFS,
    PBT_UUIDS,
    _grub_cmdline,
    detect_backend,
    format_value,
    get,
    grub_assignments,
    grub_effective,
    grub_files,
    has_root,
    norm_name,
    parse,
    proc_cmdline_base,
    split_token,
    tokenize,
    validate,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernels import (
    installed_kernels,
)


def format_param(name, value):
    text = format_value(value)
    if text is None:
        return name
    if any(c.isspace() for c in text) and not (text.startswith('"') and text.endswith('"')):
        text = '"%s"' % text
    return "%s=%s" % (name, text)


def _matches_absent(token, spec):
    name, value = split_token(token)
    spec_name, sep, spec_value = spec.partition("=")
    if norm_name(name) != norm_name(spec_name):
        return False
    if not sep:
        return True
    return (value or "") == spec_value.strip('"')


def apply(cmdline, params=None, absent=None, add=True):
    """Return ``cmdline`` with ``params`` set and ``absent`` removed.

    ``params``: name -> value; True makes a flag (``quiet``), False is ``off`` (YAML's
    unquoted off/no/false), None removes, numbers become strings, a list sets repeated
    parameters (``console``) in that order. A present parameter is replaced where it stands
    (later duplicates are dropped); a new one goes to the end (before a ``--`` that starts
    init's arguments). ``absent``: names, or ``name=value`` to remove only that pair. With
    ``add=False`` nothing new is added (used for GRUB_CMDLINE_LINUX, where only present
    parameters are touched). Everything not asked about is kept in order; when nothing
    changes the string is returned as is.
    """
    params = dict(params or {})
    absent = list(absent or [])
    validate(params, absent)
    tokens = tokenize(cmdline)
    try:
        dash = tokens.index("--")
        head, tail = tokens[:dash], tokens[dash:]
    except ValueError:
        head, tail = tokens, []
    wanted = {}
    for name, value in params.items():
        if value is None:
            absent.append(name)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        wanted[norm_name(name)] = [format_param(name, v) for v in values if v is not None]
    out = []
    placed = set()
    for token in head:
        name = norm_name(split_token(token)[0])
        if any(_matches_absent(token, spec) for spec in absent):
            continue
        if name in wanted:
            if name not in placed:
                out.extend(wanted[name])
                placed.add(name)
            continue
        out.append(token)
    if add:
        for name, new in wanted.items():
            if name not in placed:
                out.extend(new)
    result = out + tail
    if result == tokens:
        return cmdline
    return " ".join(result)


def refresh_commands(backend, tool, kernels=None):
    """What the user must run after an edit (never run here)."""
    if tool == "proxmox-boot-tool":
        return [["proxmox-boot-tool", "refresh"]]
    if backend == "grub":
        return [["update-grub"]]
    return [["kernel-install", "add", k, "/boot/vmlinuz-%s" % k] for k in (kernels or [])] or [
        ["kernel-install", "add", "<kernel>", "/boot/vmlinuz-<kernel>"]]


def plan_systemd_boot(root, params, absent, tool="proxmox-boot-tool"):
    path = host_path(root, KERNEL_CMDLINE)
    raw = None
    if hostfs.isfile(path):
        with hostfs.open_read(path, "r", encoding="utf-8", newline="") as handle:
            raw = handle.read()
    if raw is not None:
        lines = [line for line in raw.splitlines() if line.strip()]
        if len(lines) > 1:
            raise BootConfigError(
                "%s holds %d non-empty lines; it must be one line: fix it by hand first"
                % (KERNEL_CMDLINE, len(lines)))
        before = lines[0].strip() if lines else ""
        source = KERNEL_CMDLINE
    else:
        before = proc_cmdline_base(root)
        source = "/proc/cmdline (%s missing)" % KERNEL_CMDLINE
    after = apply(before, params, absent)
    if tool == "proxmox-boot-tool" and not has_root(after):
        raise BootConfigError(
            "the new %s would have no root= parameter (%r): proxmox-boot-tool boots with it "
            "as is and the host would not find its root file system; put root=... in it "
            "(see /proc/cmdline)" % (KERNEL_CMDLINE, after))
    content_after = after + "\n"
    changed = raw is None or (after != before)
    if raw is not None and after == before:
        content_after = raw
    return {
        "before": before,
        "after": after,
        "source": source,
        "files": [{
            "path": KERNEL_CMDLINE,
            "content_before": raw if raw is not None else "",
            "content_after": content_after,
            "changed": changed,
            "exists": raw is not None,
        }],
    }


def _quote_shell(text, style):
    if style == "'" and "'" not in text:
        return "'%s'" % text
    if style == "" and text and not re.search(r"[\s\"'\\;#`]", text):
        return text
    # double quotes: escape what the shell would otherwise eat; keep $VAR references
    return '"%s"' % re.sub(r'(["\\`])', r"\\\1", text)


def _live_assignments(files, texts):
    """``{(path, line_index)}`` of the assignments that reach the kernel: an assignment
    that does not extend its variable (``$VAR``) makes every earlier one of that variable
    dead text."""
    live = {var: [] for var in GRUB_VARS}
    for path in files:
        for index, var, value, _s, _m in grub_assignments(texts[path]):
            if not re.search(r"\$\{?%s\}?(?![A-Z_])" % var, value):
                live[var] = []
            live[var].append((path, index))
    return {key for keys in live.values() for key in keys}, live


def no_loader_message(root):
    """What was looked for and what to do, when ``root`` has no boot loader configuration
    (a VM whose hypervisor boots the kernel directly, a container)."""
    return ("no boot loader configuration under %s: looked for %s and a systemd-boot "
            "loader.conf (%s; kernel-install), %s (proxmox-boot-tool) and %s or %s/*.cfg "
            "(GRUB), and found none. A VM booted directly by its hypervisor or a container "
            "has none: set the kernel command line where it is booted (the hypervisor's VM "
            "config, the container host). On a host that boots through a loader, create its "
            "file and set the backend: kernel_cmdline option backend=systemd-boot or "
            "backend=grub (role variable gpuhost_boot_config_backend)"
            % (root, KERNEL_CMDLINE, ", ".join(LOADER_CONFS), PBT_UUIDS, GRUB_DEFAULT, GRUB_D))


def plan_grub(root, params, absent, grub_file=None, requested=False):
    """Edit the GRUB files. Present parameters are replaced or removed where they stand in
    the assignments that reach the kernel; new ones go to the last (effective)
    ``GRUB_CMDLINE_LINUX_DEFAULT`` assignment, or to ``grub_file`` (a drop-in, created
    extending the variable when it has no assignment)."""
    files = grub_files(root)
    texts = {}
    for path in files:
        with hostfs.open_read(host_path(root, path), "r", encoding="utf-8", newline="") as handle:
            texts[path] = handle.read()
    if grub_file and not grub_file.startswith("/"):
        grub_file = "%s/%s" % (GRUB_D, grub_file)
    if grub_file and grub_file not in texts:
        if not grub_file.startswith(GRUB_D + "/") or not grub_file.endswith(".cfg"):
            raise BootConfigError("grub_file %s must be %s or a %s/*.cfg drop-in"
                                  % (grub_file, GRUB_DEFAULT, GRUB_D))
        texts[grub_file] = ""
        files = sorted(set(files + [grub_file]), key=lambda p: (p != GRUB_DEFAULT, p))
    if not files:
        if requested:
            raise BootConfigError(
                "backend=grub: no %s and no %s/*.cfg under %s: install GRUB's configuration "
                "(package grub-pc or grub-efi-amd64) or choose the backend this host boots "
                "with (kernel_cmdline option backend; role variable "
                "gpuhost_boot_config_backend)" % (GRUB_DEFAULT, GRUB_D, root))
        raise BootConfigError(no_loader_message(root))
    before = _grub_cmdline(grub_effective(root, texts, [f for f in files if texts[f]]))
    live, by_var = _live_assignments(files, texts)
    # names already present in what reaches the kernel are edited in place, not added
    present = set()
    for path, index in live:
        for entry in grub_assignments(texts[path]):
            if entry[0] == index:
                present.update(norm_name(n) for n, _v in parse(entry[2]))
    to_add = {n: v for n, v in (params or {}).items() if norm_name(n) not in present}
    to_edit = {n: v for n, v in (params or {}).items() if norm_name(n) in present}
    if grub_file:
        target = grub_file
        target_index = None
        for entry in grub_assignments(texts[grub_file]):
            if entry[1] == "GRUB_CMDLINE_LINUX_DEFAULT":
                target_index = entry[0]
    elif by_var["GRUB_CMDLINE_LINUX_DEFAULT"]:
        target, target_index = by_var["GRUB_CMDLINE_LINUX_DEFAULT"][-1]
    else:
        target, target_index = files[-1] if GRUB_DEFAULT not in files else GRUB_DEFAULT, None
    new_texts = {}
    for path in files:
        text = texts[path]
        lines = text.splitlines(True)
        for index, _var, value, style, match in grub_assignments(text):
            is_target = path == target and index == target_index
            if (path, index) not in live and not is_target:
                continue
            new_value = apply(value, to_edit, absent, add=False)
            if is_target:
                new_value = apply(new_value, to_add, [], add=True)
            if new_value == value:
                continue
            line = lines[index]
            ending = line[len(line.rstrip("\r\n")):]
            lines[index] = "%s%s%s%s" % (match.group("lead"), _quote_shell(new_value, style),
                                         match.group("trail"), ending)
        if path == target and target_index is None and to_add:
            extra = apply("$GRUB_CMDLINE_LINUX_DEFAULT", to_add, [])
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            if not text:
                lines.append("# Kernel parameters set by gpuhost.tuning.kernel_cmdline\n")
            lines.append("GRUB_CMDLINE_LINUX_DEFAULT=%s\n" % _quote_shell(extra, '"'))
        new_texts[path] = "".join(lines)
    after = _grub_cmdline(grub_effective(root, new_texts, files))
    result_files = []
    for path in files:
        result_files.append({
            "path": path,
            "content_before": texts[path],
            "content_after": new_texts[path],
            "changed": new_texts[path] != texts[path],
            "exists": hostfs.isfile(host_path(root, path)),
        })
    return {"before": before, "after": after, "source": target, "files": result_files}


def verify(cmdline, params, absent, where):
    """Raise when ``cmdline`` does not carry what was asked (e.g. a later GRUB drop-in
    overrides the file edited)."""
    for name, value in (params or {}).items():
        if value is None:
            if get(cmdline, name) is not None:
                raise BootConfigError("%s would still be set in the effective command line "
                                      "(%s): %s" % (name, where, cmdline))
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        text = format_value(values[-1])
        got = get(cmdline, name)
        if (text is None and got is not True) or (text is not None and got != text):
            raise BootConfigError(
                "%s=%s would not reach the kernel: the effective command line from %s would "
                "be %r; a later assignment overrides it (pass grub_file to edit that one)"
                % (name, text, where, cmdline))
    for spec in absent or []:
        if any(_matches_absent(t, spec) for t in tokenize(cmdline)):
            raise BootConfigError("%s would still be in the effective command line (%s): %s"
                                  % (spec, where, cmdline))


def plan(root, params=None, absent=None, backend="auto", runner=None, grub_file=None):
    """Everything an edit would do, nothing written: ``{backend, tool, reason, before, after,
    changed, files: [{path, content_before, content_after, changed, exists}],
    refresh_required, refresh_commands}``."""
    if backend not in BACKENDS:
        raise BootConfigError("backend must be one of %s" % ", ".join(BACKENDS))
    detected = detect_backend(root, runner)
    requested = backend != "auto"
    if backend == "auto":
        backend = detected["backend"]
        tool = detected["tool"]
        reason = detected["reason"]
    else:
        reason = "backend=%s requested" % backend
        tool = detected["tool"]
        if backend == "systemd-boot" and tool not in ("proxmox-boot-tool", "kernel-install"):
            tool = "kernel-install"
        if backend == "grub" and tool == "kernel-install":
            tool = "grub"
    validate(params, absent)
    if backend == "systemd-boot":
        result = plan_systemd_boot(root, params, absent, tool=tool)
    else:
        result = plan_grub(root, params, absent, grub_file=grub_file,
                           requested=requested)
    verify(result["after"], params, absent,
           ", ".join(f["path"] for f in result["files"]))
    changed = any(f["changed"] for f in result["files"])
    result.update({
        "backend": backend,
        "tool": tool,
        "reason": reason,
        "changed": changed,
        "refresh_required": changed,
        "refresh_commands": refresh_commands(backend, tool, installed_kernels(root))
        if changed else [],
    })
    return result


def write(root, planned):
    """Write the files of a ``plan`` atomically, keeping mode and owner; read them back."""
    for entry in planned["files"]:
        if not entry["changed"]:
            continue
        path = host_path(root, entry["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, entry["content_after"], mode=0o644)
        with hostfs.open_read(path, "r", encoding="utf-8", newline="") as handle:
            if handle.read() != entry["content_after"]:
                raise BootConfigError("%s did not read back as written" % entry["path"])
