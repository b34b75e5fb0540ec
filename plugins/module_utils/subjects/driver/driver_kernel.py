# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known NVIDIA driver x kernel pairs whose kernel module does not build, each row with its
source: a kernel upgrade or a driver staging that would meet one is refused before anything
changes, with the version that builds. The DKMS build stays the proof (a pair not listed
here is still built and checked); the table only stops a doomed upgrade earlier.

A row: the driver branch, the driver versions from ``first`` up to (not including)
``fixed`` (``fixed`` None: no fixed release of the branch known), the kernel series from
``kernel`` on (``(7, 1)``: 7.1 and every later series: a driver that does not build for a
series does not build for the ones after it either), ``fix`` (what builds, as the sources
say) and ``source``. Rows the sources did not confirm are left out:
- 550 and 555 on Proxmox VE's 6.17.13 (NVIDIA/open-gpu-kernel-modules #1143 as quoted) were
  not confirmed from a source read here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms.dkms import version_key

KNOWN_BAD = (
    {"branch": 580, "first": "580.0", "fixed": "580.142", "kernel": (7, 0),
     "fix": "580.142 or later builds for 7.0 (580.159.04 or later for 7.1 and newer)",
     "source": "https://github.com/Frogging-Family/nvidia-all/issues/379 (580.119.02 on "
               "7.0.9); https://github.com/void-linux/void-packages/issues/60171 "
               "(580.126.18 on 7.0.1); 580.142 built on 7.0: "
               "https://github.com/void-linux/void-packages/issues/61087"},
    {"branch": 580, "first": "580.142", "fixed": "580.159.04", "kernel": (7, 1),
     "fix": "580.159.04 or later (NVIDIA's release notes: \"Fixed kernel module build issue "
            "with Linux kernel v7.1\")",
     "source": "https://github.com/void-linux/void-packages/issues/61087 (580.142 on 7.1.0)"},
    {"branch": 595, "first": "595.0", "fixed": "595.91.07", "kernel": (7, 0),
     "fix": "595.91.07 or later",
     "source": "https://github.com/NVIDIA/open-gpu-kernel-modules/pull/1168 (595.71.05 uses "
               "screen_info, refactored in 7.0; no longer needed since 595.91.07 and "
               "610.57.04)"},
    {"branch": 610, "first": "610.0", "fixed": "610.57.04", "kernel": (7, 0),
     "fix": "610.57.04 or later",
     "source": "https://github.com/NVIDIA/open-gpu-kernel-modules/pull/1168 (\"610.57.04 "
               "has the fixes for this\")"},
)

_VERSION = re.compile(r"^[0-9]{1,4}(?:\.[0-9]{1,4}){0,2}$")
_SERIES = re.compile(r"^([0-9]{1,3})\.([0-9]{1,3})")


def driver_key(version):
    """The sort key of a driver version (``dkms.version_key``, the one DKMS versions sort
    by); None for anything but a driver version (``580.126.18``)."""
    version = str(version or "").strip()
    return version_key(version) if _VERSION.match(version) else None


def kernel_series(release):
    """``7.0.2-6-pve`` -> ``(7, 0)``; None for anything else."""
    match = _SERIES.match(str(release or "").strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def known_bad(driver, kernel):
    """The row of ``KNOWN_BAD`` that says ``driver`` (a version) does not build for
    ``kernel`` (a release), or None."""
    key, series = driver_key(driver), kernel_series(kernel)
    if key is None or series is None:
        return None
    for row in KNOWN_BAD:
        branch = str(driver).strip().split(".", maxsplit=1)[0]
        if branch != str(row["branch"]) or series < row["kernel"]:
            continue
        if driver_key(row["first"]) <= key and (
                row["fixed"] is None or key < driver_key(row["fixed"])):
            return row
    return None


def refusals(driver, kernels):
    """One text per kernel of ``kernels`` that ``driver`` is known not to build for:
    the pair, what builds and the source."""
    out = []
    for kernel in kernels or ():
        row = known_bad(driver, kernel)
        if row:
            out.append("NVIDIA %s does not build for kernel %s (%d.%d series): use %s; "
                       "source: %s" % (driver, kernel, kernel_series(kernel)[0],
                                       kernel_series(kernel)[1], row["fix"], row["source"]))
    return out
