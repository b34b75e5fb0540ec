# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Staging an NVIDIA driver version in each GPU container that carries its own user space
(the container half of driver_stage.py's Stager): its own apt through ``pct exec``
(``installed-deb``) or NVIDIA's ``.run`` pushed with ``pct push`` and run with
``--no-kernel-module`` (``installed-run``); a stopped container started for it and stopped
again. Checked first, before anything changes: ``pct exec`` answers, the version is known
to its apt, its ``/`` has room. Before an install the previous packages' ``.deb``s are kept
on the host (``pct pull``); a back-out pushes them into its apt cache; an install failing
part way gets the previous versions back before the error is raised.

ContainerStager is a mixin: the Stager it is part of provides ``_run``, ``_pct``,
``_apt_plan``, ``result``, ``warnings`` and the options (``version``, ``root``, ``p``,
``vmids``, ``run_file``, ``run_info``, ``check_mode``, ``install_timeout``, ``state``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage_files import (  # noqa: E501
    APT_INSTALL,
    ARCHIVES,
    HOST_FREE_MARGIN,
    QUERY_FORMAT,
    StageError,
    deb_names,
    keep_folder,
    keep_part,
    KEEP_DIR,
    copy_atomic,
    kept_ct_debs,
    kept_run,
    last_lines,
    parse_df_free,
    parse_query_files,
    parse_show_sizes,
    pinned,
    pull_cap,
    removed,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import atomic_write
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_records import (
    resolved_version,
    versioned_binds,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc.lxc import Line, LxcConfig
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc_write

# Options of NVIDIA's installer for a container's user space (see driver_stage.RUN_HOST).
RUN_CONTAINER = ["--silent", "--no-questions", "--ui=none", "--no-kernel-module"]
CT_RUN_DIR = "/root"
STAGED = ("installed-deb", "installed-run")
NEEDS_NOTHING = ("bind-mount", "hook")
# Room a container needs beyond the packages' own sizes, and per MiB of a .run (it unpacks
# itself into /tmp, then installs about as much again).
MARGIN_KIB = 64 * 1024
RUN_ROOM_FACTOR = 3


class ContainerStager(object):
    """The container steps of one staging pass (see the module's docstring)."""

    def _selected(self):
        out = []
        for ct in self.state.get("containers") or []:
            if self.vmids is None or str(ct.get("vmid")) in self.vmids:
                out.append(ct)
        return out

    def plan_containers(self):
        for ct in self._selected():
            vmid = str(ct.get("vmid"))
            user = ct.get("userspace") or {}
            method = user.get("method")
            row = {"vmid": vmid, "name": ct.get("name"), "method": method,
                   "from": user.get("version"), "to": None, "action": "skipped",
                   "reason": None, "started": False}
            self.result["containers"].append(row)
            if not ct.get("readable", True):
                row["reason"] = "root not readable: %s" % (ct.get("reason") or "?")
                continue
            if method in NEEDS_NOTHING:
                row.update(action="unchanged", to=self.version,
                           reason="user space comes from the host (%s)" % method)
                continue
            if method not in STAGED:
                row["reason"] = "user space %s: nothing to stage (the gate judges it)" % method
                continue
            if user.get("version") == self.version:
                row.update(action="unchanged", to=self.version)
                continue
            if method == "installed-run" and not self.run_file:
                raise StageError("%s: user space installed by a .run (%s): staging %s there "
                                 "needs run_file (nothing changed)" % (
                                     vmid, user.get("version"), self.version))
            row["to"] = self.version
            running = self._running(vmid)
            row["was_running"] = running
            plan = {"row": row, "ct": ct, "running": running}
            if not running and self.check_mode:
                row.update(action="would start to stage")
                continue
            self.ct_plans.append(plan)
            if not running:
                self._run([self.p["pct"], "start", vmid], what="%s: pct start" % vmid)
                row["started"] = True
            self._preflight(plan)

    def _running(self, vmid):
        _rc, out, _err = self._run([self.p["pct"], "status", vmid],
                                   what="%s: pct status" % vmid)
        return "running" in out

    def _preflight(self, plan):
        row, ct = plan["row"], plan["ct"]
        vmid = row["vmid"]
        rc, out, err = self._pct(vmid, ["df", "-Pk", "/"], check=False)
        if rc != 0:
            raise StageError("%s: pct exec refused, so its user space cannot be staged "
                             "(nothing changed): %s" % (
                                 vmid, (err or out).strip().splitlines()[-1:] or rc))
        free = parse_df_free(out)
        if row["method"] == "installed-deb":
            packages = [p["name"] for p in (ct.get("userspace") or {}).get("packages") or []
                        if p.get("name")]
            if not packages:
                raise StageError("%s: installed-deb but driver_state lists no package"
                                 % vmid)
            plan["packages"], plan["renamed"] = self._apt_plan(vmid, packages)
            if plan["renamed"]:
                row["renamed"] = dict(plan["renamed"])
            plan["previous"] = dict((p["name"], p.get("version")) for p in
                                    (ct.get("userspace") or {}).get("packages") or [])
            _rc, shown, _err = self._pct(vmid, ["apt-cache", "show", "--no-all-versions"]
                                         + pinned(plan["packages"]))
            need = parse_show_sizes(shown) + MARGIN_KIB
        else:
            need = RUN_ROOM_FACTOR * (self.run_info["size"] + 1023) // 1024 + MARGIN_KIB
        row["need_kib"], row["free_kib"] = need, free
        if free is not None and free < need:
            raise StageError("%s: disk full: %d MiB free on /, %s %s needs %d MiB (nothing "
                             "changed; the user space stays %s)" % (
                                 vmid, free // 1024, row["method"], self.version,
                                 need // 1024, row["from"]))
        row["action"] = "would stage" if self.check_mode else "stage"

    def stage_containers(self):
        try:
            for plan in self.ct_plans:
                row = plan["row"]
                if self.check_mode:
                    self.result["changed"] = True
                    continue
                if row["method"] == "installed-deb":
                    self._stage_deb(plan)
                else:
                    self._stage_run(plan)
                row["action"] = "staged"
                self.result["changed"] = True
                self._put_back(plan)
        finally:
            for plan in self.ct_plans:
                self._put_back(plan)

    def _keep_ct_debs(self, plan, apt):
        """The container's previous packages' .debs kept on the host (kept_ct_debs) before
        the install replaces them: pulled from its apt cache, fetched into it first
        (--reinstall --download-only) where apt removed them (the ``apt`` front end does
        after installing). One apt can no longer fetch is a warning, not a refusal."""
        row = plan["row"]
        vmid = row["vmid"]
        prev = dict((n, v) for n, v in plan["previous"].items() if v)
        _rc, out, _err = self._pct(vmid, ["dpkg-query", "-W", "-f", QUERY_FORMAT]
                                   + sorted(prev), check=False)
        keep = host_path(self.root, kept_ct_debs(vmid))
        caps = parse_query_files(out, prev)
        todo = [n for n in sorted(caps) if not hostfs.isfile(os.path.join(keep, n))]
        row["kept_debs"] = []
        if not todo:
            return
        keep_folder(self.root, keep)
        missing = [n for n in todo if not self._pull(vmid, n, keep, caps[n])]
        if missing:
            self._pct(vmid, apt + ["--reinstall", "--download-only"] + pinned(prev),
                      timeout=self.install_timeout, check=False)
            missing = [n for n in missing if not self._pull(vmid, n, keep, caps[n])]
        row["kept_debs"] = [n for n in todo if n not in missing]
        if missing:
            self.warnings.append("%s: the previous user space's %s could not be kept (not "
                                 "in its apt cache, and apt could not fetch it, or it is "
                                 "larger than its installed size allows): its back-out "
                                 "needs a repository that still has %s" % (
                                     vmid, ", ".join(missing), row["from"]))

    def _pull(self, vmid, name, keep, cap):
        """``pct pull`` one .deb of the container's cache into ``keep``, atomically, and at
        most ``cap`` bytes (``prlimit --fsize``: a container's file that never ends, a FIFO
        fed forever or a planted huge file stops at the cap, on the host's disk too). The
        cap is the container's figure (deb_cap, itself at most DEB_CAP_CEILING) and never
        more than the keep folder's free space less a margin (pull_cap: the host's own
        figure). The pull writes into a new private folder (``hostfs.create_temp``), so
        ``pct pull``'s own exclusive create succeeds and no name planted in ``keep`` is
        ever written through."""
        room = pull_cap(keep, cap)
        if room <= 0:
            self.warnings.append("%s: %s not kept: the host's filesystem of %s has less than "
                                 "%d MiB free (free space, then run again)" % (
                                     vmid, name, keep, HOST_FREE_MARGIN >> 20))
            return False
        _none, folder = hostfs.create_temp(keep, name, 0o700, root=self.root, directory=True)
        part = os.path.join(folder, name)
        try:
            rc, _out, _err = self._run([self.p["prlimit"], "--fsize=%d" % room, self.p["pct"],
                                        "pull", vmid, "%s/%s" % (ARCHIVES, name), part],
                                       timeout=self.install_timeout, check=False)
            return keep_part(part, os.path.join(keep, name), rc == 0)
        finally:
            if os.path.lexists(part):
                os.unlink(part)
            os.rmdir(folder)

    def _stage_deb(self, plan):
        vmid = plan["row"]["vmid"]
        renamed = plan.get("renamed") or {}
        wanted = pinned(plan["packages"]) + removed(renamed)
        apt = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"] + APT_INSTALL
        self._keep_ct_debs(plan, apt)
        # a back-out: this version's kept .debs into the container's cache (apt installs
        # them from there without a download)
        keep = host_path(self.root, kept_ct_debs(vmid))
        plan["row"]["put_back"] = []
        for package, debver in sorted(plan["packages"].items()):
            for name in deb_names(keep, package, debver):
                # pct push opens the host's file following links: only a regular file
                why = hostfs.source_problem(os.path.join(keep, name))
                if why is not None:
                    self.warnings.append("%s: %s" % (vmid, hostfs.source_refused(
                        os.path.join(keep, name), why, "not pushed into its apt cache")))
                    continue
                self._run([self.p["pct"], "push", vmid, os.path.join(keep, name),
                           "%s/%s" % (ARCHIVES, name), "--perms", "0644"],
                          what="%s: pct push" % vmid)
                plan["row"]["put_back"].append(name)
        rc, out, err = self._pct(vmid, apt + wanted, timeout=self.install_timeout,
                                 check=False)
        if rc == 0:
            return
        why = last_lines(err or out)
        # the names this install brought in go again as the previous ones come back
        back = pinned(plan["previous"]) + ["%s-" % n for n in sorted(renamed.values())]
        brc, bout, berr = self._pct(vmid, apt + back, timeout=self.install_timeout,
                                    check=False)
        plan["row"]["action"] = "failed"
        if brc == 0:
            raise StageError("%s: apt-get install of %s failed: %s; put the previous user "
                             "space back (%s)" % (vmid, self.version, why, ", ".join(back)))
        raise StageError("%s: apt-get install of %s failed: %s; putting the previous "
                         "user space back failed too: %s" % (
                             vmid, self.version, why, last_lines(berr or bout)))

    def _stage_run(self, plan):
        vmid = plan["row"]["vmid"]
        keep = kept_run(self.version, self.run_info["arch"])
        before = plan["row"]["from"]
        if before and not hostfs.isfile(host_path(self.root, kept_run(
                before, self.run_info["arch"]))):
            self.warnings.append("%s: its previous user space came from NVIDIA's .run for "
                                 "%s, which is not kept on the host: its back-out needs "
                                 "that .run (run_file)" % (vmid, before))
        # pct push opens the host's file following links: the kept .run only when it is a
        # regular file, else the run_file resolved inside the root (run_header read it so)
        source = host_path(self.root, keep)
        if not hostfs.isfile(source) or hostfs.source_problem(source) is not None:
            source = hostfs.realpath(host_path(self.root, self.run_file))
        inside = "%s/%s" % (CT_RUN_DIR, os.path.basename(keep))
        self._run([self.p["pct"], "push", vmid, source, inside, "--perms", "0700"],
                  what="%s: pct push" % vmid)
        try:
            rc, out, err = self._pct(vmid, ["sh", inside] + RUN_CONTAINER,
                                     timeout=self.install_timeout, check=False)
        finally:
            self._pct(vmid, ["rm", "-f", inside], check=False)
        if rc != 0:
            plan["row"]["action"] = "failed"
            raise StageError("%s: the NVIDIA installer (%s --no-kernel-module) exited %s: %s"
                             % (vmid, os.path.basename(keep), rc, last_lines(err or out)))

    def rewrite_binds(self):
        """Each selected container's live ``lxc.mount.entry`` lines that bind a host file
        named with another driver version, renamed to the staged version's file
        (``rewritten_binds``), with ``rewrite_bind_mounts``; without it, a warning that the
        gate will refuse them. Runs after the host is staged: an entry is rewritten only
        to a file the host has now (in check mode, one the staging would install is not
        known yet: reported as ``would rewrite``). Before the first write for a version
        the config is kept (``kept_conf``); the config is written atomically beside itself
        (the pmxcfs rule: no chmod), every other byte kept; a second run finds nothing to
        rewrite. A back-out (staging the previous version with the option) rewrites the
        entries back the same way. The change takes effect when the container starts next."""
        for ct in self._selected():
            vmid = str(ct.get("vmid"))
            path = lxc.config_path(self.root, vmid)
            if not hostfs.isfile(path):
                continue
            config = lxc.LxcConfig.read(path)
            new, changes = rewritten_binds(config, self.version)
            if not changes:
                continue
            row = next((r for r in self.result["containers"] if r["vmid"] == vmid), None)
            if not self.rewrite_bind_mounts:
                self.warnings.append(
                    "%s: lxc.mount.entry binds %s: the gate refuses it once %s is staged; "
                    "rewrite_bind_mounts: true rewrites it to %s" % (
                        vmid, ", ".join(c["source"] for c in changes), self.version,
                        ", ".join(c["to"] for c in changes)))
                continue
            if not self.check_mode:
                absent = [c for c in changes if resolved_version(self.root, c["to"])[1]
                          is None]
                if absent:
                    self.warnings.append(
                        "%s: not rewriting lxc.mount.entry to %s: the host has no such file "
                        "after staging (its user space is not at %s?); the entries stay" % (
                            vmid, ", ".join(c["to"] for c in absent), self.version))
                    continue
            if row is not None:
                row["bind_mounts"] = [{"from": c["source"], "to": c["to"]} for c in changes]
                row["action"] = ("would rewrite bind mounts" if self.check_mode
                                 else "rewrote bind mounts")
            self.result["changed"] = True
            if self.check_mode:
                continue
            try:
                target = lxc_write.write_target(self.root, path)
            except lxc.LxcError as exc:
                raise StageError("%s: its bind mounts are not rewritten: %s" % (vmid, exc))
            keep = host_path(self.root, kept_conf(vmid, changes[0]["version"]))
            if not os.path.lexists(keep):
                copy_atomic(self.root, target, keep, 0o600)
                if row is not None:
                    row["kept_conf"] = kept_conf(vmid, changes[0]["version"])
            atomic_write(target, new.render_bytes(), chmod=False)

    def _put_back(self, plan):
        row = plan["row"]
        if row.get("started") is True and not self.check_mode:
            self._run([self.p["pct"], "shutdown", row["vmid"], "--timeout", "60"],
                      check=False, what="%s: pct shutdown" % row["vmid"])
            row["started"] = "and stopped again"


def kept_conf(vmid, version):
    """Where a container's config is kept, as it was before staging rewrote its versioned
    bind mounts away from ``version`` (once per version: the first copy stays)."""
    return "%s/containers/%s/%s.conf.%s" % (KEEP_DIR, vmid, vmid, version)


def rewritten_binds(config, version):
    """``(new LxcConfig, [{source, to, version}])``: each live versioned bind mount
    (``versioned_binds``) of another version than ``version`` with its source renamed to
    it (``/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05`` -> ``...590.48.01``); every
    other byte of the config as it was. The path inside the container stays: its own
    loader links (``libcuda.so.1 -> libcuda.so.580.95.05``, made by its ldconfig) keep
    leading to the bound file, where a new name would leave them at the empty file
    ``create=file`` made. ``(config, [])`` when nothing names another version."""
    changes = []
    lines = list(config.lines)
    for bind in versioned_binds(config):
        if bind["version"] == version:
            continue
        source = bind["source"]
        new = source[:len(source) - len(bind["version"])] + version
        old = lines[bind["index"]]
        head, sep, rest = old.raw.partition(":")
        lines[bind["index"]] = Line(head + sep + rest.replace(source, new, 1), old.ending,
                                    old.section)
        changes.append({"source": source, "to": new, "version": bind["version"]})
    if not changes:
        return config, []
    return LxcConfig(lines, newline=config.newline, final_newline=config.final_newline), \
        changes
