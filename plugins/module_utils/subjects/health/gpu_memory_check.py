# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column GPU memory: ECC mode and errors, row remapping, retired pages (from the audit's
one ``nvidia-smi -q -x``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    check,
    column,
    found,
    limit,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health.gpu_health import (
    smi_applies,
    smi_gpus,
)

COLUMN = column("gpu_memory", "GPU memory", position=44, applies=smi_applies)

# NVIDIA's replacement threshold for dynamic page retirement (GPUs before Ampere).
RETIRED_PAGES_RMA = 60


def _addr(gpu):
    return gpu.get("address") or "?"


@check("gpu_row_remap_failed", COLUMN, severity="critical", order=41)
def gpu_row_remap_failed(facts, wanted):
    for gpu in smi_gpus(facts):
        if gpu.get("remapped_rows_failure"):
            yield found(
                _addr(gpu), "row remapping failed", "no remapping failure",
                "hardware service: the GPU has no spare row left for a failing one; drain "
                "it and open an RMA case with the vendor (nvidia-bug-report.sh)")


@check("gpu_retired_pages", COLUMN, severity="high", severities=("high", "critical", "low"),
       order=42)
def gpu_retired_pages(facts, wanted):
    """Dynamic page retirement (before Ampere): pending high (reboot), at NVIDIA's threshold
    of 60 critical, double-bit ones below it low."""
    for gpu in smi_gpus(facts):
        addr = _addr(gpu)
        sbe, dbe = gpu.get("retired_pages_sbe") or 0, gpu.get("retired_pages_dbe") or 0
        if gpu.get("retired_pages_pending"):
            yield found(
                addr, "page retirement pending (%d retired)" % (sbe + dbe), "nothing pending",
                "reset the GPU (nvidia-smi -r -i %s, its processes stopped) or reboot so the "
                "pending pages are retired" % addr, reboot_required=True, severity="high")
        elif sbe + dbe >= RETIRED_PAGES_RMA:
            yield found(
                addr, "%d pages retired" % (sbe + dbe), "fewer than %d" % RETIRED_PAGES_RMA,
                "hardware service: NVIDIA's replacement threshold is %d retired pages"
                % RETIRED_PAGES_RMA, severity="critical")
        elif dbe:
            yield found(addr, "%d pages retired (%d double-bit)" % (sbe + dbe, dbe),
                        "0 retired", "watch the count", severity="low")


@check("gpu_row_remap_pending", COLUMN, severity="high", order=46)
def gpu_row_remap_pending(facts, wanted):
    host = wanted.get("host")
    for gpu in smi_gpus(facts):
        if gpu.get("remapped_rows_pending"):
            addr = _addr(gpu)
            yield found(
                addr, "row remap pending (%s correctable, %s uncorrectable rows remapped)" % (
                    gpu.get("remapped_rows_correctable"),
                    gpu.get("remapped_rows_uncorrectable")),
                "no remap pending",
                "the remap takes effect at the next GPU reset: when its work allows, stop "
                "its processes and containers and run nvidia-smi -r -i %s, or reboot: "
                "ansible-playbook %s%s -e gpuhost_reboot_verify_reboot=true" % (
                    addr, PLAYBOOK_REBOOT, limit(host)),
                reboot_required=True)


@check("gpu_ecc_uncorrectable", COLUMN, severity="high", severities=("high", "medium"),
       order=47)
def gpu_ecc_uncorrectable(facts, wanted):
    """Volatile (since the driver loaded) uncorrectable errors high; lifetime (aggregate)
    ones only medium: row remapping or page retirement has dealt with those."""
    for gpu in smi_gpus(facts):
        addr = _addr(gpu)
        vol = gpu.get("ecc_volatile_uncorrectable")
        agg = gpu.get("ecc_aggregate_uncorrectable")
        if vol:
            yield found(
                addr, "%d uncorrectable since the driver loaded (%s in its lifetime)"
                % (vol, agg), "0 uncorrectable",
                "reset the GPU (nvidia-smi -r -i %s, its processes stopped) or reboot; if "
                "the count comes back, hardware service" % addr, reboot_required=True,
                severity="high")
        elif agg:
            yield found(
                addr, "%d uncorrectable in its lifetime, none since the driver loaded" % agg,
                "0 uncorrectable",
                "watch it: a rising lifetime count is a hardware case", severity="medium")


@check("gpu_ecc_pending", COLUMN, severity="medium", order=48)
def gpu_ecc_pending(facts, wanted):
    host = wanted.get("host")
    for gpu in smi_gpus(facts):
        current, pending = gpu.get("ecc_mode"), gpu.get("ecc_mode_pending")
        if current and pending and current != pending:
            addr = _addr(gpu)
            yield found(
                addr, "ECC %s, pending %s" % (current, pending),
                "ECC %s with nothing pending" % current,
                "the pending mode applies at the next GPU reset or reboot: nvidia-smi -r -i "
                "%s, or ansible-playbook %s%s -e gpuhost_reboot_verify_reboot=true; to keep ECC %s "
                "instead: nvidia-smi -e %d -i %s" % (
                    addr, PLAYBOOK_REBOOT, limit(host), current,
                    1 if current == "Enabled" else 0, addr),
                reboot_required=True)
