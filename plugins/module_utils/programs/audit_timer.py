# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduled host-side audit, its installer (module ``audit_timer``): the timer and
service units, the config, the library (the program ``audit_program`` and every
module_utils file it imports, byte for byte), the OnCalendar check and the systemctl calls.
The program that runs on the host is ``audit_program``'s.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import unitinstall
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.programs.audit_program import (  # noqa: F401
    CONFIG_PATH,
    MODULE,
    TAG,
    ConfigError,
    make_config,
    render_config,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.unitinstall import write_files  # noqa: F401

SERVICE_NAME = "gpuhost-audit.service"
TIMER_NAME = "gpuhost-audit.timer"
UNIT_DIR = "/etc/systemd/system"
SERVICE_PATH = UNIT_DIR + "/" + SERVICE_NAME
TIMER_PATH = UNIT_DIR + "/" + TIMER_NAME
WANTS_LINK = UNIT_DIR + "/timers.target.wants/" + TIMER_NAME
LIB_DIR = "/usr/local/lib/gpuhost-audit"
PYTHON = "/usr/bin/python3"
INIT_TEXT = b"# Installed by gpuhost.tuning audit_timer: package marker.\n"


# ---------------------------------------------------------------------------------------
# what gets installed


def library_files():
    """``{path relative to the library folder: bytes}``: the program (``MODULE``) and every
    module_utils file it imports (``unitinstall.library_closure``), plus the package
    markers."""
    return unitinstall.library_closure(MODULE[len(unitinstall.PACKAGE) + 1:], INIT_TEXT)


def render_service(python=PYTHON, lib_dir=LIB_DIR, config_path=CONFIG_PATH):
    return "\n".join([
        "# Installed by gpuhost.tuning (module audit_timer); changes are overwritten.",
        "# Read-only audit of this host; writes only its metrics file for node_exporter.",
        "# Config: %s. Log: journalctl -u %s" % (config_path, SERVICE_NAME),
        "[Unit]",
        "Description=gpuhost.tuning: audit this GPU host and refresh its metrics",
        "ConditionPathExists=%s" % config_path,
        "",
        "[Service]",
        "Type=oneshot",
        "Environment=PYTHONPATH=%s" % lib_dir,
        "Environment=PYTHONDONTWRITEBYTECODE=1",
        "ExecStart=%s -m %s --config %s" % (python, MODULE, config_path),
        "SyslogIdentifier=%s" % TAG,
        "Nice=10",
        "",
    ])


def render_timer(schedule="hourly", randomized_delay=300):
    return "\n".join([
        "# Installed by gpuhost.tuning (module audit_timer); changes are overwritten.",
        "[Unit]",
        "Description=gpuhost.tuning: audit this GPU host on a schedule (%s)" % schedule,
        "",
        "[Timer]",
        "OnCalendar=%s" % schedule,
        "RandomizedDelaySec=%d" % int(randomized_delay),
        "Persistent=true",
        "Unit=%s" % SERVICE_NAME,
        "",
        "[Install]",
        "WantedBy=timers.target",
        "",
    ])


def desired_files(config, service_text, timer_text):
    files = {SERVICE_PATH: service_text.encode("utf-8"),
             TIMER_PATH: timer_text.encode("utf-8"),
             CONFIG_PATH: render_config(config).encode("utf-8")}
    for rel, data in library_files().items():
        files[LIB_DIR + "/" + rel] = data
    return files


def plan_files(root, files):
    """``[(host path, action)]``: ``create``, ``update``, ``remove`` (a library file this
    version does not ship) or ``ok``."""
    return unitinstall.plan_files(root, files, LIB_DIR, INIT_TEXT)


def wants_link_ok(root):
    return unitinstall.wants_link_ok(root, WANTS_LINK, TIMER_PATH)


def make_wants_link(root):
    """What ``systemctl enable gpuhost-audit.timer`` does, on a tree."""
    unitinstall.make_wants_link(root, WANTS_LINK, TIMER_PATH)


INSTALLED = (WANTS_LINK, TIMER_PATH, SERVICE_PATH, CONFIG_PATH, LIB_DIR)


def installed_paths(root):
    return unitinstall.installed_paths(root, INSTALLED, INIT_TEXT)


def remove_installed(root):
    return unitinstall.remove_installed(root, INSTALLED, CONFIG_PATH, INIT_TEXT, "audit_timer")


# ---------------------------------------------------------------------------------------
# the audit_timer pass (module audit_timer)

# ---------------------------------------------------------------------------------------
# OnCalendar: a timer whose expression systemd cannot parse is loaded and never fires

SHORTHANDS = ("minutely", "hourly", "daily", "weekly", "monthly", "quarterly",
              "semiannually", "yearly", "annually")
_DAY = (r"(mon|tue|wed|thu|fri|sat|sun|monday|tuesday|wednesday|thursday|friday|saturday|"
        r"sunday)")
_WEEKDAYS = re.compile(r"^%s((\.\.|-)%s)?(,%s((\.\.|-)%s)?)*$" % ((_DAY,) * 4), re.I)
_TZ = re.compile(r"^(UTC|GMT|[A-Z][A-Za-z_]+(/[A-Za-z0-9_+-]+){1,2})$")
CALENDAR_EXAMPLES = "hourly, daily, Mon..Fri 06:00, *-*-* 00/4:00:00 or *:0/15"


def _component(text, low, high, what, fraction=False):
    """Why ``text`` is no comma list of ``*``, ``N``, ``N..M``, each with an optional
    ``/step`` (values from ``low`` to ``high``), or None."""
    number = r"[0-9]+(?:\.[0-9]{1,6})?" if fraction else r"[0-9]+"
    for item in text.split(","):
        match = re.match(r"^(?:\*|(?P<a>%s)(?:\.\.(?P<b>%s))?)(?:/(?P<step>%s))?$"
                         % (number, number, number), item)
        if not match:
            return "%s %r is not *, a number, a range a..b or one of those /step" % (what, item)
        for value in (match.group("a"), match.group("b")):
            if value is not None and not low <= float(value) <= high:
                return "%s %s is outside %d..%d" % (what, value, low, high)
        if match.group("step") is not None and float(match.group("step")) <= 0:
            return "%s step %s is not positive" % (what, match.group("step"))
    return None


def _date(text):
    match = re.match(r"^(?:([^-~]+)-)?([^-~]+)(-|~)([^-~]+)$", text)
    if not match:
        return "date %r is not Y-M-D or M-D" % text
    year, month, _sep, day = match.groups()
    for value in re.findall(r"[0-9]+", year or ""):
        if 100 <= int(value) < 1970:
            return "year %s is before 1970 (two digits, or 1970..2199)" % value
    return (_component(year, 0, 2199, "year") if year is not None else None) or \
        _component(month, 1, 12, "month") or _component(day, 1, 31, "day")


def _time(text):
    parts = text.split(":")
    if len(parts) not in (2, 3):
        return "time %r is not H:M or H:M:S" % text
    return _component(parts[0], 0, 23, "hour") or _component(parts[1], 0, 59, "minute") or \
        (_component(parts[2], 0, 59, "second", fraction=True) if len(parts) == 3 else None)


def _weekdays(text):
    """Why the weekday list ``text`` has a range that runs backwards (``Sun..Sat``)."""
    order = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
    for item in text.lower().split(","):
        ends = [order.index(day[:3]) for day in re.split(r"\.\.|-", item)]
        if ends != sorted(ends):
            return "weekday range %r runs backwards (Mon..Sun is the week)" % item
    return None


def _zone(name, root):
    """Why time zone ``name`` is unknown on the host under ``root``, or None."""
    if name in ("UTC", "GMT") or os.path.isfile(host_path(root, "/usr/share/zoneinfo/" + name)):
        return None
    return "time zone %r is not in %s/usr/share/zoneinfo" % (name, root.rstrip("/"))


def calendar_problem(schedule, root="/"):
    """Why ``schedule`` is no OnCalendar expression (systemd.time(7)), or None. A
    conservative stdlib check: a shorthand (``hourly``, ...), ``@<epoch>``, or
    ``[weekdays] [[Y-]M-D] [H:M[:S]] [timezone]`` with every field in range; what it
    accepts systemd 252 accepts (tests/hostile/test_batch_and_outputs.py compares them)."""
    if not isinstance(schedule, str) or not schedule.strip():
        return "it is empty"
    if re.search(r"[\x00-\x1f\x7f]", schedule):
        return "it holds a control character (a line break would end the unit's line)"
    words = schedule.split()
    if len(words) > 1 and _TZ.match(words[-1]):
        why = _zone(words[-1], root)
        if why:
            return why
        words = words[:-1]
    if len(words) == 1 and (words[0].lower() in SHORTHANDS or re.match(r"^@[0-9]+$",
                                                                       words[0])):
        return None
    rest = list(words)
    if rest and _WEEKDAYS.match(rest[0]):
        why = _weekdays(rest.pop(0))
        if why:
            return why
    if rest and ":" not in rest[0] and ("-" in rest[0] or "~" in rest[0]):
        why = _date(rest.pop(0))
        if why:
            return why
    if rest and ":" in rest[0]:
        why = _time(rest.pop(0))
        if why:
            return why
    if rest:
        return "%r is no weekday, date (Y-M-D), time (H:M:S) or time zone here" % rest[0]
    if len(rest) == len(words):
        return "nothing to schedule"
    return None


# Seconds systemd-analyze may take to parse one expression (it answers in milliseconds).
ANALYZE_TIMEOUT = 10


def check_schedule(schedule, root="/", runner=None):
    """Raise ConfigError when systemd could not parse ``schedule`` as ``OnCalendar``: the
    stdlib check (``calendar_problem``) always, and on the live host (``root`` ``/``) also
    ``systemd-analyze calendar`` through ``runner`` where it is installed."""
    why = calendar_problem(schedule, root)
    tool = None
    if why is None and runner is not None and os.path.realpath(root) == "/":
        tool = runner.which("systemd-analyze")
    if tool:
        try:
            rc, out, err = runner.run([tool, "calendar", "--", schedule], check=False,
                                      timeout=ANALYZE_TIMEOUT)
        except Exception as exc:    # the runner's CommandTimeout: the stdlib check stands
            if getattr(exc, "seconds", None) is None:
                raise
            rc = 0
        if rc != 0:
            why = "systemd-analyze calendar refuses it (%s)" % (
                (err or out).strip().splitlines() or ["exit %d" % rc])[-1]
    if why:
        raise ConfigError("schedule %r: %s, so the timer would never fire; give a systemd "
                          "OnCalendar expression, e.g. %s" % (schedule, why, CALENDAR_EXAMPLES))


def timer_spec():
    """Option spec of module audit_timer (its defaults fill ``timer_run``'s params)."""
    spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        host=dict(type="str"),
        textfile=dict(type="str"),
        schedule=dict(type="str", default="hourly"),
        randomized_delay=dict(type="int", default=300),
        wanted=facts.wanted_option(),
        python=dict(type="path", default=PYTHON),
    )
    spec.update(argspec.root())
    return spec


def _systemctl(runner, root):
    """``(systemctl path, None)`` on the live host, else ``(None, why not)``."""
    why = unitinstall.not_live(root, runner)
    return (None, why) if why else (runner.which("systemctl"), None)


def timer_run(params, check_mode=False, runner=None):
    """Install (``state: present``) or remove (``absent``) the timer, its service, config
    and library under ``root``; on the live host also ``systemctl daemon-reload`` and
    ``enable --now``/``disable --now`` through ``runner`` (runner.Runner or the like: which,
    run). Returns the module's result; raises ConfigError or OSError on bad input or a
    failed write, the runner's error on a failed systemctl."""
    try:
        p = argspec.fill(timer_spec(), params)
    except ValueError as exc:
        raise ConfigError(str(exc))
    root = p["root"]
    binary, why = _systemctl(runner, root)
    commands = []

    def systemctl(*args):
        text = "systemctl " + " ".join(args)
        if binary is None:
            commands.append(dict(command=text, status="skipped", reason=why))
        elif check_mode:
            commands.append(dict(command=text, status="planned", reason="check mode"))
        else:
            runner.run([binary] + list(args))
            commands.append(dict(command=text, status="run", reason=""))

    if p["state"] == "absent":
        found = installed_paths(root)
        if found:
            if os.path.exists(host_path(root, TIMER_PATH)):
                systemctl("disable", "--now", TIMER_NAME)
            if not check_mode:
                remove_installed(root)
            systemctl("daemon-reload")
        return dict(changed=bool(found), files=[dict(path=x, action="remove") for x in found],
                    commands=commands, enabled=False)
    if p["randomized_delay"] < 0:
        raise ConfigError("randomized_delay %s: give 0 or more seconds" % p["randomized_delay"])
    check_schedule(p["schedule"], root, runner)
    config = make_config(p["host"], p["textfile"], p["wanted"])
    try:  # checked here, where Ansible's validator is: the host's program only fills defaults
        merged = facts.merged_wanted(config["wanted"])
    except ValueError as exc:
        raise ConfigError("wanted: %s" % exc)
    config["wanted"] = dict((k, merged[k]) for k in config["wanted"])  # types as checked
    files = desired_files(config, render_service(python=p["python"]),
                          render_timer(p["schedule"], p["randomized_delay"]))
    plan = plan_files(root, files)
    changed_files = [path for path, action in plan if action != "ok"]
    link_ok = wants_link_ok(root)
    if not check_mode:
        write_files(root, files, plan)
    if changed_files:
        systemctl("daemon-reload")
    if not link_ok:
        if binary is not None:
            systemctl("enable", "--now", TIMER_NAME)
        else:
            commands.append(dict(command="systemctl enable --now %s" % TIMER_NAME,
                                 status="skipped", reason="%s: wants link %s" % (
                                     why, "planned" if check_mode else "created directly")))
            if not check_mode:
                make_wants_link(root)
    actions = [dict(path=path, action=action) for path, action in plan]
    actions.append(dict(path=WANTS_LINK, action="ok" if link_ok else "create"))
    return dict(changed=bool(changed_files) or not link_ok, files=actions, config=config,
                commands=commands, enabled=True, service=SERVICE_PATH, timer=TIMER_PATH)
