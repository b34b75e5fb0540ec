# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pinning a GPU container to its GPUs' NUMA node: the tune's placement part writes
``lxc.cgroup2.cpuset.cpus`` and ``cpuset.mems`` into the live section of the container's
config, every other byte kept (the container picks them up at its next start), and the
snapshot puts the recorded lines back.

Finding the GPUs, nodes and CPU sets is subjects/placement/placement.py's; the audit imports only
that
(docs/architecture.md, "What the audit imports")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc_write
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import atomic_write
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.placement.placement import (
    collect,
    container_gpu_minors,
    mismatch_findings,
    unpinned_findings,
    wanted_sets,
)

PIN_KEYS = (lxc.CPUSET_CPUS_KEY, lxc.CPUSET_MEMS_KEY)


# cgroup v1 spellings: on a cgroup v2 host lxc ignores them; the part leaves them to the
# operator rather than guess which line counts.
V1_KEYS = ("lxc.cgroup.cpuset.cpus", "lxc.cgroup.cpuset.mems")


APPLIED_NOTE = "applied at the container's next start (a running container keeps its old " \
               "cpuset: pct reboot %s to apply now)"


class PinRefused(Exception):
    """A container the part will not pin (what to do in the message)."""


def _config_path(root, vmid, config_dir):
    return lxc.config_path(root, vmid, config_dir)


def pin_record(root, config_dir=lxc.DEFAULT_CONFIG_DIR):
    """``{"<vmid>": {key: [raw lines]}}`` for the two cpuset keys of every container whose
    live section passes in a ``/dev/nvidiaN``: the lines exactly as written (none: the key
    is absent), what a snapshot keeps so that a restore puts these bytes back."""
    out = {}
    for vmid, path in lxc.list_configs(root, config_dir):
        try:
            config = lxc.LxcConfig.read(path)
        except lxc.LxcError:
            continue
        if not container_gpu_minors(config):
            continue
        out[str(vmid)] = dict((key, lxc_write.live_key_lines(config, key)) for key in PIN_KEYS)
    return out


def _write_config(root, path, config, new, check):
    """Write ``new`` over ``path`` (atomically, mode and owner kept; pmxcfs allows no
    chmod; a linked config where its link leads inside ``root``, so the link stays)
    unless ``check``, then read it back. Returns the diff, or None when unchanged."""
    before, after = config.render(), new.render()
    if before == after:
        return None
    target = lxc_write.write_target(root, path)
    if not check:
        atomic_write(target, new.render_bytes(), chmod=False)
        if lxc.LxcConfig.read(target).render() != after:
            raise lxc.LxcError("%s does not hold what was just written: is /etc/pve "
                               "read-only (no quorum)?" % path)
    return {"before": before, "after": after}


def _lines_text(lines):
    return " | ".join(lines) or "none"


def _refusal(config, ct, held):
    """Why the part will not pin this container, or None (``held``: see pin_run)."""
    name = "lxc %s (%s)" % (ct["vmid"], ct["path"])
    v1 = [key for key in V1_KEYS if config.get_all(key)]
    if v1:
        return ("%s: not pinned: it sets %s (cgroup v1, which a cgroup v2 host ignores): "
                "replace it by %s by hand, or drop it, then run again" % (
                    name, ", ".join(v1), " / ".join(PIN_KEYS)))
    for key in PIN_KEYS:
        lines = lxc_write.live_key_lines(config, key)
        if len(lines) > 1:
            return ("%s: not pinned: %s is set on %d live lines (%s): keep one (lxc uses "
                    "the last), then run again" % (name, key, len(lines), " | ".join(lines)))
    if held is not None:
        record = dict((key, lxc_write.live_key_lines(config, key)) for key in PIN_KEYS)
        why = held(ct["vmid"], record)
        if why:
            return "%s: not pinned: %s" % (name, why)
    return None


def check_vmids(root, vmids, facts, config_dir=lxc.DEFAULT_CONFIG_DIR):
    """Raise PinRefused (naming the option and value) for a listed VMID without a config
    or without a GPU, before anything is written."""
    gpu = set(ct["vmid"] for ct in facts["containers"])
    have = [v for v, _p in lxc.list_configs(root, config_dir)]
    for vmid in vmids or []:
        if int(vmid) not in have:
            raise PinRefused(
                "numa_pin_vmids: %r is not allowed: no container config %s/%s.conf "
                "(containers there: %s); nothing was written" % (
                    vmid, config_dir.rstrip("/"), vmid,
                    ", ".join(str(v) for v in have) or "none"))
        if int(vmid) not in gpu:
            raise PinRefused(
                "numa_pin_vmids: %r is not allowed: its live config passes in no "
                "/dev/nvidiaN, so it has no GPU to be near (GPU containers: %s); nothing was "
                "written" % (vmid, ", ".join(str(v) for v in sorted(gpu)) or "none"))


def pin_run(root, config_dir=lxc.DEFAULT_CONFIG_DIR, vmids=None, check_mode=False,
            held=None):
    """Pin the GPU containers the audit finds misplaced (``gpu_numa_mismatch``,
    ``gpu_container_unpinned``; only those in ``vmids`` when given):
    ``lxc.cgroup2.cpuset.cpus`` to the CPUs of their GPUs' nodes and
    ``lxc.cgroup2.cpuset.mems`` to those nodes, in the live section (pending and snapshot
    sections and every other byte kept). A container already placed right is left as it is
    (a narrower cpuset on the right node stays). Takes effect at the container's next start.

    ``held(vmid, lines)``: None when the snapshot a revert uses holds the container's
    current cpuset lines (``lines`` as :func:`pin_record` gives one container's), else why
    not; a container it does not hold, or one with repeated or cgroup v1 cpuset lines, is
    refused (``error``) and left as it is. None: every container counts as held. A
    container not in ``vmids`` is skipped; a listed VMID without a config or without a GPU
    raises PinRefused before anything is written.

    Returns ``{changed, containers: [{vmid, path, before: {cpus, mems}, after: {cpus, mems},
    changed, skipped_reason, error}], failed, diff, message}``. A container that fails is
    reported and the others still run."""
    facts = collect(root, config_dir)
    check_vmids(root, vmids, facts, config_dir)
    nodes = facts["nodes"]
    misplaced = set(int(f["subject"].split()[1])
                    for f in mismatch_findings(facts) + unpinned_findings(facts))
    wanted = set(int(v) for v in vmids) if vmids else None
    rows, diffs, failed = [], [], []
    changed = False
    for ct in facts["containers"]:
        row = {"vmid": ct["vmid"], "path": ct["path"],
               "before": {"cpus": ct["cpuset_cpus"], "mems": ct["cpuset_mems"]},
               "after": {"cpus": ct["cpuset_cpus"], "mems": ct["cpuset_mems"]},
               "changed": False}
        rows.append(row)
        if wanted is not None and ct["vmid"] not in wanted:
            row["skipped_reason"] = "not in numa_pin_vmids"
            continue
        cpus, mems = wanted_sets(ct, nodes, everywhere=ct["cpu_nodes"] is not None)
        if len(nodes) < 2:
            row["skipped_reason"] = "one NUMA node"
            continue
        if not ct["gpu_nodes"]:
            row["skipped_reason"] = "the NUMA node of its GPUs is unknown"
            continue
        if ct["vmid"] not in misplaced or cpus is None:
            row["skipped_reason"] = ("its GPUs sit on every node" if cpus is None else
                                     "already on its GPUs' nodes")
            continue
        try:
            path = _config_path(root, ct["vmid"], config_dir)
            config = lxc.LxcConfig.read(path)
            why = _refusal(config, ct, held)
            if why:
                raise PinRefused(why)
            new = lxc_write.with_live_values(config, [(lxc.CPUSET_CPUS_KEY, cpus),
                                                      (lxc.CPUSET_MEMS_KEY, mems)])
            diff = _write_config(root, path, config, new, check_mode)
        except (PinRefused, lxc.LxcError, OSError) as exc:
            row["error"] = str(exc)
            failed.append(ct["vmid"])
            continue
        row["after"] = {"cpus": cpus, "mems": mems}
        row["changed"] = diff is not None
        if diff:
            changed = True
            diffs.append(dict(diff, before_header=ct["path"], after_header=ct["path"]))
    return {"changed": changed, "containers": rows, "failed": failed, "diff": diffs,
            "message": APPLIED_NOTE % "<vmid>" if changed else None}


def _changed_since(vmid, config, want, left):
    """Why the revert must leave container ``vmid``'s cpuset lines, or None: ``left`` (its
    lines as the tune left them, :func:`pin_record` in the applied snapshot) differ from
    the lines now, which are not the recorded ``want`` either, so someone set them after
    the tune; the revert leaves them as the tune leaves an operator's lines."""
    now = dict((key, lxc_write.live_key_lines(config, key)) for key in PIN_KEYS)
    moved = [key for key in PIN_KEYS if key in left and now[key] != list(left[key])]
    if not moved or all(now[key] == list(want.get(key, now[key])) for key in PIN_KEYS):
        return None
    return ("lxc %s: not reverted: its cpuset lines (%s) were changed after the tune, which "
            "left %s, so they are the operator's; set them by hand (the original: %s), or "
            "put back what the tune left to let the revert restore the original" % (
                vmid, _lines_text([ln for key in PIN_KEYS for ln in now[key]]),
                _lines_text([ln for key in PIN_KEYS for ln in left.get(key, now[key])]),
                _lines_text([ln for key in PIN_KEYS for ln in want.get(key, now[key])])))


def pin_restore(root, recorded, config_dir=lxc.DEFAULT_CONFIG_DIR, check_mode=False,
                applied=None):
    """Put the recorded cpuset lines (:func:`pin_record`) back, byte for byte: ``{changed,
    containers: [{vmid, before, after, status (ok, changed, skipped, failed), reason}],
    failures}``; ``before``/``after`` are the lines now and as recorded. A container whose
    config is gone is skipped; every container is tried. ``applied``: the lines as the tune
    left them (the applied snapshot's ``placement``); a container whose lines are neither
    those nor the recorded ones was changed after the tune and is refused (failed, left
    as it is), as the tune refuses an operator's lines."""
    rows, failures = [], []
    changed = False
    for vmid in sorted(recorded or {}, key=int):
        want = recorded[vmid] or {}
        path = _config_path(root, vmid, config_dir)
        row = {"vmid": int(vmid), "status": "ok"}
        rows.append(row)
        if not hostfs.exists(path):
            row.update(status="skipped", reason="%s is gone: nothing to restore" % path)
            continue
        try:
            config = lxc.LxcConfig.read(path)
            why = _changed_since(vmid, config, want, (applied or {}).get(vmid) or {})
            if why:
                row.update(status="failed", reason=why,
                           before=[ln for key in PIN_KEYS
                                   for ln in lxc_write.live_key_lines(config, key)])
                row["after"] = row["before"]
                failures.append(why)
                continue
            new = config
            for key in PIN_KEYS:
                if key in want and lxc_write.live_key_lines(new, key) != list(want[key]):
                    new = lxc_write.with_live_lines(new, key, list(want[key]))
            row["before"] = [ln for key in PIN_KEYS
                             for ln in lxc_write.live_key_lines(config, key)]
            row["after"] = [ln for key in PIN_KEYS for ln in lxc_write.live_key_lines(new, key)]
            if _write_config(root, path, config, new, check_mode) is not None:
                row["status"] = "changed"
                changed = True
        except (lxc.LxcError, OSError) as exc:
            row.update(status="failed", reason="lxc %s: %s" % (vmid, exc))
            failures.append(row["reason"])
    return {"changed": changed, "containers": rows, "failures": failures}


def _line_value(lines):
    """The value lxc uses (the last line's), None without a line."""
    return lxc.Line(lines[-1], "", None).value if lines else None


def _sets_text(values):
    if not values.get("cpus") and not values.get("mems"):
        return "unpinned"
    return "cpus %s, mems %s" % (values.get("cpus") or "-", values.get("mems") or "-")


def _to_restore(root, folder, path, state):
    """The snapshot's cpuset lines per container, completed from the later before-snapshots
    (oldest first) for containers it does not hold."""
    pins = dict(state.get("placement") or {})
    names = [n for n in snapstore.listing(root, folder) if n != snapstore.APPLIED]
    here = os.path.basename(path)
    for name in names[names.index(here) + 1:] if here in names else []:
        try:
            later = snapstore.load(os.path.join(snapstore.snapshot_dir(root, folder), name),
                                   root)["state"].get("placement") or {}
        except snapstore.SnapshotError:
            continue
        for vmid, keys in later.items():
            pins.setdefault(vmid, keys)
    return pins


def _applied(root, folder):
    """The cpuset lines per container as the last tune left them (``applied.json``), so
    the revert can tell the tune's lines from an operator's later ones: ``{}`` without it."""
    path = os.path.join(snapstore.snapshot_dir(root, folder), snapstore.APPLIED)
    if not os.path.isfile(path):
        return {}
    try:
        return snapstore.load(path, root)["state"].get("placement") or {}
    except snapstore.SnapshotError:
        return {}


def revert_placement(root, folder=snapstore.SNAPSHOT_DIR):
    """``(cpuset lines per container, snapshot path)`` that a revert to the original
    (the role's default) puts back: ``({}, path)`` when there is no snapshot yet."""
    base = snapstore.snapshot_dir(root, folder)
    path = os.path.join(base, snapstore.ORIGINAL)
    if not os.path.isfile(path):
        names = [n for n in snapstore.listing(root, folder) if n != snapstore.APPLIED]
        if not names:
            return {}, os.path.join(folder, snapstore.ORIGINAL)
        path = os.path.join(base, names[0])
    state = snapstore.load(path, root)["state"]
    return _to_restore(root, folder, path, state), os.path.join(folder, os.path.basename(path))


def _revert_check(ctx, config_dir):
    """``held`` for pin_run: the cpuset lines a revert to the original would put back per
    container (revert_placement) must be the lines the container has now."""
    try:
        recorded, original = revert_placement(ctx.root, ctx.params["snapshot_dir"])
    except snapstore.SnapshotError as exc:
        raise ValueError(str(exc))
    # A container no snapshot holds yet is recorded first by this run's snapshot part (in
    # check mode it would be).
    planned = "snapshot" in ctx.on and ctx.check_mode

    def held(vmid, lines):
        have = recorded.get(str(vmid))
        if have is None:
            if planned:
                return None
            return ("no snapshot holds its cpuset lines (%s), so a revert could not put "
                    "them back: run with the snapshot part on (gpuhost_tune_snapshot: true; "
                    "host_tune parts: [snapshot, numa_pin])" % _lines_text(
                        [ln for key in PIN_KEYS for ln in lines[key]]))
        now = [ln for key in PIN_KEYS for ln in lines[key]]
        then = [ln for key in PIN_KEYS for ln in have.get(key) or []]
        if now == then:
            return None
        return ("its cpuset lines (%s) were set after the snapshot a revert uses (%s holds "
                "%s), so a revert would not put them back: they are the operator's; change "
                "them by hand (pct stop; edit; pct start), or remove them and run again"
                % (_lines_text(now), original, _lines_text(then)))
    return held


class NumaPinPart(object):
    """Opt-in (``default_on`` False): pin misplaced GPU containers to their GPUs' NUMA
    nodes in their config; applied at each container's next start, which the rows say.
    It changes a container's cpuset lines only when the snapshot a revert to the original
    uses for that container holds them as they are now (the original; for a container the
    original does not hold, the oldest later before-snapshot that does, which with the
    snapshot part on is at the latest the one this run took): lines an operator set after
    the original are left to the operator, as an operator's sysctl file is."""

    name = "numa_pin"
    owns = ("gpu_numa_mismatch", "gpu_container_unpinned")
    steps = ("numa_pin",)
    stage = "tune"
    default_on = False
    # lxc_config_dir, the folder it edits, is a wanted value (tune.PER_KEY, ctx.wanted)
    options = dict(numa_pin_vmids=dict(
        type="list", elements="int", role_var="gpuhost_tune_numa_pin_vmids",
        description="With C(numa_pin), pin only these containers (others are reported as "
                    "skipped); each must have a config with a C(/dev/nvidiaN). Default all GPU "
                    "containers.",
        role_description="With gpuhost_tune_numa_pin, pin only these containers (each must "
                         "have a config with a C(/dev/nvidiaN)); unset or empty pins every "
                         "misplaced GPU container."))

    @staticmethod
    def rules(p):
        """Proxmox guest ids (host_tune's rules)."""
        for vmid in p.get("numa_pin_vmids") or []:
            validate.int_range("numa_pin_vmids", vmid, *validate.VMID_RANGE)

    role_doc = [
        "Opt-in (tag C(tune_numa_pin)). Pin each GPU container the audit finds misplaced "
        "(C(gpu_numa_mismatch), C(gpu_container_unpinned)) to its GPUs' NUMA nodes - "
        "C(lxc.cgroup2.cpuset.cpus) and C(lxc.cgroup2.cpuset.mems) in the live section of its "
        "config in gpuhost_lxc_config_dir, every other byte kept.",
        "Applied at the container's next start (a running container keeps its old cpuset; "
        "the report row says so). Changes only cpuset lines the snapshot a revert uses holds "
        "as they are (keep gpuhost_tune_snapshot on); the revert puts them back byte for "
        "byte. Lines set by hand after that snapshot are refused as the operator's.",
        "Trade-off - the container then runs on those CPUs only and pvestatd no longer "
        "balances it; size its C(cores) to match."]
    # the snapshot's section (protocol in engines/tune/tune_registry.py): the cpuset lines of every
    # GPU
    # container; a host without GPU containers records what it recorded before
    snapshot_key = "placement"
    label = "lxc {vmid}"
    restore_report = (("container cpuset lines put back", "changed", "vmid"),)

    def record(self, ctx):
        return pin_record(ctx.root, ctx.params["lxc_config_dir"]) or None

    def restore(self, ctx, recorded):
        """A container the snapshot does not hold (one it predates, or a snapshot taken
        before cpuset lines were recorded) gets the lines of the oldest later
        before-snapshot that holds it: the state before the tune run that first saw it."""
        folder = ctx.params["dir"]
        done = pin_restore(ctx.root, _to_restore(ctx.root, folder, ctx.path, ctx.state),
                           ctx.params["lxc_config_dir"], ctx.check_mode,
                           _applied(ctx.root, folder))
        return done["containers"], done["failures"]

    def check(self, recorded, bad, root):
        if not isinstance(recorded or {}, dict):
            bad("placement is not a mapping of container to cpuset lines")
        for vmid, keys in (recorded or {}).items():
            if not str(vmid).isdigit() or not isinstance(keys, dict):
                bad("placement container %r is not a VMID with its cpuset lines" % (vmid,))
            for key, lines in keys.items():
                if key not in PIN_KEYS or not isinstance(lines, list):
                    bad("placement lxc %s: key %r" % (vmid, key))
                for raw in lines:
                    line = lxc.Line(raw, "", None) if isinstance(raw, str) else None
                    if line is None or "\n" in raw or line.kind != "kv" or line.key != key:
                        bad("placement lxc %s: %r is not one %s line" % (vmid, raw, key))

    def summary(self, recorded):
        return {"placement": dict((vmid, dict((key.rsplit(".", 1)[1], _line_value(lines))
                                              for key, lines in keys.items()))
                                  for vmid, keys in (recorded or {}).items())}

    def diff_lines(self, item):
        return ("lxc %s: %s" % (item["vmid"], " | ".join(item["before"]) or "none"),
                "lxc %s: %s" % (item["vmid"], " | ".join(item["after"]) or "none"))

    def run(self, ctx):
        params = ctx.params
        config_dir = params.get("lxc_config_dir") or lxc.DEFAULT_CONFIG_DIR
        try:
            held = _revert_check(ctx, config_dir)
            res = pin_run(ctx.root, config_dir, params.get("numa_pin_vmids"),
                          ctx.check_mode, held=held)
        except (PinRefused, lxc.LxcError, OSError, ValueError) as exc:
            # "nothing was written" is numa_pin's own part: the parts before it in the same
            # run may have written, so say which
            wrote = [name for name, changed in getattr(ctx, "ran", ()) if changed]
            msg = "%s by numa_pin; %s" % (exc, "the parts before it in this run %s: %s" % (
                "would change (check mode)" if ctx.check_mode else "changed the host and "
                "are kept", ", ".join(wrote)) if wrote else "no part before it changed anything")
            return {"failures": ["numa_pin: %s" % msg],
                    "detail": {"numa_pin": {"failed": True, "msg": msg}}}
        rows, failures, skipped = [], [], []
        for row in res["containers"]:
            item = "lxc %s" % row["vmid"]
            if row.get("error"):
                status, note = "failed", row["error"]
                failures.append("numa_pin: %s" % row["error"])
                skipped.append(item)  # reported as a failure once, not again by verify
            elif row.get("skipped_reason"):
                status, note = "skipped", row["skipped_reason"]
                skipped.append(item)
            elif row["changed"]:
                status, note = "changed", APPLIED_NOTE % row["vmid"]
            else:
                status, note = "ok", None
            rows.append((item, _sets_text(row["before"]), _sets_text(row["after"]), status,
                         note))
        return {"changed": res["changed"], "rows": rows, "diffs": res["diff"],
                "failures": failures, "skipped": skipped, "detail": {"numa_pin": res}}

    def not_run(self, ctx, status):
        return {}


TUNE_PART = NumaPinPart()
