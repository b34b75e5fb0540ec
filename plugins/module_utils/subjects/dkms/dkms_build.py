# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building and installing a DKMS module for a kernel (the dkms_build module and the
kernel_upgrade role's gate): run ``dkms``, then check the tree, never trusting an exit code
alone.

Reading ``dkms status`` and the DKMS tree is subjects/dkms/dkms.py's; the audit imports only that
(docs/architecture.md, "What the audit imports")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot.kernels import (
    has_headers,
    headers_dir,
    headers_package,
    newest_kernel,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms.dkms import (
    DkmsError,
    MODULE_SUFFIXES,
    STATE_RANK,
    WANTED_STATES,
    installed_modules,
    known_versions,
    read_conf,
    state_for,
    status,
)
# ``dkms build`` / ``install`` of the real NVIDIA module takes 2-10 minutes on a busy host
# (the stand-in of the tests seconds): bounded, with room for a slow one.
BUILD_TIMEOUT_S = 3600


def headers_error(root, kernel):
    """The message for missing headers (None when the headers are there)."""
    if has_headers(root, kernel):
        return None
    build = "/lib/modules/%s/build" % kernel
    detail = ""
    path = host_path(root, build)
    if hostfs.islink(path):
        target = hostfs.readlink(path)
        if headers_dir(root, kernel) is None:
            detail = " (dangling link to %s)" % target
        else:
            detail = " (%s has no include/)" % target
    return "headers for kernel %s not found at %s%s: install %s" % (
        kernel, build, detail, headers_package(kernel))


def plan(state_before, name, version, kernel, state, dkms="dkms", arch=None, force=False):
    """Commands needed to go from ``state_before`` to ``state``. ``force``: the install
    replaces another version installed for that kernel (``--force``: dkms otherwise keeps
    a newer ``.ko`` and still records this version as installed)."""
    target = ["-m", name, "-v", version, "-k", kernel if not arch else "%s/%s" % (kernel, arch)]
    commands = []
    if STATE_RANK.get(state_before, 0) < STATE_RANK["built"]:
        commands.append([dkms, "build"] + target)
    if state == "installed" and (state_before != "installed" or force):
        commands.append([dkms, "install"] + target + (["--force"] if force else []))
    return commands


def add(runner, root, name, version, dkms="dkms", check_mode=False):
    """``dkms add`` for ``/usr/src/<name>-<version>`` when dkms does not know that version
    yet (a package or installer that put the source there without adding it). Returns
    True when it was (or in check mode would be) added. Raises DkmsError."""
    if any(e["version"] == version for e in status(runner, name, dkms=dkms)):
        return False
    source = "/usr/src/%s-%s" % (name, version)
    if not hostfs.isfile(host_path(root, source + "/dkms.conf")):
        raise DkmsError("%s/dkms.conf does not exist: the %s %s module source is not "
                        "installed" % (source, name, version))
    if check_mode:
        return True
    rc, out, err = runner.run([dkms, "add", "-m", name, "-v", version], check=False)
    if not any(e["version"] == version for e in status(runner, name, dkms=dkms)):
        raise DkmsError("dkms add -m %s -v %s exited %s and dkms still does not know it: %s"
                        % (name, version, rc, _tail(err) or _tail(out)))
    return True


def _other_installed(entries, name, version, kernel):
    """Versions of ``name`` other than ``version`` installed for ``kernel``."""
    return sorted(e["version"] for e in entries if e["name"] == name
                  and e["kernel"] == kernel and e["version"] != version
                  and e["state"] == "installed")


def _tail(text, lines=15):
    text = (text or "").strip()
    return "\n".join(text.splitlines()[-lines:])


def _missing_modules(root, name, version, kernel):
    conf = read_conf(root, name, version, kernel)
    expected = [m["dest"] for m in conf["modules"]] if conf and conf["modules"] else []
    found = installed_modules(root, name, version, kernel)
    have = set()
    for path in found:
        base = os.path.basename(path)
        for suffix in MODULE_SUFFIXES:
            if base.endswith(suffix):
                have.add(base[: -len(suffix)])
    missing = [m for m in expected if m not in have]
    return found, missing


def ensure(runner, root, name, version=None, kernel=None, state="installed", check_mode=False,
           dkms=None, arch=None, replace=False):
    """Make sure ``name``/``version`` is built (or installed) for ``kernel``.

    Validates everything first (version known, headers present), then runs ``dkms build`` /
    ``dkms install`` as needed and judges the result by ``dkms status`` for that kernel and
    the ``.ko`` files, never by exit codes alone. ``dkms``: the program; with a ``root``
    other than ``/`` it is required and must act on that root (a wrapper running
    ``chroot <root> dkms``), since dkms itself only knows the real ``/``.
    ``replace``: another version installed for ``kernel`` is replaced (``--force``), as a
    driver upgrade or its back-out wants; without it dkms refuses to install an older
    version over a newer one yet records it as installed (with a ``Diff between built and
    installed module`` warning), which is judged as a failure here.
    Raises DkmsError. Returns ``{changed, name, version, kernel, headers_package, commands,
    status_before, status_after, state_before, state_after, modules}``.
    """
    if state not in WANTED_STATES:
        raise DkmsError("state must be one of %s, not %s" % (", ".join(WANTED_STATES), state))
    if os.path.abspath(root or "/") != "/" and not dkms:
        raise DkmsError(
            "dkms_build needs root=/ (got %s): dkms reads /var/lib/dkms, /usr/src and "
            "/lib/modules/<kernel>/build of the real host and runs depmod there. For another "
            "root pass executable: a wrapper that runs dkms inside it (chroot %s dkms \"$@\"). "
            "To read a captured tree offline use dkms.tree_status (the audit does)"
            % (root, root))
    dkms = dkms or "dkms"
    if kernel is None:
        kernel = newest_kernel(root)
        if kernel is None:
            raise DkmsError("no kernel found under /lib/modules or /boot: pass kernel")
    everything = status(runner, name, dkms=dkms)
    if version is None:
        versions = known_versions(everything, name)
        if not versions:
            raise DkmsError(
                "dkms does not know module %s (dkms status -m %s printed nothing): install its "
                "package or run dkms add" % (name, name))
        version = versions[-1]
    before = status(runner, name, version, kernel, dkms=dkms)
    state_before = state_for(before, name, version, kernel, arch)
    if state_before is None:
        source = "/usr/src/%s-%s" % (name, version)
        if not hostfs.isfile(host_path(root, source + "/dkms.conf")):
            raise DkmsError(
                "dkms does not know %s/%s and %s/dkms.conf does not exist: install the module "
                "source or pick a version from: %s" % (
                    name, version, source,
                    ", ".join(known_versions(everything, name)) or "(none)"))
    result = {
        "changed": False,
        "name": name,
        "version": version,
        "kernel": kernel,
        "headers_package": headers_package(kernel),
        "commands": [],
        "status_before": before,
        "status_after": before,
        "state_before": state_before,
        "state_after": state_before,
        "modules": [],
    }
    entry = None
    for candidate in before:
        if candidate["version"] == version and candidate["kernel"] == kernel:
            entry = candidate
    diverged = bool(entry and entry["state"] == "installed" and entry["warning"]
                    and "Diff between built and installed" in entry["warning"])
    force = bool(replace and state == "installed" and (
        diverged or _other_installed(
            status(runner, name, kernel=kernel, dkms=dkms), name, version, kernel)))
    commands = plan(state_before, name, version, kernel, state, dkms=dkms, arch=arch,
                    force=force)
    if state == "installed" and not commands:
        found, missing = _missing_modules(root, name, version, kernel)
        result["modules"] = found
        if missing or not found:
            raise DkmsError(
                "dkms status says %s/%s is installed for %s but %s missing under "
                "/lib/modules/%s: run dkms install --force -m %s -v %s -k %s" % (
                    name, version, kernel,
                    ", ".join(missing) if missing else "its .ko files are", kernel,
                    name, version, kernel), **result)
        return result
    if not commands:
        result["modules"] = installed_modules(root, name, version, kernel)
        return result
    error = headers_error(root, kernel)
    if error:
        raise DkmsError(error, **result)
    result["commands"] = commands
    result["changed"] = True
    if check_mode:
        result["state_after"] = state
        return result
    outputs = []
    for command in commands:
        rc, out, err = runner.run(command, check=False, timeout=BUILD_TIMEOUT_S)
        outputs.append({"cmd": command, "rc": rc, "stdout": out, "stderr": err})
        after = status(runner, name, version, kernel, dkms=dkms)
        now = state_for(after, name, version, kernel, arch)
        result["status_after"] = after
        result["state_after"] = now
        needed = "built" if command[1] == "build" else "installed"
        if STATE_RANK.get(now, 0) < STATE_RANK[needed]:
            text = (err or "") + "\n" + (out or "")
            if "cannot be found" in text and "headers" in text:
                msg = headers_error(root, kernel) or (
                    "headers for kernel %s not usable: install %s"
                    % (kernel, headers_package(kernel)))
            else:
                msg = "%s exited %s but dkms status for %s/%s on %s says %s" % (
                    " ".join(command), rc, name, version, kernel, now or "nothing")
            detail = _tail(err) or _tail(out)
            if detail:
                msg += ": " + detail
            result["outputs"] = outputs
            raise DkmsError(msg, **result)
    result["outputs"] = outputs
    diff = [e for e in result["status_after"] if e["version"] == version
            and e["kernel"] == kernel and e["warning"]
            and "Diff between built and installed" in e["warning"]]
    if state == "installed" and diff:
        raise DkmsError(
            "dkms install for %s/%s on %s left another build's .ko in place (dkms status: "
            "%s): another version is installed for that kernel; dkms refuses to replace a "
            "newer one without --force" % (name, version, kernel, diff[0]["warning"]),
            **result)
    if state == "installed":
        found, missing = _missing_modules(root, name, version, kernel)
        result["modules"] = found
        if missing or not found:
            raise DkmsError(
                "dkms install for %s/%s on %s reported installed but %s missing under "
                "/lib/modules/%s" % (name, version, kernel,
                                     ", ".join(missing) if missing else "the .ko files are",
                                     kernel), **result)
    return result
