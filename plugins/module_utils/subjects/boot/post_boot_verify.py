# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks after a boot (module post_boot_verify, role reboot_verify).

Each check is ``{name, status, detail}``; status ``pass``, ``fail``, ``pending`` (off, but a
reboot that has not happened yet would settle it) or ``skip`` (nothing to check here). The
checks that compare with wanted values read the post-boot audit (module host_audit's
``audit`` result) instead of judging the host a second way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import (
    kernel_cmdline,
    boot_entries,
    kernels,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    read_text,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import QUERY_TIMEOUT_S

CHECKS = ("kernel", "cmdline", "modules", "module_params", "cpufreq", "cpuidle",
          "tuning_service", "sysctl", "mrrs")
SERVICE_PROPERTIES = ("LoadState", "Result", "ExecMainStatus", "ActiveState")


def loaded_modules(root):
    """Names of the loaded kernel modules (``/proc/modules``, first field)."""
    text = read_text(host_path(root, "/proc/modules")) or ""
    return [line.split(" ", 1)[0] for line in text.splitlines() if " " in line]


def module_param_problems(root, params):
    """``(problems, checked)`` for ``{module: {param: wanted}}`` as /sys/module shows them
    (a bool option reads ``Y``/``N``): ``module/param reads X`` or ``... unreadable``."""
    problems, checked = [], []
    for module, wanted in (params or {}).items():
        for name, value in (wanted or {}).items():
            label = "%s/%s" % (module, name)
            checked.append("%s=%s" % (label, value))
            have = read_text(host_path(root, "/sys/module/%s/parameters/%s" % (module, name)))
            if have is None:
                problems.append("%s unreadable (module not loaded?)" % label)
            elif have.strip() != str(value):
                problems.append("%s reads %s" % (label, have.strip()))
    return problems, checked


def parse_systemctl_show(text):
    """``systemctl show -p A -p B`` output -> ``{A: value}``."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def running(root, boot_params):
    """The running kernel and command line, and the boot parameters it lacks."""
    proc = kernel_cmdline.proc_cmdline_base(root)
    return {"kernel": kernels.running_kernel(root), "cmdline": proc or None,
            "missing": boot_entries.missing_params(proc, boot_params) if proc else []}


def _subjects(findings, ids):
    return [f["subject"] for f in findings if f["id"] in ids]


def _off(pending):
    return "pending" if pending else "fail"


def judge(wanted, now, audit, service):
    """Every check, in ``CHECKS`` order.

    ``wanted``: expected_kernel, pending (a needed reboot has not happened), modules,
    module_params, cpufreq_drivers_wanted, cpuidle_deeper_than, mrrs_size, tuning_service.
    ``now``: ``running()`` plus ``loaded`` (module names) and ``param_problems``/
    ``params_checked`` (``module_param_problems``). ``audit``: host_audit's ``audit``.
    ``service``: ``parse_systemctl_show`` of the tuning service ({} when not asked)."""
    pending = bool(wanted.get("pending"))
    findings = audit.get("findings") or []
    out = []
    expected = wanted.get("expected_kernel")
    out.append({"name": "kernel",
                "status": "pass" if now["kernel"] == expected else _off(pending),
                "detail": "running %s, expected %s" % (now["kernel"], expected)})
    missing = now["missing"]
    out.append({"name": "cmdline", "status": _off(pending) if missing else "pass",
                "detail": "/proc/cmdline lacks " + " ".join(missing) if missing
                else "every boot parameter is in /proc/cmdline"})
    modules = wanted.get("modules") or []
    not_loaded = []
    for name in modules:
        name = name.replace("-", "_")
        if name not in now["loaded"] and name not in not_loaded:
            not_loaded.append(name)
    out.append({"name": "modules", "status": "fail" if not_loaded else "pass",
                "detail": "not loaded: " + ", ".join(not_loaded) if not_loaded
                else "loaded: " + ", ".join(modules)})
    bad = now["param_problems"]
    out.append({"name": "module_params", "status": _off(pending) if bad else "pass",
                "detail": "; ".join(bad) if bad else " ".join(now["params_checked"])})
    driver = ((audit.get("cpu") or {}).get("cpufreq") or {}).get("driver")
    out.append({"name": "cpufreq",
                "status": "skip" if driver is None else (
                    "pass" if driver in (wanted.get("cpufreq_drivers_wanted") or [])
                    else _off(pending)),
                "detail": "scaling driver %s" % (driver or "none (no cpufreq)")})
    deep = _subjects(findings, ("cpuidle_deep_state",))
    out.append({"name": "cpuidle", "status": "fail" if deep else "pass",
                "detail": ", ".join("enabled: " + s for s in deep) if deep else
                "no idle state deeper than %s enabled" % wanted.get("cpuidle_deeper_than")})
    unit = wanted.get("tuning_service")
    if service.get("LoadState", "not-found") != "loaded":
        status, detail = "skip", "not installed"
    else:
        good = service.get("Result") == "success" and service.get("ExecMainStatus") == "0"
        status = "pass" if good else "fail"
        detail = "Result=%s ExecMainStatus=%s ActiveState=%s" % tuple(
            service.get(k, "?") for k in SERVICE_PROPERTIES[1:])
    out.append({"name": "tuning_service", "status": status, "detail": "%s: %s" % (unit, detail)})
    off = _subjects(findings, ("sysctl", "numa_balancing"))
    out.append({"name": "sysctl", "status": "fail" if off else "pass",
                "detail": ", ".join(off) or "every wanted sysctl set"})
    low = _subjects(findings, ("pcie_mrrs",))
    out.append({"name": "mrrs", "status": "fail" if low else "pass",
                "detail": "%d device(s) below %s bytes" % (len(low), wanted.get("mrrs_size"))})
    return out


def line(check):
    return "%s  %s  %s" % (check["status"].upper(), check["name"], check["detail"])


def post_boot_run(params, runner=None):
    """The post_boot_verify pass for the module's ``params``: reads the host under ``root``,
    asks systemd about the tuning service through ``runner`` when ``systemctl`` is true, and
    judges the checks named in ``checks``. Returns the module's result."""
    root = params["root"]
    now = running(root, params["boot_params"])
    now["loaded"] = loaded_modules(root)
    now["param_problems"], now["params_checked"] = module_param_problems(
        root, params["module_params"])
    service = {}
    if params["systemctl"] and "tuning_service" in params["checks"] and runner is not None:
        args = ["systemctl", "show"]
        for prop in SERVICE_PROPERTIES:
            args += ["-p", prop]
        rc, out, _err = runner.run(args + [params["tuning_service"]], check=False,
                                   timeout=QUERY_TIMEOUT_S)
        if rc == 0:
            service = parse_systemctl_show(out)
    checks = [c for c in judge(params, now, params["audit"] or {}, service)
              if c["name"] in params["checks"]]
    failed = [c for c in checks if c["status"] == "fail"]
    return {"changed": False, "checks": checks, "lines": [line(c) for c in checks],
            "failures": ["%s (%s)" % (c["name"], c["detail"]) for c in failed],
            "running": {"kernel": now["kernel"], "cmdline": now["cmdline"],
                        "missing": now["missing"]}}
