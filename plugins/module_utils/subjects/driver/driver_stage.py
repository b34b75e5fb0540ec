# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Staging an NVIDIA driver version (the driver_stage module): the host's packages or
``.run`` installer, its DKMS build for every kernel that may boot, and the user space of
each GPU container that carries its own, through ``pct exec`` / ``pct push`` (those steps
are driver_stage_ct.py's ContainerStager, which Stager is made of).

What is there comes from ``driver_state`` (its registered result is the ``state`` input):
this file reads no host state of its own beyond what staging needs (the ``.run``'s header,
the headers trees, ``dkms status``). Everything is checked before anything changes (the
version is known to apt or is the ``.run``'s, headers for every kernel, every container
reachable through ``pct exec`` with room for the new files), so a refusal leaves the host
and every container as they were; a container whose install fails part way gets its
previous versions back before the error is raised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms.dkms import DkmsError
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_records import (
    scheme_names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms_build
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage_ct import (  # noqa: E501
    ContainerStager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage_files import (  # noqa: E501
    APT_INSTALL,
    StageError,
    copy_atomic,
    keep_build,
    keep_debs,
    kept_build,
    kept_run,
    parse_madison,
    pick_schemes,
    pinned,
    removed,
    restore_build,
    run_header,
    same_file,
    unkeep_debs,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_kernel
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    QUERY_TIMEOUT_S,
    CommandError,
)

# DKMS names the driver's packages register: NVIDIA's .run and repository (nvidia,
# nvidia-open), Debian (nvidia-current, nvidia-current-open), tried in this order.
DKMS_NAMES = ("nvidia", "nvidia-open", "nvidia-current", "nvidia-current-open")
# Options of NVIDIA's installer used here (nvidia-installer --help / -A): --silent implies
# --ui=none, --no-questions and --accept-license; both are also given, as NVIDIA's docs show.
RUN_HOST = ["--silent", "--no-questions", "--ui=none", "--dkms"]


class Stager(ContainerStager):
    """One staging pass. ``programs``: ``{dkms, apt_get, apt_cache, installer, pct}`` (with
    a root other than ``/`` each must act on that root)."""

    def __init__(self, runner, root, version, source, state, programs, run_file=None,
                 kernels=None, vmids=None, dkms_name=None, check_mode=False,
                 timeout=QUERY_TIMEOUT_S, install_timeout=1800, rewrite_bind_mounts=False):
        self.runner = runner
        self.root = root or "/"
        self.version = version
        self.source = source
        self.state = state or {}
        self.p = programs
        self.run_file = run_file
        self.check_mode = check_mode
        self.timeout = timeout
        self.install_timeout = install_timeout
        self.dkms_name = dkms_name
        self.rewrite_bind_mounts = rewrite_bind_mounts
        host = self.state.get("host") or {}
        kern = host.get("kernels") or {}
        wanted = kernels or [kern.get("running"), kern.get("next")]
        self.kernels = []
        for release in wanted:
            if release and release not in self.kernels:
                self.kernels.append(release)
        self.vmids = [str(v) for v in vmids] if vmids else None
        self.result = {"changed": False, "version": version, "source": source,
                       "kernels": self.kernels,
                       "host": {"changed": False, "method": None, "previous": None,
                                "packages": [], "dkms": [], "kept": None,
                                "kept_build": None},
                       "containers": [], "commands": []}
        self.warnings = []

    # ---------------------------------------------------------------- helpers

    def _run(self, args, timeout=None, check=True, what=None):
        self.result["commands"].append([str(a) for a in args])
        try:
            return self.runner.run(args, check=check, timeout=timeout or self.timeout)
        except CommandError as exc:
            raise StageError("%s: %s" % (what, exc) if what else str(exc))

    def _pct(self, vmid, args, timeout=None, check=True, what=None):
        return self._run([self.p["pct"], "exec", str(vmid), "--"] + list(args),
                         timeout=timeout, check=check, what=what or "%s: pct exec" % vmid)

    # ---------------------------------------------------------------- host

    def _host_packages(self):
        installed = (self.state.get("host") or {}).get("installed") or {}
        return [p["name"] for p in installed.get("packages") or [] if p.get("name")]

    def plan_host(self):
        host = self.result["host"]
        installed = (self.state.get("host") or {}).get("installed") or {}
        host["previous"] = installed.get("version")
        host["method"] = "run" if self.source == "run" else (installed.get("method") or "debian")
        if not self.kernels:
            raise StageError("no kernel to build for: driver_state found neither the running "
                             "nor the next kernel (pass kernels)")
        missing = [dkms_build.headers_error(self.root, k) for k in self.kernels]
        missing = [m for m in missing if m]
        # a pair known not to build (subjects/driver/driver_kernel.py, each row with its source) is
        # refused before the first package moves; the DKMS build stays the proof otherwise
        missing += driver_kernel.refusals(self.version, self.kernels)
        if missing:
            raise StageError("not staging %s (nothing changed): %s" % (
                self.version, "; ".join(missing)))
        self.run_info = None
        if self.run_file:
            self.run_info = run_header(self.root, self.run_file, self.version)
        if self.source == "run":
            if not self.run_file:
                raise StageError("source run needs run_file: the .run on the host")
            return
        packages = self._host_packages()
        if not packages:
            raise StageError("source apt: driver_state lists no NVIDIA package on the host "
                             "(installed method %s): pass packages, or use source run"
                             % (installed.get("method") or "none"))
        self.host_packages, self.host_renamed = self._apt_plan(None, packages)

    def _apt_plan(self, vmid, packages):
        """``({pkg: debver}, {installed: new name})`` for the target, or StageError naming
        what apt lacks. Each installed package is asked for under its own name and its
        names in the other schemes (NVIDIA's repository drops the branch from 590 on:
        libnvidia-compute-580 -> libnvidia-compute): the repository's package list, as
        apt-cache madison shows it, decides which name the target has."""
        names = dict((p, scheme_names(p, self.version)) for p in packages)
        query = []
        for name in packages:
            query.extend(n for n in names[name] if n not in query)
        args = [self.p["apt_cache"] if vmid is None else "apt-cache", "madison"] + query
        where = "host" if vmid is None else vmid
        if vmid is None:
            _rc, out, _err = self._run(args, what="host: apt-cache madison")
        else:
            _rc, out, _err = self._pct(vmid, args)
        chosen, renamed, missing = pick_schemes(parse_madison(out), names, self.version)
        if missing:
            raise StageError("%s: unknown version %s: %s (nothing changed)" % (
                where, self.version, "; ".join(missing)))
        return chosen, renamed

    def _keep_previous(self):
        """The previous version's DKMS build (every kernel it is built for) and source
        kept before the install removes them, so a back-out needs no build."""
        host = self.result["host"]
        prev = host["previous"]
        if not prev or prev == self.version:
            return
        for name in [self.dkms_name] if self.dkms_name else DKMS_NAMES:
            tree = host_path(self.root, "/var/lib/dkms/%s/%s" % (name, prev))
            if not hostfs.isdir(tree):
                continue
            kernels = sorted(k for k in hostfs.listdir(tree)
                             if k not in ("source", "build") and hostfs.isdir(tree + "/" + k))
            kept = keep_build(self.root, name, prev, kernels, check_mode=self.check_mode,
                              warnings=self.warnings)
            host["kept_build"] = {"name": name, "version": prev, "kernels": kept,
                                  "path": kept_build(name, prev)}
            if kept:
                host["changed"] = True
            return

    def stage_host(self):
        host = self.result["host"]
        self._keep_previous()
        if self.source == "run":
            self._stage_host_run()
        else:
            self._stage_host_apt()
        name = self.dkms_name or self._find_dkms_name()
        host["dkms_name"] = name
        if name is None:
            if self.check_mode:
                host["dkms"] = [{"kernel": k, "state_before": None, "state_after": "installed",
                                 "changed": True} for k in self.kernels]
                return
            raise StageError("after the install no DKMS source /usr/src/<name>-%s exists "
                             "(tried %s): the driver's DKMS package is missing from the "
                             "packages" % (self.version, ", ".join(DKMS_NAMES)))
        try:
            added = dkms_build.add(self.runner, self.root, name, self.version,
                                   dkms=self.p["dkms"], check_mode=self.check_mode)
            if added:
                host["changed"] = True
            if not self.check_mode:
                host["restored"] = restore_build(self.root, name, self.version, self.kernels,
                                                 warnings=self.warnings)
            for release in self.kernels:
                if added and self.check_mode:
                    host["dkms"].append({"kernel": release, "state_before": None,
                                         "state_after": "installed", "changed": True})
                    continue
                done = dkms_build.ensure(self.runner, self.root, name, self.version, release,
                                         "installed", check_mode=self.check_mode,
                                         dkms=self.p["dkms"], replace=True)
                self.result["commands"].extend(done["commands"])
                host["dkms"].append({"kernel": release, "state_before": done["state_before"],
                                     "state_after": done["state_after"],
                                     "changed": done["changed"], "modules": done["modules"]})
                if done["changed"]:
                    host["changed"] = True
        except DkmsError as exc:
            raise StageError("host: DKMS %s %s: %s" % (name, self.version, exc))

    def _find_dkms_name(self):
        for name in DKMS_NAMES:
            if hostfs.isfile(host_path(self.root, "/usr/src/%s-%s/dkms.conf"
                                       % (name, self.version))):
                return name
        return None

    def _stage_host_apt(self):
        host = self.result["host"]
        installed = (self.state.get("host") or {}).get("installed") or {}
        have = dict((p["name"], p.get("version")) for p in installed.get("packages") or [])
        todo = dict((n, v) for n, v in self.host_packages.items() if have.get(n) != v)
        instead = dict((new, old) for old, new in self.host_renamed.items())
        host["packages"] = [dict({"name": n, "from": have.get(instead.get(n, n)), "to": v},
                                 **({"replaces": instead[n]} if n in instead else {}))
                            for n, v in sorted(self.host_packages.items())]
        if not todo:
            return
        host["changed"] = True
        host["kept_debs"] = keep_debs(self.root, dict((n, v) for n, v in have.items() if v),
                                      check_mode=self.check_mode, warnings=self.warnings)
        if self.check_mode:
            return
        unkeep_debs(self.root, todo, warnings=self.warnings)
        self._run([self.p["apt_get"]] + APT_INSTALL + pinned(todo)
                  + removed(self.host_renamed),
                  timeout=self.install_timeout, what="host: apt-get install")

    def _stage_host_run(self):
        host = self.result["host"]
        installed = (self.state.get("host") or {}).get("installed") or {}
        keep = kept_run(self.version, self.run_info["arch"])
        host["kept"] = keep
        full = host_path(self.root, keep)
        # the operator's run_file may be a link inside the root (run_header read it so):
        # copied from where it leads there, never through a link or from a FIFO
        source = hostfs.realpath(host_path(self.root, self.run_file))
        try:
            same = hostfs.isfile(full) and hostfs.getsize(full) == self.run_info["size"] \
                and same_file(source, full)
        except hostfs.NotRegularFile:
            same = False    # a link or FIFO at the kept name: replaced (the rename), not read
        if not same:
            host["changed"] = True
            if not self.check_mode:
                try:
                    copy_atomic(self.root, source, full)
                except hostfs.NotRegularFile as exc:
                    raise StageError("host: the .run is not kept: %s" % exc)
        if installed.get("method") == "run" and installed.get("version") == self.version:
            return
        host["changed"] = True
        if self.check_mode:
            return
        kernel = (["--kernel-name=%s" % self.kernels[0]] if self.kernels else [])
        self._run([self.p["installer"], full] + RUN_HOST + kernel,
                  timeout=self.install_timeout, what="host: NVIDIA installer")

    def stage(self):
        """Plan, then stage the host and the containers; a path that leads out of the root
        (a keep folder linked elsewhere) is a StageError naming it."""
        try:
            return self._stage()
        except hostfs.PathError as exc:
            raise StageError("%s (nothing was written there)" % exc)

    def _stage(self):
        self.plan_host()
        self.ct_plans = []
        try:
            self.plan_containers()
        except (StageError, hostfs.PathError):
            for plan in self.ct_plans:
                self._put_back(plan)
            raise
        try:
            self.stage_host()
        except (StageError, hostfs.PathError):
            for plan in self.ct_plans:
                self._put_back(plan)
            raise
        if self.result["host"]["changed"]:
            self.result["changed"] = True
        try:
            self.rewrite_binds()
        except (StageError, hostfs.PathError):
            for plan in self.ct_plans:
                self._put_back(plan)
            raise
        self.stage_containers()
        return self.result
