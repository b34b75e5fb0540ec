# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column PCIe link: links trained below their capability (speed or width)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    check,
    column,
    found,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie.pcie_mrrs_check import (
    devices,
    no_gpu,
)

COLUMN = column("pcie_link", "PCIe link", position=30, applies=no_gpu)


def _gts(value):
    if value is None:
        return "?"
    return ("%.1f" % value) if value != int(value) else "%d" % value


@check("pcie_link_degraded", COLUMN, severity="high", severities=("high", "low"), order=40)
def pcie_link_degraded(facts, wanted):
    """High, or low for an NVIDIA GPU idling at 2.5 GT/s (its power saving state)."""
    for dev, role, gpu in devices(facts):
        if dev.get("error"):
            continue
        link = dev.get("link") or {}
        speed, max_speed = link.get("speed_gts"), link.get("max_speed_gts")
        width, max_width = link.get("width"), link.get("max_width")
        problems = []
        idle_only = False
        if width and max_width and width < max_width:
            problems.append("x%d of x%d" % (width, max_width))
        if speed and max_speed and speed < max_speed:
            problems.append("%s of %s GT/s" % (_gts(speed), _gts(max_speed)))
            idle_only = (not problems[:-1] and speed == 2.5 and gpu.get("driver") == "nvidia")
        if not problems:
            continue
        remedy = ("lspci -vv -s %s | grep -E 'LnkCap|LnkSta' under load; " % dev["address"])
        if idle_only:
            remedy += "2.5 GT/s is the GPU's idle power state: re-check while it works"
        else:
            remedy += ("reseat the card or riser, check the BIOS PCIe link speed setting "
                       "(Auto/Gen5), then re-audit")
        yield found(
            dev["address"], ", ".join(problems),
            "x%s at %s GT/s" % (max_width, _gts(max_speed)), remedy,
            detail=role, severity="low" if idle_only else "high")
