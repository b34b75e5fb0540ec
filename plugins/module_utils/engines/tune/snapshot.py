# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots of everything the tune role manages, and their exact restore: the
tuning_snapshot pass, a loop over the sections of the tune part registry.

A snapshot records, under a root, each section a registered tune part declares (the Max
Read Request Size and Device Control word of every GPU and bridge the pcie part touches,
the ``disable`` flag of every idle state of every online CPU by state name, each managed
sysctl, the live ``lxc.cgroup2.cpuset.cpus``/``.mems`` lines of every GPU container), and
each file, link or folder a part may write (content and mode, or that it does not exist).
Where the documents live and how they are named: ``platform/snapstore.py``; the loop:
``engines/tune/sections.py``; what each section records and how it is put back: the part's own
``record``/``restore`` in its subject's file (``engines/tune/tune_registry.py`` lists them).

Restore writes the recorded values back through the same readers and writers the tune
modules use (masked MRRS write with read-back, per-CPU idle flags with read-back, sysctls
with read-back), puts files back as recorded (removing those that did not exist), puts
each container's cpuset lines back byte for byte (its other lines as they are now), tries
every item, and reports each.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.lxc import lxc
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import sections
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore
# pylint: disable-next=unused-import
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.snapstore import (  # noqa: F401
    APPLIED,
    ORIGINAL,
    SNAPSHOT_DIR,
    SnapshotError,
    listing,
    resolve,
)

# Derived from the registry: the sections a snapshot holds and a restore may be limited
# to (module tuning_snapshot's ``parts``), and every path a tune part may write.
PARTS = tuple(s.snapshot_key for s in tune_registry.SECTIONS)
MANAGED_FILES = tune_registry.MANAGED_FILES


def snapshot_spec():
    """Option spec of module tuning_snapshot (its defaults fill ``snapshot_run``'s params)."""
    spec = dict(
        state=dict(type="str", choices=["present", "restore", "query"], default="present"),
        kind=dict(type="str", choices=["before", "applied"], default="before"),
        snapshot=dict(type="str", default="original"),
        parts=dict(type="list", elements="str", choices=list(PARTS), default=list(PARTS)),
        dir=dict(type="path", default=SNAPSHOT_DIR),
        sysctl_keys=dict(type="list", elements="str", default=[], no_log=False),
    )
    spec.update(argspec.device_selection())
    spec["files"] = dict(type="list", elements="path", default=list(MANAGED_FILES))
    spec["lxc_config_dir"] = dict(type="path", default=lxc.DEFAULT_CONFIG_DIR)
    spec.update(argspec.root())
    return spec


def load(path, root=None):
    """The snapshot document at ``path``, every section checked."""
    return sections.load(tune_registry.SECTIONS, path, root)


def restore(root, name="original", folder=SNAPSHOT_DIR, check_mode=False, parts=None,
            lxc_config_dir=lxc.DEFAULT_CONFIG_DIR):
    """Put the host back as snapshot ``name`` recorded it (``sections.restore``): ``parts``
    limits it to some of ``PARTS``."""
    ctx = sections.SnapshotContext(root, {"dir": folder, "lxc_config_dir": lxc_config_dir},
                                   check_mode)
    return sections.restore(tune_registry.SECTIONS, ctx, name, parts)


def restore_diff(result):
    return sections.restore_diff(tune_registry.SECTIONS, result)


def snapshot_run(params, check_mode=False):
    """The whole tuning_snapshot pass for ``params`` (the module's options; missing ones take
    its defaults). Returns the module's result; a failure is returned, not raised
    (``failed`` and ``msg``; see ``snapshot_failure``). A restore carries ``diff``."""
    p = argspec.fill(snapshot_spec(), params)
    root = p["root"]
    try:
        if p["state"] == "query":
            result = {"changed": False}
        elif p["state"] == "present":
            taken = sections.take(tune_registry.SECTIONS,
                                  sections.SnapshotContext(root, p, check_mode), p["kind"])
            result = {"changed": taken["changed"], "path": taken["path"],
                      "original": taken["original"],
                      "summary": sections.summarize(tune_registry.SECTIONS, taken["state"])}
        else:
            result = restore(root, name=p["snapshot"], folder=p["dir"],
                             check_mode=check_mode, parts=p["parts"],
                             lxc_config_dir=p["lxc_config_dir"])
            result["diff"] = restore_diff(result)
        result["snapshots"] = snapstore.listing(root, p["dir"])
    except sections.ERRORS as exc:
        return {"failed": True, "msg": str(exc), "changed": False}
    if result.get("failures"):
        result["failed"] = True
        result["msg"] = "restore of %s incomplete: %d item(s) did not take: %s" % (
            result["snapshot"], len(result["failures"]), "; ".join(result["failures"][:10]))
    return result


def snapshot_failure(result):
    """The failure message of a ``snapshot_run`` result, or None when it took."""
    return result.get("msg") if result.get("failed") else None
