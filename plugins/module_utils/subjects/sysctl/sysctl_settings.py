# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Changing sysctl values under a root: the live write with read-back, the sysctl.d file of
the managed settings, the sysctl_settings module and the tune's sysctl part.

Reading and comparing values is in subjects/sysctl/sysctl.py: the audit imports only that (see "What
the audit imports" in docs/architecture.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    atomic_write,
    host_path,
    read_bytes,
    under_root,
    write_in_place,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl.sysctl import (
    AT_LEAST,
    at_least_value,
    key_path,
    normalize,
    read_many,
    read_sysctl,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec


class SysctlWriteError(Exception):
    """A sysctl write failed or did not take.

    ``kind`` says why, so callers can tell a key this kernel or container does not let us
    set (``missing``, ``readonly``: report as skipped) from a real failure (``denied``: not
    root; ``mismatch``: the value did not read back; ``error``: the kernel refused the value).
    """

    def __init__(self, msg, kind="error", key=None):
        super(SysctlWriteError, self).__init__(msg)
        self.kind = kind
        self.key = key


# Kinds of SysctlWriteError that mean "this kernel/container does not let us set it".
SKIP_KINDS = ("missing", "readonly")


def write_sysctl(root, key, value):
    """Write ``value`` and read it back.

    Returns None on success. Raises SysctlWriteError with a reason (key missing, read-only in
    this container, value did not take) so callers can report skipped keys, never silently.
    """
    path = key_path(root, key)
    try:
        write_in_place(path, "%s\n" % normalize(value))
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            raise SysctlWriteError("%s: the kernel has no such key (%s missing)" % (key, path),
                                   "missing", key)
        if exc.errno == errno.EACCES and hasattr(os, "geteuid") and os.geteuid() != 0:
            raise SysctlWriteError("%s: permission denied writing %s: run as root (become: true)"
                                   % (key, path), "denied", key)
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise SysctlWriteError(
                "%s: not writable here (%s); in a container the host kernel owns it"
                % (key, exc.strerror), "readonly", key)
        raise SysctlWriteError("%s: write failed: %s" % (key, exc), "error", key)
    now = read_sysctl(root, key)
    if now != normalize(value):
        raise SysctlWriteError("%s: wrote %s but reads back %s" % (key, normalize(value), now),
                               "mismatch", key)


def _writable(path):
    """A check-mode guess at whether a write would be allowed (read-only mounts included)."""
    return os.access(path, os.W_OK)


def apply_values(root, values, at_least=(), check_mode=False):
    """Set every key of ``values`` now, each read back; never stop at the first problem.

    Keys are validated first (ValueError before anything is written). Returns one dict per
    key, in the order given: ``key``, ``before``, ``wanted`` (after ``at_least``), ``after``
    and ``status``: ``ok`` (already right), ``changed`` (written, or would be in check mode),
    ``skipped`` (the kernel or container does not let us set it: missing key, read-only
    /proc/sys; with ``reason``) or ``failed`` (with ``reason``: not root, refused value, or
    the value did not read back on a writable kernel).
    """
    for key in values:
        key_path(root, key)
    results = []
    for key, value in values.items():
        path = key_path(root, key)
        try:
            before = read_sysctl(root, key)
        except hostfs.HostFileError as exc:     # a FIFO or device in a tree: this key only
            results.append({"key": key, "before": None, "wanted": normalize(value),
                            "after": None, "status": "failed", "reason": str(exc)})
            continue
        wanted = at_least_value(before, value) if key in at_least else normalize(value)
        entry = {"key": key, "before": before, "wanted": wanted, "after": before}
        if before is None:
            entry.update(status="skipped",
                         reason="%s: the kernel has no such key (%s missing)" % (key, path))
        elif before == wanted:
            entry["status"] = "ok"
        elif check_mode:
            if _writable(path):
                entry.update(status="changed", after=wanted)
            else:
                entry.update(status="skipped",
                             reason="%s: not writable here (%s); in a container the host "
                                    "kernel owns it" % (key, path))
        else:
            try:
                write_sysctl(root, key, wanted)
                entry.update(status="changed", after=wanted)
            except SysctlWriteError as exc:
                entry.update(status="skipped" if exc.kind in SKIP_KINDS else "failed",
                             reason=str(exc), after=read_sysctl(root, key))
        results.append(entry)
    return results


def render_conf(values, header=None):
    """A sysctl.d file for ``values`` (key order kept)."""
    lines = []
    if header:
        lines.extend("# " + line if line else "#" for line in header.splitlines())
    for key, value in values.items():
        lines.append("%s = %s" % (key, normalize(value)))
    return "\n".join(lines) + "\n"


def parse_conf(text):
    """Key -> value from sysctl.d text (``#``/``;`` comments, ``-`` prefix ignored)."""
    values = {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key.strip().lstrip("-")] = normalize(value.strip())
    return values


# Where systemd-sysctl reads sysctl.d files, highest precedence first: a file name in an
# earlier folder hides the same name in later ones (sysctl.d(5)). At boot only
# systemd-sysctl applies them: procps.service is an alias of systemd-sysctl.service on
# Debian 12 and 13 alike (Proxmox VE 8 and 9), and systemd-sysctl never reads
# /etc/sysctl.conf by that name (procps' `sysctl --system`, run by hand, reads it last).
# Debian 12's procps links /etc/sysctl.d/99-sysctl.conf to ../sysctl.conf, so there it is
# read through the link; Debian 13's procps (2:4.0.4-7 and later) ships neither the link
# nor the file, and removes an unmodified /etc/sysctl.conf on upgrade (a modified one is
# renamed /etc/sysctl.conf.dpkg-bak): there it counts only where a sysctl.d link brings it
# in. Checked with the real systemd-analyze cat-config sysctl.d of both
# (tests/integration/test_sysctl_real.py).
SYSCTL_D_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d",
                 "/usr/lib/sysctl.d", "/lib/sysctl.d")


SYSCTL_CONF = "/etc/sysctl.conf"


def boot_files(root):
    """The sysctl files systemd-sysctl applies at boot, in the order it applies them
    (later wins): ``[(host path, file name)]``. /etc/sysctl.conf only through a sysctl.d
    link to it (Debian 12's 99-sysctl.conf), never by itself."""
    chosen = {}
    for folder in SYSCTL_D_DIRS:
        try:
            names = hostfs.listdir(host_path(root, folder))
        except OSError:
            continue
        for name in names:
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = folder + "/" + name
    return [(chosen[name], name) for name in sorted(chosen)]


def boot_overrides(root, own_path, values, at_least=()):
    """Keys of ``values`` that a file applied after ``own_path`` at boot sets to another value
    (a larger one is fine for ``at_least`` keys): ``[{key, file, value, wanted}]``. The value
    set now would not survive a reboot."""
    found = []
    own_name = os.path.basename(own_path)
    for path, name in boot_files(root):
        if name == own_name:
            continue  # our file, or one of the same name it hides
        if name < own_name:
            continue  # applied before ours
        full = host_path(root, path)
        if hostfs.islink(full) and hostfs.readlink(full).startswith("/"):
            full = host_path(root, hostfs.readlink(full))  # absolute link: inside the root
        try:
            with hostfs.open_read(full, "r") as handle:
                text = handle.read()
        except (IOError, OSError):
            continue
        for key, value in parse_conf(text).items():
            if key not in values:
                continue
            wanted = normalize(values[key])
            if value == wanted:
                continue
            if key in at_least and at_least_value(value, wanted) == value:
                continue
            found.append({"key": key, "file": path, "value": value, "wanted": wanted})
    return found


SETTINGS_HEADER = ("Managed by gpuhost.tuning (sysctl_settings, role tune): the whole file is "
                   "rewritten on every run.\nChange gpuhost_sysctl instead of editing here; "
                   "ansible-playbook gpuhost.tuning.revert removes it.")
OWN_FILE = "/etc/sysctl.d/99-gpuhost-tuning.conf"


def settings_spec():
    """Option spec of module sysctl_settings (its defaults fill ``settings_run``'s params)."""
    spec = dict(
        values=dict(type="dict"),
        at_least=dict(type="list", elements="str", default=list(AT_LEAST)),
        path=dict(type="path", default=OWN_FILE),
        apply=dict(type="bool", default=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
    )
    spec.update(argspec.root())
    return spec


OWN_MARK = b"# Managed by gpuhost.tuning"


def owned(full):
    """Whether the file at ``full`` is one this module wrote (a plain file that starts with
    its header, or one named ``*gpuhost-tuning*``, the collection's own name), or does not
    exist. A link, or another file without the header, is the operator's."""
    if not hostfs.lexists(full):
        return True
    if hostfs.islink(full) or not hostfs.isfile(full):
        return False
    if "gpuhost-tuning" in os.path.basename(full):
        return True
    with hostfs.open_read(full, "rb") as handle:
        return handle.read(len(OWN_MARK)) == OWN_MARK


def takeover_refusal(root, path, full, snapshot_dir, check_mode):
    """Why the operator's file at ``path`` must not be overwritten, or None when the original
    snapshot in ``snapshot_dir`` holds its exact current state (content, mode, owner, link
    target), so a revert puts it back. In check mode a missing original is fine: the run
    would record it first."""
    what = "a symlink to %s" % hostfs.readlink(full) if hostfs.islink(full) else (
        "a folder" if hostfs.isdir(full) else "a file without the gpuhost.tuning header")
    advice = ("refusing to overwrite the operator's settings: choose a file of its own "
              "(gpuhost_tune_sysctl_file, default /etc/sysctl.d/99-gpuhost-tuning.conf) or move "
              "those settings elsewhere first")
    if hostfs.isdir(full) and not hostfs.islink(full):
        return "%s is %s: %s" % (path, what, advice)
    if not snapshot_dir:
        return "%s exists and is %s: %s" % (path, what, advice)
    original = os.path.join(snapstore.snapshot_dir(root, snapshot_dir), snapstore.ORIGINAL)
    if not hostfs.isfile(original):
        return None if check_mode else (
            "%s exists and is %s, and no original snapshot in %s records it: %s"
            % (path, what, snapshot_dir, advice))
    rec = (snapstore.load(original, root)["state"].get("files") or {}).get(path)
    if rec is None or not snapstore.same_file(snapstore.record_file(root, path), rec) \
            or rec["type"] == "absent":
        return ("%s exists and is %s, and the original snapshot %s does not hold its current "
                "state (a revert could not put it back): %s" % (path, what, original, advice))
    return None


def validate(values):
    """Keys and values checked before anything is written; ValueError names every bad one."""
    bad = []
    clean = {}
    for key, value in values.items():
        try:
            key_path("/", key)
        except ValueError as exc:
            bad.append(str(exc))
            continue
        if value is None or isinstance(value, (dict, list)) or normalize(value) == "":
            bad.append("%s: value %r is not a sysctl value (use a string like \"0\")"
                       % (key, value))
            continue
        if isinstance(value, bool):
            value = int(value)
        clean[key] = normalize(value)
    if bad:
        raise ValueError("invalid sysctl values, nothing written: %s" % "; ".join(bad))
    return clean


def file_values(root, values, at_least):
    """What the file should hold: wanted values, a larger current one kept for at_least keys."""
    out = {}
    for key in sorted(values):
        value = values[key]
        if key in at_least:
            value = at_least_value(read_sysctl(root, key), value)
        out[key] = value
    return out


def settings_run(params, check_mode=False, warn=None):
    """The whole sysctl_settings pass for ``params`` (the module's options; missing ones take
    the module's defaults). Returns the module's result dict, ``diff`` (a list) included.
    Raises ValueError/OSError when nothing could be done; per-key problems are in the result
    (see ``settings_failure``). ``warn(text)`` is called once per skipped key."""
    # snapshot_dir: host_tune's (where the original snapshot says which file it may take over)
    p = argspec.fill(settings_spec(), params, internal=("snapshot_dir",))
    root = p["root"]
    path = under_root(root, p["path"], "path", follow=False)
    if hostfs.isdir(path):
        raise ValueError("path: %s is a folder: give the sysctl.d file to own" % p["path"])
    old = read_bytes(path)
    old_text = None if old is None else old.decode("utf-8", "replace")
    result = dict(changed=False, path=p["path"], file_changed=False, changed_keys=[],
                  skipped_keys=[], failed_keys=[], overridden_at_boot=[])
    diffs = []
    if p["state"] == "absent":
        if not owned(path):
            result["kept"] = True
            if warn is not None:
                warn("%s was not written by gpuhost.tuning (no header, or a link): left in place"
                     % p["path"])
        elif old is not None:
            result["file_changed"] = result["changed"] = True
            diffs.append(dict(before_header=p["path"], after_header=p["path"],
                              before=old_text, after=""))
            if not check_mode:
                os.unlink(path)
        result["diff"] = diffs
        return result
    if p["values"] is None:
        raise ValueError("state is present but values is missing: give the wanted sysctls")
    values = validate(p["values"])
    at_least = set(p["at_least"])
    result["overridden_at_boot"] = boot_overrides(root, p["path"], values, at_least)
    content = render_conf(file_values(root, values, at_least), header=SETTINGS_HEADER)
    if old_text != content and not owned(path):
        refusal = takeover_refusal(root, p["path"], path, p["snapshot_dir"], check_mode)
        if refusal:
            raise ValueError(refusal)
    if old_text != content:
        result["file_changed"] = True
        diffs.append(dict(before_header=p["path"] if old is not None else "/dev/null",
                          after_header=p["path"], before=old_text or "", after=content))
        if not check_mode:
            folder = os.path.dirname(path)
            if not hostfs.isdir(folder):
                os.makedirs(folder, 0o755)
            atomic_write(path, content, mode=0o644, preserve=False)
    entries = []
    if p["apply"]:
        entries = apply_values(root, values, at_least=at_least, check_mode=check_mode)
    result["settings"] = entries
    # The name of ``settings`` in 0.1.0, kept for one release (deprecated, removed in 0.3.0):
    # Jinja's ``result.values`` is the dict method, so the key could only be read as
    # ``result['values']``.
    result["values"] = entries
    result["changed_keys"] = [e["key"] for e in entries if e["status"] == "changed"]
    result["skipped_keys"] = [dict(key=e["key"], reason=e["reason"])
                              for e in entries if e["status"] == "skipped"]
    result["failed_keys"] = [e["key"] for e in entries if e["status"] == "failed"]
    changed_values = [e for e in entries if e["status"] == "changed"]
    if changed_values:
        diffs.append(dict(
            before_header="sysctl (live)", after_header="sysctl (live)",
            before="".join("%s = %s\n" % (e["key"], e["before"]) for e in changed_values),
            after="".join("%s = %s\n" % (e["key"], e["after"]) for e in changed_values)))
    result["changed"] = bool(result["file_changed"] or changed_values)
    result["diff"] = diffs
    if warn is not None:
        for item in result["skipped_keys"]:
            warn("sysctl skipped: %s" % item["reason"])
    return result


def settings_failure(result):
    """The failure message of a ``settings_run`` result, or None when everything took."""
    problems = []
    if result.get("failed_keys"):
        reasons = [e["reason"] for e in result["settings"] if e["status"] == "failed"]
        problems.append("sysctl values not set on %d of %d keys: %s. %s" % (
            len(result["failed_keys"]), len(result["settings"]), ", ".join(result["failed_keys"]),
            " ".join(reasons)))
    for item in result.get("overridden_at_boot", []):
        problems.append(
            "%s = %s would not survive a reboot: %s, applied after %s at boot, sets it to %s "
            "(remove it there or set %s)" % (item["key"], item["wanted"], item["file"],
                                             result["path"], item["value"], item["wanted"]))
    return " ".join(problems) if problems else None


class SettingsPart(object):
    """Apply and persist the wanted sysctls (``settings_run``); keys the kernel has not got
    are skipped, not failures."""

    name = "sysctl"
    owns = ("numa_balancing", "sysctl")
    steps = ("sysctl",)
    stage = "tune"
    options = dict(sysctl_at_least=dict(type="list", elements="str", default=list(AT_LEAST)),
                   sysctl_file=dict(type="path", default=OWN_FILE))
    option_docs = {
        "sysctl_at_least": ["Keys where a larger current value counts as right and is kept "
                            "(live and in the file). The default is the collection's rule, "
                            "the one the audit judges by - the socket buffer sizes and "
                            "ceilings; V([]) makes every key exact."],
        "sysctl_file": "The sysctl.d file owned by the pass (it holds exactly O(wanted.sysctl)).",
    }
    files = (OWN_FILE,)
    file_options = ("sysctl_file",)
    role_doc = "Apply gpuhost_sysctl now and persist it (tag C(tune_sysctl))."
    snapshot_key, label = "sysctl", "{key}"  # the snapshot's section (engines/tune/sections.py)
    restore_report = (("sysctls restored", "changed", "key"),
                      ("sysctls skipped", "skipped", "reason"))

    def run(self, ctx):
        p = ctx.params
        try:
            res = settings_run({"values": p["sysctl"], "at_least": p["sysctl_at_least"],
                                "path": p["sysctl_file"], "root": ctx.root,
                                "snapshot_dir": p["snapshot_dir"] if "snapshot" in ctx.on
                                else None},
                               ctx.check_mode, warn=ctx.warn)
        except (ValueError, OSError, SysctlWriteError) as exc:
            return self.not_run(ctx, "failed", str(exc), bool(getattr(exc, "written", None)))
        out = {"changed": res["changed"],
               "diffs": [d for d in res.pop("diff", None) or []
                         if "prepared" in d or d.get("before") != d.get("after")],
               "detail": {"sysctl": res},
               "skipped": [k["key"] for k in res["skipped_keys"]],
               "rows": [(e["key"], e["before"], e["after"], e["status"], e.get("reason", ""))
                        for e in res["settings"]]}
        if res["file_changed"]:
            out["rows"].append((res["path"], "", "written", "changed", "persisted (owned file)"))
        msg = settings_failure(res)
        if msg:
            res.update(failed=True, msg=msg)
            out["failures"] = ["sysctl: %s" % msg.strip()]
        return out

    def not_run(self, ctx, status, msg="", written=False):
        out = {"rows": [("(all)", "", "", status, msg)]}
        if status == "failed":
            out["changed"] = written  # what was written before the failure
            out["detail"] = {"sysctl": {"failed": True, "changed": written, "msg": msg}}
            out["failures"] = ["sysctl: %s" % (msg or "failed").strip()]
        return out

    def record(self, ctx):
        return read_many(ctx.root, ctx.params["sysctl_keys"])

    def restore(self, ctx, recorded):
        recorded, root = recorded or {}, ctx.root
        items = [{"key": key, "before": read_sysctl(root, key), "wanted": None,
                  "after": read_sysctl(root, key), "status": "ok",
                  "reason": "the key did not exist when the snapshot was taken"}
                 for key in sorted(k for k, v in recorded.items() if v is None)]
        items += apply_values(root, dict((k, v) for k, v in recorded.items() if v is not None),
                              check_mode=ctx.check_mode)
        return items, [e["reason"] for e in items if e["status"] == "failed"]

    def check(self, recorded, bad, root):
        if not isinstance(recorded or {}, dict):
            bad("sysctl is not a mapping")
        for key, value in (recorded or {}).items():
            try:
                key_path("/", key)
                if not isinstance(key, str) or any(c.isspace() or ord(c) < 32 for c in key):
                    raise ValueError(key)
            except ValueError:
                bad("sysctl key %r" % (key,))
            if value is not None and (not isinstance(value, str) or "\n" in value):
                bad("sysctl %s value %r" % (key, value))

    def summary(self, recorded):
        return {"sysctl": dict(recorded or {})}

    def diff_lines(self, item):
        return ("%s = %s" % (item["key"], item["before"]), "%s = %s" % (item["key"], item["after"]))


TUNE_PART = SettingsPart()
