# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A snapshot over the sections the tune parts declare: collect, check, summarize, take,
restore and the restore's diff, each a loop over ``sections``
(``engines.tune.tune_registry.SECTIONS``:
every registered part with a ``snapshot_key``, in registry order, then the ``files``
section); and the snapshot's own two tune parts, which record through the sections on
their context.

A section (a tune part, or ``tune_registry.FILES``) has ``snapshot_key`` (its key in the
snapshot's ``state`` and in a restore's result), ``record(ctx)`` (its part of the state;
None leaves the key out), ``restore(ctx, recorded)`` (``(items, failures)``, each item
with ``status`` ok, changed, skipped or failed and a ``reason``), ``check(recorded, bad,
root)`` (``bad(what)`` raises for a damaged entry), ``summary(recorded)`` (keys of the
short view), ``diff_lines(item)`` (before, after), ``label`` (a format of an item naming
it) and ``restore_report`` (``(title, status, field)`` lines of the revert's summary).
``ctx`` (``SnapshotContext``) holds ``root``, ``params`` (module tuning_snapshot's
options), ``check_mode``, and for a restore ``path`` and ``state`` of the snapshot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.snapstore import (
    APPLIED,
    ORIGINAL,
    SnapshotError,
)

ERRORS = (SnapshotError, pci.PciError, cpu.CpuError, lxc.LxcError, ValueError,
          OSError)


class SnapshotContext(object):
    def __init__(self, root, params, check_mode=False, path=None, state=None):
        self.root = root
        self.params = params
        self.check_mode = bool(check_mode)
        self.path = path
        self.state = state


def checker(sections):
    """``check(doc, path, root)`` for ``snapstore.load``: every section's entries checked
    before a restore acts on any."""
    def check(doc, path, root=None):
        bad = snapstore.damaged(path)
        for section in sections:
            section.check(doc["state"].get(section.snapshot_key), bad, root)
    return check


def load(sections, path, root=None):
    return snapstore.load(path, root, checker(sections))


def collect(sections, ctx):
    """The current state of everything managed (the ``state`` of a snapshot document)."""
    state = {}
    for section in sections:
        value = section.record(ctx)
        if value is not None:
            state[section.snapshot_key] = value
    return state


def summarize(sections, state):
    """A short view of a state for results and reports."""
    out = {}
    for section in sections:
        out.update(section.summary(state.get(section.snapshot_key)))
    return out


def take(sections, ctx, kind="before"):
    """Record the current state (see ``snapstore.write_if_new``). Returns ``{changed, path
    (written or null), original, state}``."""
    folder = ctx.params["dir"]
    snapstore.snapshot_dir(ctx.root, folder)
    state = collect(sections, ctx)
    path = snapstore.write_if_new(ctx.root, kind, folder, state, ctx.check_mode,
                                  checker(sections))
    return {"changed": path is not None, "path": path,
            "original": os.path.join(folder, ORIGINAL), "state": state}


def restore(sections, ctx, name="original", parts=None):
    """Put the host back as snapshot ``name`` recorded it (``snapstore.resolve``), the
    sections in ``parts`` (all by default). Every item is tried; returns ``{changed,
    snapshot, taken_at, <section>: [items], failures}``. After a full restore
    ``applied.json`` is removed (the host is not in the applied state any more)."""
    folder = ctx.params["dir"]
    path = snapstore.resolve(ctx.root, name, folder)
    doc = load(sections, path, ctx.root)
    ctx.path, ctx.state = path, doc["state"]
    keys = [s.snapshot_key for s in sections]
    parts = set(parts or keys)
    result = {"snapshot": os.path.join(folder, os.path.basename(path)),
              "taken_at": doc.get("taken_at")}
    failures = []
    for section in sections:
        result[section.snapshot_key] = []
        if section.snapshot_key in parts:
            items, failed = section.restore(ctx, ctx.state.get(section.snapshot_key))
            result[section.snapshot_key] = items
            failures.extend(failed)
    changed = any(item["status"] == "changed" for key in keys for item in result[key])
    applied = os.path.join(snapstore.snapshot_dir(ctx.root, folder), APPLIED)
    if os.path.isfile(applied) and parts >= set(keys) and not failures:
        changed = True
        result["removed"] = os.path.join(folder, APPLIED)
        if not ctx.check_mode:
            os.unlink(applied)
    result["changed"] = changed
    result["failures"] = failures
    result["differs"] = ["%s %s" % (s.snapshot_key, s.label.format(**item)) for s in sections
                         for item in result[s.snapshot_key] if item["status"] == "changed"]
    result["report"] = ["%s: %s" % (title, (", " if field != "reason" else "; ").join(
        str(item.get(field)) for item in result[s.snapshot_key] if item["status"] == status)
        or "none") for s in sections for title, status, field in s.restore_report]
    return result


def restore_diff(sections, result):
    """Before (the host now) / after (the snapshot) of every item a restore changed."""
    before, after = [], []
    for section in sections:
        for item in result.get(section.snapshot_key) or []:
            if item["status"] == "changed":
                lines = section.diff_lines(item)
                before.append(lines[0] + "\n")
                after.append(lines[1] + "\n")
    return {"before_header": "host (now)", "after_header": result["snapshot"],
            "before": "".join(before), "after": "".join(after)}


# --- the tune parts (module host_tune; protocol in engines/tune/tune_registry.py) -----------------

# The part's option, declared once (engines/tune/tune_registry.py says how). lxc_config_dir,
# which the snapshot reads too, is a wanted value (tune.PER_KEY, ctx.wanted).
OPTIONS = dict(snapshot_dir=dict(
    type="path", default=snapstore.SNAPSHOT_DIR, role_var="gpuhost_tune_snapshot_dir",
    description="Folder of the snapshots on the host (under O(root)).",
    role_description="Folder of the snapshots on the host (under gpuhost_root)."))


def rules(p):
    """The snapshot folder stays under the root (host_tune's rules)."""
    validate.inside(p, "snapshot_dir")


def _tune_snapshot(ctx, kind, check_mode):
    """``tuning_snapshot``'s result of taking a snapshot of ``kind`` for host_tune."""
    p = ctx.params
    snap_ctx = SnapshotContext(ctx.root, dict(
        ctx.selection, dir=p["snapshot_dir"], sysctl_keys=list(p["sysctl"]),
        files=ctx.files, lxc_config_dir=p["lxc_config_dir"]), check_mode)
    try:
        taken = take(ctx.sections, snap_ctx, kind)
    except ERRORS as exc:
        return {"failed": True, "msg": str(exc), "changed": False}
    return {"changed": taken["changed"], "path": taken["path"], "original": taken["original"],
            "summary": summarize(ctx.sections, taken["state"]),
            "snapshots": snapstore.listing(ctx.root, p["snapshot_dir"])}


class BeforePart(object):
    """Record everything the tune parts manage before any of them runs; when it cannot be
    recorded nothing else runs (nothing is changed on a host whose state is unknown)."""

    name = "snapshot"
    owns = ()
    steps = ("snapshot_before",)
    stage = "before"
    options = OPTIONS
    rules = staticmethod(rules)
    role_doc = [
        "Record everything managed before any change (tag C(tune_snapshot)); the first "
        "snapshot ever is kept as C(original.json). Also records the applied state after."]

    def run(self, ctx):
        taken = _tune_snapshot(ctx, "before", ctx.check_mode)
        out = {"changed": bool(taken.get("changed")), "detail": {"snapshot_before": taken}}
        if taken.get("failed"):
            out["failures"] = ["snapshot: %s (nothing was changed)" % taken["msg"]]
            out["fields"] = {"snapshot": "FAILED: %s" % taken["msg"]}
        else:
            out["fields"] = {"snapshot": taken.get("path") or (
                "unchanged since the last recorded state; original: %s" % taken.get("original"))}
        return out

    def not_run(self, ctx, status):
        return {"fields": {"snapshot":
                           "unchanged since the last recorded state; original: not taken"}}


class AppliedPart(object):
    """Record the applied state, only when a tune part changed the host (planned in check
    mode)."""

    name = "snapshot"
    owns = ()
    steps = ("snapshot_applied",)
    stage = "after"
    options = OPTIONS
    rules = staticmethod(rules)

    def run(self, ctx):
        if not ctx.changed:
            return {}
        if ctx.check_mode:
            taken = {"changed": True, "path": None,
                     "msg": "check mode: applied state not recorded"}
        else:
            taken = _tune_snapshot(ctx, "applied", False)
        out = {"changed": bool(taken.get("changed")), "detail": {"snapshot_applied": taken}}
        if taken.get("failed"):
            out["failures"] = ["snapshot_applied: %s" % str(taken.get("msg") or "failed").strip()]
        return out

    def not_run(self, ctx, status):
        return {}


BEFORE_PART = BeforePart()
APPLIED_PART = AppliedPart()
