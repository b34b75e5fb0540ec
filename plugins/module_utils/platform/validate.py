# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option values checked before a module reads or writes anything.

One layer for every module (and so for every role, which reach hosts only through module
options). Each module's rules live beside its spec: a function ``rules(params)`` in the
module file (the report modules': in argspec.py, beside the specs their action plugins
share) built from the checks here. ``check(rules, params)`` runs them, raising
ValidationError naming the option, the value and what is allowed; ``check_module(module,
name, rules)`` turns that into ``fail_json`` with ``changed=false`` and returns the context
manager the module runs in, holding the root's lock for a module that changes the host
(``LOCKING``). tests/unit/test_module_rules.py fails on a module without rules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import pci_ids
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    LockError,
    PathError,
    RootLock,
    check_root,
    under_root,
)


class ValidationError(ValueError):
    """An option value that can only be a mistake; nothing was read or written."""


# Names as the kernel, systemd and Proxmox spell them.
SYSCTL_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
# Idle state names the kernel's drivers use: POLL, C1, C1E, C1_ACPI, C6S, C10, WFI, haltpoll.
IDLE_STATE = re.compile(r"^(POLL|WFI|haltpoll|C[0-9]{1,2}[A-Z0-9_]{0,8})$")
UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@\\-]{1,200}\.(service|target|socket|mount|device|"
                       r"path|timer|slice|scope|swap|automount)$")
# An interpreter path: absolute, spaces allowed (the unit quotes them), no quotes or
# backslashes (a path never needs them; they mean a command line was given).
EXEC_PATH = re.compile(r"^/[^\x00-\x1f\x7f'\"\\]{1,4000}$")
KERNEL_PARAM = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")
# Characters a boot parameter never needs and a shell (GRUB's files are sourced) or the
# kernel's tokenizer would act on.
BOOT_VALUE_BAD = re.compile(r"[\x00-\x1f\x7f$`\\'\";]")
NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,200}$")
RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,200}$")
SNAPSHOT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@:+-]{0,200}$")
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
TOKEN = re.compile(r"^[0-9a-f]{32}$")  # a run lock's token (runlock.new_token)
PCI_ADDRESS = re.compile(r"^([0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")

MAX_CPU = 65535           # highest CPU number accepted in a CPU list (kernel NR_CPUS <= 8192)
MAX_LATENCY_US = 10000000  # 10 s: larger is no idle state any kernel has
MAX_MAJOR = 4095           # majors are 12 bits (MAJORBITS)
MAX_VALUE_CHARS = 4096     # a sysctl value is at most a page
VMID_RANGE = (100, 999999999)  # Proxmox guest ids


def fail(option, value, allowed):
    raise ValidationError("%s: %r is not allowed: %s" % (option, value, allowed))


def no_control(option, value):
    """Refuse newlines and other control characters (a tab is allowed) anywhere in
    ``value``: strings, dict keys and values, list items."""
    if isinstance(value, str):
        if CONTROL.search(value):
            fail(option, value, "no newline or other control character (it would add a "
                                "line or split a field)")
    elif isinstance(value, dict):
        for key, item in value.items():
            no_control("%s key" % option, key)
            no_control("%s.%s" % (option, key), item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            no_control(option, item)


def root(params, option="root"):
    try:
        check_root(params.get(option))
    except PathError as exc:
        raise ValidationError(str(exc))


def inside(params, option, follow=True):
    """A host path option (or each of a list) must stay under the root once resolved
    (``follow``: the last component too, when it is a link)."""
    value = params.get(option)
    if value is None:
        return
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, str) or not item:
            fail(option, item, "a non-empty host path")
        try:
            under_root(params.get("root") or "/", item, option, follow=follow)
        except PathError as exc:
            raise ValidationError(str(exc))


def sysctl_key(option, key):
    if not isinstance(key, str) or not SYSCTL_KEY.match(key):
        fail(option, key, "a dotted sysctl key like kernel.numa_balancing (letters, digits, "
                          "_ and -, at least two parts, no spaces, '=' or '/')")


def sysctl_values(option, values, allow_empty=True):
    """Every key and value checked; the error names each bad one."""
    if values is None:
        return
    if not isinstance(values, dict):
        fail(option, values, "a mapping of sysctl key to value")
    if not values and not allow_empty:
        fail(option, values, "at least one key")
    problems = []
    for key, value in values.items():
        try:
            sysctl_key("%s key" % option, key)
            where = "%s.%s" % (option, key)
            if value is None or isinstance(value, (dict, list)):
                fail(where, value, "a string or number like \"0\"")
            text = str(value)
            if not text.strip():
                fail(where, value, "a non-empty value")
            if CONTROL.search(text):
                fail(where, value, "one line (no newline or control character)")
            if len(text) > MAX_VALUE_CHARS:
                fail(where, text[:40] + "...", "at most %d characters" % MAX_VALUE_CHARS)
        except ValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise ValidationError("invalid sysctl values, nothing written: %s" % "; ".join(problems))


def idle_state_name(option, name, allow_empty=False):
    if allow_empty and name in ("", None):
        return
    if not isinstance(name, str) or not IDLE_STATE.match(name):
        fail(option, name, "an idle state name as the kernel spells it (POLL, C1, C1E, C2, "
                           "C6, C1_ACPI, ...; case matters)")


def cpu_list(option, text):
    """A CPU list checked piece by piece, before anything is expanded."""
    text = str(text)
    pieces = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(pieces):
        fail(option, text, "a CPU list like 0-63,65-127")
    for piece in pieces:
        bounds = piece.split("-")
        if len(bounds) > 2 or not all(b.isdigit() for b in bounds):
            fail(option, text, "a CPU list like 0-63,65-127")
        numbers = [int(b) for b in bounds]
        if numbers[-1] < numbers[0]:
            fail(option, text, "ranges low-high (%s is backwards)" % piece)
        if numbers[-1] > MAX_CPU:
            fail(option, text, "CPU numbers 0-%d" % MAX_CPU)


def vendor_id(option, value):
    try:
        text = pci_ids.norm_hex(value, "vendor")
    except ValueError:
        text = ""
    if len(text) != 4:
        fail(option, value, "a PCI vendor id of four hex digits like 10de (quote it in YAML)")


def pci_classes(option, values):
    if values is None:
        return
    if not values:
        fail(option, values, "at least one PCI class like 0300 (an empty list selects "
                             "nothing)")
    for value in values:
        try:
            pci_ids.normalize_class(value)
        except ValueError as exc:
            raise ValidationError("%s: %s" % (option, exc))


def pci_addresses(option, values):
    for value in values or []:
        try:
            pci_ids.normalize_address(value)
        except ValueError as exc:
            raise ValidationError("%s: %s" % (option, exc))


def non_empty_list(option, value, what):
    if value is not None and len(value) == 0:
        fail(option, value, "%s; an empty list is refused (leave the option out instead)"
                            % what)


def names(option, values, pattern=NAME, what="names of letters, digits, _ . + -"):
    for value in values or []:
        if not isinstance(value, str) or not pattern.match(value):
            fail(option, value, what)


def int_range(option, value, low, high):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        fail(option, value, "an integer from %d to %d" % (low, high))


def boot_params(option, params, absent_option=None, absent=None):
    """Kernel parameters: names the kernel parses, values without whitespace breaks, quotes
    or shell syntax (GRUB's files are sourced by a shell); ``root`` never removed."""
    for name, value in (params or {}).items():
        if not isinstance(name, str) or not KERNEL_PARAM.match(name):
            fail("%s key" % option, name, "a kernel parameter name (letters, digits, _ . -)")
        values = value if isinstance(value, (list, tuple)) else [value]
        if name == "root" and any(v is None or isinstance(v, bool) for v in values):
            fail("%s.root" % option, value, "a device (root=UUID=...): refusing to remove root= "
                                            "or make it a flag, the host would not boot")
        for item in values:
            if isinstance(item, dict):
                fail("%s.%s" % (option, name), item, "a string, number, true, false or null")
            if isinstance(item, str) and (BOOT_VALUE_BAD.search(item) or len(item) > 1024):
                fail("%s.%s" % (option, name), item,
                     "one word or a space-separated value without quotes, backslashes, '$', "
                     "'`', ';' or control characters (at most 1024 characters)")
    for spec in absent or []:
        if not isinstance(spec, str) or not spec:
            fail(absent_option, spec, "a parameter name or name=value")
        name = spec.split("=", 1)[0]
        if not KERNEL_PARAM.match(name) or BOOT_VALUE_BAD.search(spec):
            fail(absent_option, spec, "a parameter name or name=value (no spaces, quotes or "
                                      "control characters)")
        if name == "root":
            fail(absent_option, spec, "anything but root (refusing to remove root=: the host "
                                      "would not find its root file system)")


def snapshot_name(option, value):
    if value in ("original", "latest"):
        return
    if not isinstance(value, str) or not value:
        fail(option, value, "original, latest, a file name in the snapshot folder or a host "
                            "path")
    if "/" not in value and not SNAPSHOT_NAME.match(value):
        fail(option, value, "original, latest, a file name in the snapshot folder (letters, "
                            "digits, _ . @ : + -) or a host path")


# --------------------------------------------------------------------------------------
# per module


def common(p, skip=()):
    for key, value in p.items():
        if key not in skip and not key.startswith("_"):
            no_control(key, value)
    if "root" in p:
        root(p)


def gpu(p, vendor="vendor", classes="classes"):
    if p.get(vendor) is not None:
        vendor_id(vendor, p[vendor])
    pci_classes(classes, p.get(classes))


# Modules that change the host take the root's lock (not in check mode), per state that
# changes something. tests/hostile/test_locks_everywhere.py runs every module of the
# collection and fails when one with a changing side is not refused under another run's
# lock (a new module must be listed there as changing or read-only).
LOCKING = {
    "host_tune": None, "sysctl_settings": None, "cpuidle_state": None, "boot_service": None,
    "kernel_cmdline": None, "lxc_cgroup_devices": None, "container_verify": None,
    "dkms_build": None, "driver_stage": None, "audit_timer": None, "vm_verify": None,
    "setpci_maxreadreq": ("present",), "tuning_snapshot": ("present", "restore"),
    "gpu_recover": None,
}


def check(rules, params):
    """Raise ValidationError when an option in ``params`` can only be a mistake: ``rules``
    is the module's own function (beside its spec), run on a copy of the parameters.
    Returns what ``rules`` returns: values it checked and the run takes as they are (the
    wanted values), so nothing is checked twice."""
    if not callable(rules):
        raise TypeError("no validation rules: every module passes its own rules function "
                        "(tests/unit/test_module_rules.py)")
    return rules(dict(params))


def check_module(module, name, rules):
    """``check`` for an AnsibleModule: a bad value fails the task before anything runs.
    Returns the module's run lock, a context manager (``Held``) to run the module inside,
    whose ``checked`` is what ``rules`` returned::

        with check_module(module, "sysctl_settings", rules):
            _run(module)

        held = check_module(module, "host_audit", rules)   # rules returns the wanted values
        with held:
            _run(module, held.checked)

    A module of LOCKING holds the root's lock inside the ``with`` (outside check mode) and
    releases it however the block ends: exit_json and fail_json raise SystemExit, which
    passes through."""
    try:
        checked = check(rules, module.params)
    except ValidationError as exc:
        module.fail_json(msg="%s: %s (nothing was read or written)" % (name, exc),
                         changed=False)
    return Held(module, name, checked)


class Held(object):
    """The root's lock of a module of LOCKING (``hostfs.RootLock``), taken on entering the
    ``with`` block and released on leaving it. A lock held by another run fails the task
    naming the holder, and so does a run lock (``runlock``) whose token is not the one this
    task was given, or a lock folder that leads out of the root. Nothing is taken for a
    read-only module, in check mode or for a state that changes nothing. ``checked`` is what
    the module's rules returned (``check``)."""

    def __init__(self, module, name, checked=None):
        self.module = module
        self.name = name
        self.checked = checked
        self.lock = None

    def _wanted(self):
        if self.name not in LOCKING or self.module.check_mode:
            return False
        states = LOCKING[self.name]
        return states is None or self.module.params.get("state") in states

    def __enter__(self):
        if not self._wanted():
            return None
        # imported here: a read-only module (host_audit on every host of a fleet) compiles less
        from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock

        module, name = self.module, self.name
        root = module.params.get("root") or "/"
        lock = RootLock(root, name)
        try:
            check_root(root)
            lock.acquire()
            foreign = run_lock.refuse_foreign(root)
        except (LockError, OSError, PathError) as exc:
            lock.release()
            module.fail_json(msg="%s: %s (nothing was changed)" % (name, exc), changed=False)
        if foreign:
            lock.release()
            module.fail_json(msg="%s: another gpuhost.tuning run is changing this host: %s "
                                 "(nothing was changed)" % (name, foreign), changed=False)
        self.lock = lock
        return lock

    def __exit__(self, kind, value, traceback):
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        return False
