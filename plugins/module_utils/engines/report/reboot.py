# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""reboot_verify reports: ``<host>-reboot.json`` and ``<host>-reboot.md``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report.files import host_file


def _text(value):
    """A value as the reports print it (None and booleans as Python spells them)."""
    return "%s" % (value,)


def _joined(items, sep=", "):
    return sep.join(_text(x) for x in items or [])


def render_reboot_markdown(doc):
    """The Markdown page of one reboot_verify report document (role reboot_verify)."""
    before, after, reboot = doc["before"], doc["after"], doc["reboot"]
    out = ["# %s: reboot_verify %s" % (doc["host"], doc["result"].upper()), ""]
    if doc.get("failure"):
        out += ["**Stopped at:** %s" % doc["failure"], ""]
    out += ["| | before | after |", "|---|---|---|",
            "| running kernel | %s | %s |" % (before["running_kernel"],
                                              after["running_kernel"] or "-"),
            "| next boot | %s | %s |" % (before["next_boot_kernel"],
                                         reboot["expected_kernel"] or "-"),
            "| command line | `%s` | `%s` |" % (before["cmdline"], after["cmdline"] or "-"),
            "| audit | %s | %s |" % (before["audit"], after["audit"] or "-"), ""]
    line = "Reboot: %s" % reboot["note"]
    if reboot.get("required") is not None:
        line += " (required: %s)" % reboot["required"]
    out += [line, ""]
    up = doc.get("upgrade")
    if up:
        dkms = ", ".join("%s/%s %s" % (d["name"], d["version"], d["state"])
                         for d in up.get("dkms") or []) or "nothing"
        out += ["## Kernel upgrade",
                "- target %s, packages %s" % (up["target"], _joined(up.get("packages"))),
                "- DKMS modules %s; for the target: %s" % (
                    _joined(up.get("dkms_modules")) or "none", dkms),
                "- next boot (%s%s): %s" % (up["next_boot_method"],
                                            ", trial" if up.get("trial") else "",
                                            _joined(up.get("next_boot_commands"), "; ")
                                            or "already set")]
        out += ["- skipped: %s" % s for s in up.get("skipped") or []]
    bc = doc.get("boot_config")
    if bc:
        out += ["## Boot configuration",
                "- %s: `%s` (changed: %s)" % (bc["tool"], bc["cmdline_after"],
                                              bc["cmdline_changed"]),
                "- %s changed: %s" % (bc["modprobe_file"], bc["modprobe_changed"]),
                "- initramfs regenerated: %s; refreshed: %s" % (
                    _joined(bc.get("initramfs_regenerated")) or "none",
                    _joined(bc.get("refreshed"), "; ") or "nothing")]
        out += ["- skipped: %s" % s for s in bc.get("skipped") or []]
    if doc.get("checks"):
        out += ["## Checks", "| check | status | detail |", "|---|---|---|"]
        out += ["| %s | %s | %s |" % (c["name"], c["status"], c["detail"])
                for c in doc["checks"]]
    gate = doc.get("vfio_initramfs")
    if gate:
        out += ["## VM GPUs in the next initramfs (%s)" % gate.get("kernel"),
                "- %s" % ("every GPU a VM passes through is bound to vfio-pci there"
                          if gate.get("ok") else "refused: " + _joined(gate.get("problems"), "; "))]
    if doc.get("vms"):
        out += ["## VMs",
                "| VM | name | ran before | onboot | started | status | GPUs bound | problems |",
                "|---|---|---|---|---|---|---|---|"]
        out += ["| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            v["vmid"], v.get("name") or "-", v["running_before"], v["onboot"], v["started"],
            v.get("status") or "-", _joined("%s %s" % (g["address"], g["driver"] or "no driver")
                                            for g in v.get("gpus") or []) or "-",
            _joined(v.get("problems"), "; ")) for v in doc["vms"]]
    if doc.get("containers"):
        out += ["## Containers",
                "| CT | GPU | ran before | onboot | rules added | rules removed | restarted "
                "| GPUs | problems |",
                "|---|---|---|---|---|---|---|---|---|"]
        out += ["| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c["vmid"], c["gpu"], c["running_before"], c["onboot"],
            _joined(c.get("rules_added")), _joined(c.get("rules_removed")), c["started"],
            c["gpus"], _joined(c.get("problems"), "; ")) for c in doc["containers"]]
    cuda_lines = _cuda_lines(doc)
    if cuda_lines:
        out += ["## CUDA"] + cuda_lines
    return "\n".join(out) + "\n"


def _cuda_line(where, probe):
    init = probe.get("init") if "init" in probe else probe
    init = init or {}
    if init.get("code") is None:
        text = "not initialised"
    else:
        text = "cuInit %s %s" % (init["code"], init.get("name"))
    devices = probe.get("devices")
    if devices is not None:
        text += ", %s GPU(s)" % devices
    problem = probe.get("failure") or probe.get("error")
    if problem:
        text += ": %s" % problem
        if probe.get("cause") and probe["cause"] not in problem:
            text += "; cause: %s" % probe["cause"]
    return "- %s: %s" % (where, text)


def _cuda_lines(doc):
    """One line per place CUDA was proved (host, each container), or none."""
    out = []
    if doc.get("cuda_host"):
        out.append(_cuda_line("host", doc["cuda_host"]))
    for c in doc.get("containers") or []:
        if c.get("cuda"):
            out.append(_cuda_line("CT %s" % c["vmid"], c["cuda"]))
    return out


def reboot_files(host, doc):
    """``{name: text}`` of one host's reboot_verify report: ``<host>-reboot.json`` (the
    document, in its key order) and ``<host>-reboot.md``."""
    return {host_file(host, "reboot", 0): json.dumps(doc, indent=4,
                                                     separators=(",", ": ")) + "\n",
            host_file(host, "reboot", 1): render_reboot_markdown(doc)}
