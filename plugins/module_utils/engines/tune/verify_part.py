# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``verify`` tune part: audit again after the tune parts and list the findings they
own which remain (protocol in engines/tune/tune_registry.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class VerifyPart(object):
    """Audit again (only when a tune part changed the host, never in check mode) and list
    the findings owned by the parts that ran which remain (``ctx.managed``: finding id ->
    owning part, derived from the registry)."""

    name = "verify"
    owns = ()
    steps = ()
    stage = "after"
    options = {}
    role_doc = ("Audit again and fail the host when a pcie_mrrs, numa_balancing, "
                "cpuidle_deep_state, sysctl, gpu_numa_mismatch or gpu_container_unpinned "
                "finding of an enabled part remains (tag C(tune_verify)).")

    def run(self, ctx):
        if ctx.check_mode:
            return {}
        after = ctx.audit() if ctx.changed else ctx.before
        ids = dict((fid, part) for fid, part in ctx.managed.items() if part in ctx.on)
        remaining = [f for f in after["findings"] if f["id"] in ids
                     and f["subject"] not in ctx.skipped.get(ids[f["id"]], ())]
        return {"fields": {"findings_after": remaining, "verified": True,
                           "audit_again": after is not ctx.before},
                "failures": ["still off after tuning: %s %s: %s (want %s)" % (
                    f["id"], f["subject"], f["current"], f["expected"]) for f in remaining]}

    def not_run(self, ctx, status):
        return {}


VERIFY_PART = VerifyPart()
