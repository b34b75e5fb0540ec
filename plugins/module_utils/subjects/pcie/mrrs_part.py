# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The setpci_maxreadreq module's pass (``mrrs_spec``, ``mrrs_run``) and the tune's pcie part
(``TUNE_PART``) over the MRRS writes of subjects/pcie/setpci_maxreadreq.py. Apart from the
writes so that the boot-time program, which runs only the writes, ships none of this."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import deprecated
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.pci_ids import MRRS_SIZES
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import CommandError
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import audit_pcie
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.pci import (
    PciDevice,
    PciError,
    _SYSFS_BDF_RE,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.setpci_maxreadreq import (  # noqa: E501
    lockdown_state,
    plan_mrrs,
    set_mrrs,
    tune_mrrs,
)


def mrrs_spec():
    """Option spec of module setpci_maxreadreq (its defaults fill ``mrrs_run``'s params)."""
    spec = dict(devices=dict(type="list", elements="str"))
    spec.update(argspec.device_selection())
    spec.update(
        mrrs_size=audit_pcie.mrrs_size(**deprecated.aliases("setpci_maxreadreq", "mrrs_size")),
        state=dict(type="str", default="present", choices=["present", "query"]),
        method=dict(type="str", default="sysfs", choices=["sysfs", "setpci"]),
    )
    spec.update(argspec.root())
    return spec


def mrrs_diff(devices):
    """Before/after of every device's MRRS, as an Ansible diff."""
    def text(key):
        return "".join("%s %s: %s\n" % (d["address"], d["role"], d[key])
                       for d in devices if d.get("before") is not None)
    return {"before_header": "Max Read Request Size (bytes)",
            "after_header": "Max Read Request Size (bytes)",
            "before": text("before"), "after": text("after")}


def mrrs_run(params, check_mode=False, runner=None, warn=None):
    """The whole setpci_maxreadreq pass for ``params`` (the module's options; missing ones
    take its defaults). Returns the module's result with ``diff``; per-device failures are in
    it (see ``mrrs_failure``). Raises ValueError/PciError/OSError when nothing could be done.
    ``warn(text)``: no device matched, or a lockdown that will refuse the planned writes."""
    p = argspec.fill(mrrs_spec(), params)
    result = tune_mrrs(
        p["root"], size=p["mrrs_size"], devices=p["devices"], vendor=p["vendor"],
        classes=p["classes"], include_upstream=p["include_upstream"], state=p["state"],
        method=p["method"], runner=runner, check_mode=check_mode)
    if warn is not None:
        if not result["devices"] and not p["devices"]:
            warn("no PCI device matched vendor %s and classes %s under %s"
                 % (p["vendor"], ", ".join(p["classes"]), p["root"]))
        mode = lockdown_state(p["root"])
        if check_mode and result["changed"] and mode not in (None, "none"):
            warn("the kernel is in lockdown mode %r: the PCI config writes this run plans "
                 "will be refused (EPERM)" % mode)
    result["diff"] = mrrs_diff(result["devices"])
    return result


def mrrs_failure(result):
    """The failure message of an ``mrrs_run`` result, or None when every device took."""
    if not result.get("failed_devices"):
        return None
    errors = [d["error"] for d in result["devices"] if d.get("error")]
    return ("Max Read Request Size not set on %d of %d devices: %s. %s"
            % (len(result["failed_devices"]), len(result["devices"]),
               ", ".join(result["failed_devices"]), " ".join(errors)))


class MrrsPart(object):
    """Set the Max Read Request Size of the GPUs and their bridges (``mrrs_run``); a device
    that did not take is a failure, the others are still set."""

    name = "pcie"
    owns = ("pcie_mrrs",)
    steps = ("pcie",)
    stage = "tune"
    options = dict(mrrs_method=dict(
        type="str", default="sysfs", choices=["sysfs", "setpci"],
        role_var="gpuhost_tune_mrrs_method",
        description="How MRRS is written now (the boot service always uses sysfs)."))
    role_doc = "Set MRRS gpuhost_mrrs_size on every GPU and its bridges (tag C(tune_pcie))."
    # the snapshot's section (protocol in engines/tune/tune_registry.py)
    snapshot_key = "pcie"
    label = "{address}"
    restore_report = (("MRRS restored", "changed", "address"),)

    def run(self, ctx):
        p = ctx.params
        try:
            res = mrrs_run(dict(ctx.selection, mrrs_size=p["mrrs_size"], method=p["mrrs_method"],
                                state="present", root=ctx.root),
                           ctx.check_mode, ctx.runner, warn=ctx.warn)
        except (ValueError, OSError, CommandError, PciError) as exc:
            return self.not_run(ctx, "failed", str(exc), bool(getattr(exc, "written", None)))
        diff = res.pop("diff")
        out = {"changed": res["changed"], "detail": {"pcie": res},
               "diffs": [diff] if diff.get("before") != diff.get("after") else []}
        msg = mrrs_failure(res)
        if msg:
            res.update(failed=True, msg=msg)
            out["failures"] = ["pcie: %s" % msg.strip()]
        if not res["devices"]:
            out["rows"] = self.not_run(ctx, "failed" if msg else "no GPU", msg)["rows"]
        else:
            out["rows"] = [("%s %s MRRS" % (d["address"], d["role"]), d.get("before"),
                            d.get("after"), _row_status(d),
                            d.get("error") or d.get("skipped_reason") or "")
                           for d in res["devices"]]
        return out

    def not_run(self, ctx, status, msg="", written=False):
        if status == "not run":  # the pass stopped before: reported as the host stands
            status = "no GPU"
        out = {"rows": [("MRRS", "", "", status,
                         msg or "no device of vendor %s" % ctx.params["gpu_vendor"])]}
        if status == "failed":
            out["changed"] = written  # what was written before the failure
            out["detail"] = {"pcie": {"failed": True, "changed": written, "msg": msg}}
            out["failures"] = ["pcie: %s" % (msg or "failed").strip()]
        return out

    def record(self, ctx):
        """``[{address, role, vendor, device, mrrs, devctl}]`` (devices without a PCIe
        capability or SR-IOV VFs are left out: they have no MRRS to restore)."""
        p = ctx.params
        query = tune_mrrs(ctx.root, size=4096, vendor=p["vendor"], classes=p["classes"],
                          include_upstream=p["include_upstream"], state="query")
        return [dict(address=d["address"], role=d["role"], vendor=d["vendor"],
                     device=d["device"], mrrs=d["before"], devctl=d["devctl_before"])
                for d in query["devices"] if d["before"] is not None]

    def restore(self, ctx, recorded):
        items, failures = [], []
        for rec in recorded or []:
            entry = {"address": rec["address"], "role": rec["role"], "wanted": rec["mrrs"]}
            try:
                dev = PciDevice(ctx.root, rec["address"])
                plan = plan_mrrs(dev, rec["mrrs"])
                if not plan["pcie"]:
                    raise PciError("PCI device %s has no PCI Express capability now"
                                   % rec["address"])
                entry["before"] = plan["before"]
                if not plan["changed"]:
                    entry.update(after=plan["before"], status="ok")
                elif ctx.check_mode:
                    entry.update(after=rec["mrrs"], status="changed")
                else:
                    entry.update(after=set_mrrs(dev, rec["mrrs"])["after"], status="changed")
            except (PciError, ValueError, OSError) as exc:
                entry.update(status="failed", reason=str(exc))
                failures.append(str(exc))
            items.append(entry)
        return items, failures

    def check(self, recorded, bad, root):
        for dev in recorded or []:
            if not isinstance(dev, dict) or not isinstance(dev.get("address"), str) or \
                    not _SYSFS_BDF_RE.match(dev["address"]):
                bad("pcie entry %r has no valid PCI address" % (dev,))
            if dev.get("mrrs") not in MRRS_SIZES:
                bad("pcie %s: MRRS %r is not one of %s" % (dev["address"], dev.get("mrrs"),
                                                           list(MRRS_SIZES)))

    def summary(self, recorded):
        return {"pcie": dict((d["address"], d["mrrs"]) for d in recorded or [])}

    def diff_lines(self, item):
        return ("MRRS %s: %s" % (item["address"], item.get("before")),
                "MRRS %s: %s" % (item["address"], item.get("after")))


def _row_status(dev):
    if dev.get("error") is not None:
        return "failed"
    if dev.get("skipped_reason") is not None:
        return "skipped"
    return "ok" if dev.get("before") == dev.get("after") else "changed"


TUNE_PART = MrrsPart()
