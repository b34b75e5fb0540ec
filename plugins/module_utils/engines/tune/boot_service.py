# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installer of the boot-time program (``engines/tune/boot_program.py``): the unit, its JSON
config and the shipped library, the systemctl calls on a live host (module
``boot_service``), and the ``boot_service`` tune part (module ``host_tune``).

``library_files`` follows the program's imports to the module_utils files it runs; they are
copied byte for byte under ``LIB_DIR``, so the program at boot is the code the modules run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import pci_ids
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import audit_pcie
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import unitinstall
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune.boot_program import (
    CONFIG_PATH,
    MODULE,
    TAG,
    ConfigError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    host_path,
    isfile,
    read_bytes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    Runner,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.unitinstall import (  # noqa: F401
    PACKAGES,
    write_files,
)

UNIT_NAME = "gpuhost-tuning.service"
UNIT_DIR = "/etc/systemd/system"
UNIT_PATH = UNIT_DIR + "/" + UNIT_NAME
WANTS_LINK = UNIT_DIR + "/multi-user.target.wants/" + UNIT_NAME
LIB_DIR = "/usr/local/lib/gpuhost-tuning"
# pmxcfs (pve-cluster.service) mounts /etc/pve: the boot-time program reads the VM configs
# there to decide which GPUs are the host's, so on a Proxmox host the unit waits for it.
# Ordered on it only where its unit file exists (systemd's unit search path), so the unit
# stays harmless on a host without Proxmox.
PVE_CLUSTER = "pve-cluster.service"
SYSTEM_UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
PYTHON = "/usr/bin/python3"
INIT_TEXT = b"# Installed by gpuhost.tuning boot_service: package marker.\n"


# ---------------------------------------------------------------------------------------
# what gets installed


def library_files():
    """``{path relative to LIB_DIR: bytes}``: the boot-time program and every module_utils
    file it imports, byte for byte (``unitinstall.library_closure``: read from the running
    collection, so a checkout and AnsiballZ's zip give the same bytes), and the package
    markers."""
    return unitinstall.library_closure(MODULE[len(unitinstall.PACKAGE) + 1:], INIT_TEXT)


def shipped():
    """The shipped module_utils files, relative to the module_utils folder, sorted."""
    prefix = PACKAGES[-1] + "/"
    return sorted(rel[len(prefix):] for rel in library_files()
                  if rel.startswith(prefix) and not rel.endswith("__init__.py"))


def make_config(mrrs_size=4096, vendor=pci_ids.NVIDIA_VENDOR, classes=pci_ids.GPU_CLASSES,
                include_upstream=True, cpuidle_deeper_than="C1"):
    """The boot config dict; ``mrrs_size`` or ``cpuidle_deeper_than`` None turns that part off.
    Values are validated here, so a bad one fails at install time, not at boot. The boot-time
    writes always go through sysfs (setpci and the runner are not shipped)."""
    config = {"mrrs": None, "cpuidle": None}
    if mrrs_size:
        setpci_maxreadreq.size_field(mrrs_size)
        config["mrrs"] = {
            "size": int(mrrs_size),
            "vendor": pci_ids.norm_hex(vendor, "PCI vendor"),
            "classes": [pci_ids.normalize_class(c) for c in classes],
            "include_upstream": bool(include_upstream),
        }
    if cpuidle_deeper_than:
        config["cpuidle"] = {"deeper_than": str(cpuidle_deeper_than)}
    return config


def render_config(config):
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


# A word systemd reads as it is in a command line: no quotes, backslashes, spaces,
# specifiers (%) or variables ($) to interpret.
_PLAIN_WORD = re.compile(r"^[A-Za-z0-9_./:+=@,-]+$")


def exec_word(word):
    """One word of an ``ExecStart=`` line as systemd.service(5) and systemd.syntax(7) read
    it: ``%`` (specifiers) and ``$`` (variables) doubled, then double quotes with ``\\``
    and ``\"`` escaped when the word holds anything but plain characters (a space in a
    path). Control characters are refused before this (``validate``)."""
    text = word.replace("%", "%%").replace("$", "$$")
    if _PLAIN_WORD.match(text):
        return text
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def exec_start(python=PYTHON, config_path=CONFIG_PATH):
    return " ".join(exec_word(word) for word in (python, "-m", MODULE, "--config", config_path))


def cluster_units(root):
    """``[PVE_CLUSTER]`` when its unit file is on the host under ``root``, else ``[]``."""
    for folder in SYSTEM_UNIT_DIRS:
        if isfile(host_path(root, "%s/%s" % (folder, PVE_CLUSTER))):
            return [PVE_CLUSTER]
    return []


def render_unit(after=("nvidia-persistenced.service",), before=("pve-guests.service",),
                python=PYTHON, lib_dir=LIB_DIR, config_path=CONFIG_PATH, wants=()):
    lines = [
        "# Installed by gpuhost.tuning (module boot_service); changes are overwritten.",
        "# Re-applies what a reboot or an NVIDIA driver reload resets: PCIe Max Read Request",
        "# Size (Device Control bits 14:12 only, read back) and CPU idle states deeper than",
        "# the configured one. Config: %s. Log: journalctl -u %s" % (config_path, UNIT_NAME),
        "[Unit]",
        "Description=gpuhost.tuning: re-apply PCIe MRRS and CPU idle-state settings",
    ]
    if wants:
        lines.append("Wants=%s" % " ".join(wants))
    if after:
        lines.append("After=%s" % " ".join(after))
    if before:
        lines.append("Before=%s" % " ".join(before))
    lines += [
        "ConditionPathExists=%s" % config_path,
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "Environment=PYTHONPATH=%s" % lib_dir,
        "Environment=PYTHONDONTWRITEBYTECODE=1",
        "ExecStart=%s" % exec_start(python, config_path),
        "SyslogIdentifier=%s" % TAG,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def desired_files(config, unit_text, config_path=CONFIG_PATH, lib_dir=LIB_DIR):
    """``{host path: bytes}`` of everything the service consists of (wants link aside)."""
    files = {UNIT_PATH: unit_text.encode("utf-8"),
             config_path: render_config(config).encode("utf-8")}
    for rel, data in library_files().items():
        files[lib_dir + "/" + rel] = data
    return files


def plan_files(root, files, lib_dir=LIB_DIR):
    """``[(host path, action)]`` with action ``create``, ``update``, ``remove`` (a file of
    the library's own package that this version does not ship) or ``ok``; sorted by path.
    Files in ``lib_dir`` this module did not install are left alone."""
    return unitinstall.plan_files(root, files, lib_dir, INIT_TEXT)


def wants_link_ok(root):
    return unitinstall.wants_link_ok(root, WANTS_LINK, UNIT_PATH)


def make_wants_link(root):
    """What ``systemctl enable`` does for ``WantedBy=multi-user.target``, on a tree."""
    unitinstall.make_wants_link(root, WANTS_LINK, UNIT_PATH)


def installed_paths(root, config_path=CONFIG_PATH, lib_dir=LIB_DIR):
    """What ``remove_installed`` deletes: host paths of this module's files that exist, the
    wants link first, then the unit, the config and the library files it installed."""
    return unitinstall.installed_paths(root, (WANTS_LINK, UNIT_PATH, config_path, lib_dir),
                                       INIT_TEXT)


def kept_folders(root, config_path=CONFIG_PATH, lib_dir=LIB_DIR):
    """The config and library folders ``remove_installed`` leaves (``[{path, reason}]``)
    because they hold files this module did not install."""
    return unitinstall.kept_folders(root, (WANTS_LINK, UNIT_PATH, config_path, lib_dir),
                                    config_path, INIT_TEXT, "boot_service")


def remove_installed(root, config_path=CONFIG_PATH, lib_dir=LIB_DIR):
    """Delete the wants link, unit, config and the library files this module installed,
    then the config and library folders when nothing else is in them; returns
    ``kept_folders``."""
    return unitinstall.remove_installed(root, (WANTS_LINK, UNIT_PATH, config_path, lib_dir),
                                        config_path, INIT_TEXT, "boot_service")


# ---------------------------------------------------------------------------------------
# the boot-time run


# --- the boot_service pass (modules boot_service and host_tune) --------------------------

def service_spec():
    """Option spec of module boot_service (its defaults fill ``service_run``'s params)."""
    spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        mrrs_size=audit_pcie.mrrs_size(choices=[0] + list(pci_ids.MRRS_SIZES)),
        cpuidle_deeper_than=dict(type="str", default="C1"),
        after=dict(type="list", elements="str", default=["nvidia-persistenced.service"]),
        before=dict(type="list", elements="str", default=["pve-guests.service"]),
        python=dict(type="path", default=PYTHON),
        start=dict(type="bool", default=True),
    )
    spec.update(argspec.device_selection())
    spec.update(argspec.root())
    return spec


class Live(object):
    """systemctl on the live host through ``runner`` (runner.Runner), or the reason it is
    not run (a tree, no systemd). In check mode only queries run; the rest is planned."""

    def __init__(self, runner, root, check_mode=False):
        self.check_mode = check_mode
        self.runner = runner
        self.commands = []
        self.wrote = False  # files changed before a later step failed (reported as changed)
        self.reason = unitinstall.not_live(root, runner)

    @property
    def usable(self):
        return self.reason is None

    def run(self, *args, **kwargs):
        """Run ``systemctl args`` (or record it as skipped/planned); return (rc, out)."""
        text = "systemctl " + " ".join(args)
        if not self.usable:
            self.commands.append(dict(command=text, status="skipped", reason=self.reason))
            return None, ""
        if self.check_mode and not kwargs.get("query"):
            self.commands.append(dict(command=text, status="planned",
                                      reason="check mode"))
            return None, ""
        rc, out, _err = self.runner.run([self.runner.which("systemctl")] + list(args),
                                        ok_rcs=kwargs.get("ok_rcs", (0,)),
                                        hint=kwargs.get("hint"))
        if not kwargs.get("query"):
            self.commands.append(dict(command=text, status="run", reason=""))
        return rc, out.strip()

    def journal(self):
        """The journal of the unit's last run, for a failure message (empty when unavailable)."""
        binary = self.runner.which("journalctl") if self.usable else None
        if not binary:
            return ""
        _rc, invocation, _err = self.runner.run(
            [self.runner.which("systemctl"), "show", "-p", "InvocationID", "--value",
             UNIT_NAME],
            check=False)
        invocation = invocation.strip()
        if invocation:
            match = ["INVOCATION_ID=%s" % invocation, "+",
                     "_SYSTEMD_INVOCATION_ID=%s" % invocation]
        else:
            match = ["-u", UNIT_NAME, "-n", "20"]
        _rc, out, _err = self.runner.run([binary, "--no-pager", "-o", "cat"] + match,
                                         check=False)
        if not out.strip():
            return ""
        return "\nLast journal lines of %s:\n%s" % (UNIT_NAME, out.strip())

    def is_active(self):
        if not self.usable:
            return None
        _rc, out = self.run("is-active", UNIT_NAME, query=True, ok_rcs=tuple(range(256)))
        return out or "unknown"


def _diffs(root, files, plan):
    diffs = []
    for path, action in plan:
        if action == "ok":
            continue
        if path in (UNIT_PATH, CONFIG_PATH):
            old = read_bytes(host_path(root, path))
            diffs.append(dict(before_header=path if old is not None else "/dev/null",
                              after_header=path,
                              before=(old or b"").decode("utf-8", "replace"),
                              after=files[path].decode("utf-8")))
        else:
            # Ansible's diff display joins the prepared texts of a result as they are: each
            # ends its line, so --diff lists the library files one per line.
            diffs.append(dict(before_header=path, after_header=path,
                              prepared="%s %s (library file, %s)\n" % (
                                  action, path, "%d bytes" % len(files[path])
                                  if path in files else "not shipped any more")))
    return diffs


def service_present(p, check_mode, live):
    """Install (or plan) the unit, its config and library, enable and (re)start it."""
    root = p["root"]
    config = make_config(
        mrrs_size=p["mrrs_size"] or None, vendor=p["vendor"], classes=p["classes"],
        include_upstream=p["include_upstream"],
        cpuidle_deeper_than=p["cpuidle_deeper_than"] or None)
    cluster = cluster_units(root)
    unit = render_unit(after=list(p["after"]) + [u for u in cluster if u not in p["after"]],
                       before=p["before"], python=p["python"], wants=cluster)
    files = desired_files(config, unit)
    plan = plan_files(root, files)
    link_ok = wants_link_ok(root)
    changed_files = [path for path, action in plan if action != "ok"]
    result = dict(config=config, files=[dict(path=path, action=action) for path, action in plan])
    result["files"].append(dict(path=WANTS_LINK, action="ok" if link_ok else "create"))
    result["diff"] = _diffs(root, files, plan)
    changed = bool(changed_files) or not link_ok
    if not check_mode:
        live.wrote = bool(changed_files)
        write_files(root, files, plan)
    if changed_files:
        live.run("daemon-reload")
    if not link_ok:
        if live.usable:
            live.run("enable", UNIT_NAME)
        else:
            live.commands.append(dict(command="systemctl enable %s" % UNIT_NAME,
                                      status="skipped", reason="%s: wants link %s" % (
                                          live.reason, "planned" if check_mode
                                          else "created directly")))
            if not check_mode:
                live.wrote = True
                make_wants_link(root)
    active = live.is_active()
    if p["start"]:
        if active != "active":
            live.run("start", UNIT_NAME, hint="see journalctl -u %s" % UNIT_NAME)
            if live.usable:
                changed = True
        elif changed_files:
            live.run("restart", UNIT_NAME, hint="see journalctl -u %s" % UNIT_NAME)
        if live.usable and not check_mode:
            active = live.is_active()
    result.update(changed=changed, enabled=True, active=active)
    return result


def service_absent(p, check_mode, live):
    """Disable and remove everything service_present installs."""
    root = p["root"]
    found = installed_paths(root)
    result = dict(files=[dict(path=path, action="remove") for path in found], enabled=False,
                  kept=kept_folders(root))
    result["diff"] = []
    unit_file = read_bytes(host_path(root, UNIT_PATH))
    if unit_file is not None:
        result["diff"].append(dict(before_header=UNIT_PATH, after_header="/dev/null",
                                   before=unit_file.decode("utf-8", "replace"), after=""))
    if found:
        if unit_file is not None:
            live.run("disable", "--now", UNIT_NAME)
        if not check_mode:
            live.wrote = True
            result["kept"] = remove_installed(root)
        live.run("daemon-reload")
    result["changed"] = bool(found)
    result["active"] = live.is_active() if live.usable else None
    return result


def service_run(params, check_mode=False, runner=None):
    """The whole boot_service pass for ``params`` (the module's options; missing ones take
    ``service_spec``'s defaults) with ``runner`` (runner.Runner) for systemctl. Returns the
    module's result (``diff`` included); a failure is returned, not raised: ``failed``,
    ``msg`` (with the unit's journal when systemctl failed), ``commands`` and ``changed``
    (files written before the failure). See ``service_failure``."""
    try:
        p = argspec.fill(service_spec(), params)
    except ValueError as exc:
        return dict(failed=True, msg=str(exc), commands=[], changed=False)
    live = Live(runner or Runner(), p["root"], check_mode)
    try:
        if p["state"] == "present":
            result = service_present(p, check_mode, live)
        else:
            result = service_absent(p, check_mode, live)
    except (ValueError, ConfigError, OSError) as exc:
        return dict(failed=True, msg=str(exc), commands=live.commands, changed=live.wrote)
    except CommandError as exc:
        return dict(failed=True, msg="%s: %s%s" % (UNIT_NAME, exc, live.journal()),
                    commands=live.commands, changed=live.wrote)
    result.update(unit_path=UNIT_PATH, config_path=CONFIG_PATH, commands=live.commands)
    return result


def service_failure(result):
    """The failure message of a ``service_run`` result, or None when it took."""
    return result.get("msg") if result.get("failed") else None


# --- the tune part (module host_tune; protocol in engines/tune/tune.py) ---------------------------


class ServicePart(object):
    """Install the boot-time re-apply of the pcie and cpuidle parts that are on."""

    name = "boot_service"
    owns = ()
    steps = ("boot_service",)
    stage = "tune"
    options = dict(boot_service_start=dict(
        type="bool", default=True, role_var="gpuhost_tune_boot_service_start",
        description="On a live host, start the boot service now (restart it after a change)."))
    files = (UNIT_PATH, WANTS_LINK, CONFIG_PATH.rsplit("/", 1)[0], CONFIG_PATH, LIB_DIR)
    role_doc = ("Install, enable and start gpuhost-tuning.service, which re-applies MRRS and "
                "idle states at every boot (tag C(tune_boot_service)).")

    def run(self, ctx):
        p = ctx.params
        svc = service_run(dict(ctx.selection, state="present",
                               mrrs_size=p["mrrs_size"] if "pcie" in ctx.on else 0,
                               cpuidle_deeper_than=p["cpuidle_deeper_than"]
                               if "cpuidle" in ctx.on else "",
                               start=p["boot_service_start"], root=ctx.root),
                          ctx.check_mode, ctx.runner)
        out = {"changed": bool(svc.get("changed")), "detail": {"boot_service": svc},
               "diffs": [d for d in svc.pop("diff", None) or []
                         if "prepared" in d or d.get("before") != d.get("after")]}
        if svc.get("failed"):
            out["failures"] = ["boot_service: %s" % str(svc.get("msg") or "failed").strip()]
            out["rows"] = [(UNIT_NAME, "", "", "failed", svc.get("msg", ""))]
        else:
            written = [f for f in svc["files"] if f["action"] != "ok"]
            out["rows"] = [(UNIT_NAME, "", "enabled" + (
                (", %s" % svc["active"]) if svc.get("active") else ""),
                "changed" if svc.get("changed") else "ok",
                "%d file(s) written; %s" % (len(written), "; ".join(
                    "%s: %s" % (c["command"], c["status"]) for c in svc["commands"])))]
        return out

    def not_run(self, ctx, status):
        return {"rows": [(UNIT_NAME, "", "", status, "")]}


TUNE_PART = ServicePart()
