# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option values checked before a module reads or writes anything.

One layer for every module (and so for every role, which reach hosts only through module
options): ``check(name, params)`` raises ValidationError naming the option, the value and
what is allowed; ``check_module(module, name)`` turns that into ``fail_json`` with
``changed=false``. The rules per module are in ``RULES``; each is a plain function of the
parameters, so a test calls them without a module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuhost.tuning.plugins.module_utils import pci as pci_mod
from ansible_collections.gpuhost.tuning.plugins.module_utils.checks.base import SEVERITIES
from ansible_collections.gpuhost.tuning.plugins.module_utils.hostfs import (
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
PCI_ADDRESS = re.compile(r"^([0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")

MAX_CPU = 65535           # highest CPU number accepted in a CPU list (kernel NR_CPUS <= 8192)
MAX_LATENCY_US = 10000000  # 10 s: larger is no idle state any kernel has
MAX_MAJOR = 4095           # majors are 12 bits (MAJORBITS)
MAX_VALUE_CHARS = 4096     # a sysctl value is at most a page
VMID_RANGE = (100, 999999999)  # Proxmox guest ids


def _fail(option, value, allowed):
    raise ValidationError("%s: %r is not allowed: %s" % (option, value, allowed))


def no_control(option, value):
    """Refuse newlines and other control characters (a tab is allowed) anywhere in
    ``value``: strings, dict keys and values, list items."""
    if isinstance(value, str):
        if CONTROL.search(value):
            _fail(option, value, "no newline or other control character (it would add a "
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
            _fail(option, item, "a non-empty host path")
        try:
            under_root(params.get("root") or "/", item, option, follow=follow)
        except PathError as exc:
            raise ValidationError(str(exc))


def sysctl_key(option, key):
    if not isinstance(key, str) or not SYSCTL_KEY.match(key):
        _fail(option, key, "a dotted sysctl key like kernel.numa_balancing (letters, digits, "
                           "_ and -, at least two parts, no spaces, '=' or '/')")


def sysctl_values(option, values, allow_empty=True):
    """Every key and value checked; the error names each bad one."""
    if values is None:
        return
    if not isinstance(values, dict):
        _fail(option, values, "a mapping of sysctl key to value")
    if not values and not allow_empty:
        _fail(option, values, "at least one key")
    problems = []
    for key, value in values.items():
        try:
            sysctl_key("%s key" % option, key)
            where = "%s.%s" % (option, key)
            if value is None or isinstance(value, (dict, list)):
                _fail(where, value, "a string or number like \"0\"")
            text = str(value)
            if not text.strip():
                _fail(where, value, "a non-empty value")
            if CONTROL.search(text):
                _fail(where, value, "one line (no newline or control character)")
            if len(text) > MAX_VALUE_CHARS:
                _fail(where, text[:40] + "...", "at most %d characters" % MAX_VALUE_CHARS)
        except ValidationError as exc:
            problems.append(str(exc))
    if problems:
        raise ValidationError("invalid sysctl values, nothing written: %s" % "; ".join(problems))


def idle_state_name(option, name, allow_empty=False):
    if allow_empty and name in ("", None):
        return
    if not isinstance(name, str) or not IDLE_STATE.match(name):
        _fail(option, name, "an idle state name as the kernel spells it (POLL, C1, C1E, C2, "
                            "C6, C1_ACPI, ...; case matters)")


def cpu_list(option, text):
    """A CPU list checked piece by piece, before anything is expanded."""
    text = str(text)
    pieces = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(pieces):
        _fail(option, text, "a CPU list like 0-63,65-127")
    for piece in pieces:
        bounds = piece.split("-")
        if len(bounds) > 2 or not all(b.isdigit() for b in bounds):
            _fail(option, text, "a CPU list like 0-63,65-127")
        numbers = [int(b) for b in bounds]
        if numbers[-1] < numbers[0]:
            _fail(option, text, "ranges low-high (%s is backwards)" % piece)
        if numbers[-1] > MAX_CPU:
            _fail(option, text, "CPU numbers 0-%d" % MAX_CPU)


def vendor_id(option, value):
    try:
        text = pci_mod._norm_hex(value, "vendor")
    except ValueError:
        text = ""
    if len(text) != 4:
        _fail(option, value, "a PCI vendor id of four hex digits like 10de (quote it in YAML)")


def pci_classes(option, values):
    if values is None:
        return
    if not values:
        _fail(option, values, "at least one PCI class like 0300 (an empty list selects "
                              "nothing)")
    for value in values:
        try:
            pci_mod.normalize_class(value)
        except ValueError as exc:
            raise ValidationError("%s: %s" % (option, exc))


def pci_addresses(option, values):
    for value in values or []:
        try:
            pci_mod.normalize_address(value)
        except ValueError as exc:
            raise ValidationError("%s: %s" % (option, exc))


def non_empty_list(option, value, what):
    if value is not None and len(value) == 0:
        _fail(option, value, "%s; an empty list is refused (leave the option out instead)"
                             % what)


def names(option, values, pattern=NAME, what="names of letters, digits, _ . + -"):
    for value in values or []:
        if not isinstance(value, str) or not pattern.match(value):
            _fail(option, value, what)


def int_range(option, value, low, high):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        _fail(option, value, "an integer from %d to %d" % (low, high))


def boot_params(option, params, absent_option=None, absent=None):
    """Kernel parameters: names the kernel parses, values without whitespace breaks, quotes
    or shell syntax (GRUB's files are sourced by a shell); ``root`` never removed."""
    for name, value in (params or {}).items():
        if not isinstance(name, str) or not KERNEL_PARAM.match(name):
            _fail("%s key" % option, name, "a kernel parameter name (letters, digits, _ . -)")
        values = value if isinstance(value, (list, tuple)) else [value]
        if name == "root" and any(v is None or isinstance(v, bool) for v in values):
            _fail("%s.root" % option, value, "a device (root=UUID=...): refusing to remove root= "
                                             "or make it a flag, the host would not boot")
        for item in values:
            if isinstance(item, dict):
                _fail("%s.%s" % (option, name), item, "a string, number, true, false or null")
            if isinstance(item, str) and (BOOT_VALUE_BAD.search(item) or len(item) > 1024):
                _fail("%s.%s" % (option, name), item,
                      "one word or a space-separated value without quotes, backslashes, '$', "
                      "'`', ';' or control characters (at most 1024 characters)")
    for spec in absent or []:
        if not isinstance(spec, str) or not spec:
            _fail(absent_option, spec, "a parameter name or name=value")
        name = spec.split("=", 1)[0]
        if not KERNEL_PARAM.match(name) or BOOT_VALUE_BAD.search(spec):
            _fail(absent_option, spec, "a parameter name or name=value (no spaces, quotes or "
                                       "control characters)")
        if name == "root":
            _fail(absent_option, spec, "anything but root (refusing to remove root=: the host "
                                       "would not find its root file system)")


def snapshot_name(option, value):
    if value in ("original", "latest"):
        return
    if not isinstance(value, str) or not value:
        _fail(option, value, "original, latest, a file name in the snapshot folder or a host "
                             "path")
    if "/" not in value and not SNAPSHOT_NAME.match(value):
        _fail(option, value, "original, latest, a file name in the snapshot folder (letters, "
                             "digits, _ . @ : + -) or a host path")


# --------------------------------------------------------------------------------------
# per module


def _common(p, skip=()):
    for key, value in p.items():
        if key not in skip and not key.startswith("_"):
            no_control(key, value)
    if "root" in p:
        root(p)


def _gpu(p, vendor="vendor", classes="classes"):
    if p.get(vendor) is not None:
        vendor_id(vendor, p[vendor])
    pci_classes(classes, p.get(classes))


def _sysctl_settings(p):
    _common(p)
    sysctl_values("values", p.get("values"), allow_empty=p.get("state") != "present")
    for key in p.get("at_least") or []:
        sysctl_key("at_least", key)
    inside(p, "path", follow=False)
    if p.get("path") and p["path"].endswith("/"):
        _fail("path", p["path"], "a file path, not a folder")


def _cpuidle_state(p):
    _common(p)
    names("names", p.get("names"), IDLE_STATE,
          "idle state names as the kernel spells them (POLL, C1, C1E, C2, ...; case matters)")
    non_empty_list("names", p.get("names"), "idle state names")
    idle_state_name("deeper_than", p.get("deeper_than"), allow_empty=True)
    int_range("max_latency_us", p.get("max_latency_us"), 0, MAX_LATENCY_US)
    non_empty_list("cpus", p.get("cpus"), "CPU lists like 0-63")
    for item in p.get("cpus") or []:
        cpu_list("cpus", item)


def _setpci_maxreadreq(p):
    _common(p)
    non_empty_list("devices", p.get("devices"),
                   "PCI addresses like 0000:41:00.0 (leave devices out to select by vendor "
                   "and class)")
    pci_addresses("devices", p.get("devices"))
    _gpu(p)


def _boot_service(p):
    _common(p)
    _gpu(p)
    idle_state_name("cpuidle_deeper_than", p.get("cpuidle_deeper_than"), allow_empty=True)
    names("after", p.get("after"), UNIT_NAME, "systemd unit names like nvidia-persistenced.service")
    names("before", p.get("before"), UNIT_NAME, "systemd unit names like pve-guests.service")
    python = p.get("python")
    if python is not None and (not EXEC_PATH.match(python)
                               or set(python.split("/")) & set([".", ".."])):
        _fail("python", python, "the absolute path of the interpreter alone (spaces are "
                                "allowed and quoted in the unit; no arguments, quotes, "
                                "backslashes, control characters, '.' or '..')")


def _tuning_snapshot(p):
    _common(p)
    non_empty_list("parts", p.get("parts"),
                   "parts from pcie, cpuidle, sysctl, files, placement")
    inside(p, "lxc_config_dir")
    snapshot_name("snapshot", p.get("snapshot"))
    if p.get("snapshot") and "/" in p["snapshot"]:
        inside(p, "snapshot")
    inside(p, "dir")
    inside(p, "files", follow=False)
    for path in p.get("files") or []:
        if not path.startswith("/"):
            _fail("files", path, "absolute host paths")
    for key in p.get("sysctl_keys") or []:
        sysctl_key("sysctl_keys", key)
    _gpu(p)


def _host_tune(p):
    _common(p)
    non_empty_list("parts", p.get("parts"), "tune parts")
    for key in p.get("sysctl_at_least") or []:
        sysctl_key("sysctl_at_least", key)
    inside(p, "sysctl_file")
    inside(p, "snapshot_dir")
    for vmid in p.get("numa_pin_vmids") or []:
        int_range("numa_pin_vmids", vmid, *VMID_RANGE)
    bandwidth_options(p)
    latency_options(p)
    from ansible_collections.gpuhost.tuning.plugins.module_utils.tune import PER_KEY

    wanted_values(p, PER_KEY)


def wanted_values(p, per_key=()):
    """The wanted values of a module taking option ``wanted`` (completed, the deprecated
    per-key options ``per_key`` over it), checked; returns them."""
    # imported here: the modules that take wanted import facts anyway, the others never
    from ansible_collections.gpuhost.tuning.plugins.module_utils import facts

    try:
        w = facts.wanted_intake(p, per_key)
    except ValueError as exc:
        raise ValidationError("wanted: %s" % exc)
    int_range("bandwidth_min_pct", w.get("bandwidth_min_pct"), 1, 100)
    sysctl_values("sysctl", w.get("sysctl"))
    idle_state_name("cpuidle_deeper_than", w.get("cpuidle_deeper_than"))
    if w.get("boot_params"):
        boot_params("boot_params", w["boot_params"])
    names("lxc_gpu_drivers", w.get("lxc_gpu_drivers"))
    inside(dict(w, root=p.get("root") or "/"), "lxc_config_dir")
    _gpu(w, "gpu_vendor", "gpu_classes")
    policy_options(w)
    return w


def _host_audit(p):
    _common(p, skip=("cuda",))   # probe results carry the driver's own messages
    if p.get("capture") and ((p.get("root") or "/") != "/" or p.get("cuda_probe")):
        _fail("capture", p["capture"], "a capture tarball audited instead of root, so root "
              "stays / and cuda_probe off (got root %s%s)" % (
                  p.get("root"), ", cuda_probe true" if p.get("cuda_probe") else ""))
    if p.get("capture") and not p["capture"].startswith("/"):
        _fail("capture", p["capture"], "an absolute path of the tarball (e.g. $PWD/%s)"
              % p["capture"])
    int_range("cuda_size_mb", p.get("cuda_size_mb"), 1, 65536)
    int_range("cuda_timeout", p.get("cuda_timeout"), 1, 3600)
    if not isinstance(p.get("cuda") or [], list) or \
            not all(isinstance(item, dict) for item in p.get("cuda") or []):
        _fail("cuda", p.get("cuda"), "a list of cuda_probe results")
    from ansible_collections.gpuhost.tuning.plugins.module_utils.facts import WANTED_KEYS

    wanted_values(p, WANTED_KEYS)


def policy_options(p):
    """The operator policy (policy.py): acknowledged findings, XID overrides, pass marks."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils import checks, policy

    try:
        policy.check_acknowledged(p.get("acknowledged"), checks.finding_order())
        policy.check_xid_policy(p.get("xid_policy"))
        policy.check_copy_rate_marks(p.get("copy_rate_marks"))
    except ValueError as exc:
        raise ValidationError(str(exc))


def _host_capture(p):
    _common(p, skip=("archive",))
    sysctl_values("sysctl", p.get("sysctl"))
    if p.get("lxc_config_dir"):
        inside(p, "lxc_config_dir")
    _gpu(p, "gpu_vendor", "gpu_classes")


def _lxc_cgroup_devices(p):
    _common(p)
    int_range("vmid", p.get("vmid"), *VMID_RANGE)
    inside(p, "path")
    inside(p, "config_dir")
    non_empty_list("drivers", p.get("drivers"), "driver names from /proc/devices")
    names("drivers", p.get("drivers"), what="driver names as /proc/devices lists them "
                                            "(letters, digits, _ . + -)")
    access = p.get("access")
    if access is not None and (not access or any(c not in "rwm" for c in access)
                               or len(set(access)) != len(access)):
        _fail("access", access, "a non-empty subset of rwm, each letter once (r read, w write, "
                                "m mknod)")
    for major in p.get("previous_majors") or []:
        int_range("previous_majors", major, 0, MAX_MAJOR)


def _kernel_cmdline(p):
    _common(p)
    boot_params("params", p.get("params"), "absent", p.get("absent"))
    if p.get("grub_file"):
        path = p["grub_file"]
        if not path.startswith("/"):
            path = "/etc/default/grub.d/" + path
        inside(dict(p, grub_file=path), "grub_file")


def _boot_entries(p):
    _common(p)
    boot_params("params", p.get("params"), "absent", p.get("absent"))
    names("kernels", p.get("kernels"), RELEASE, "kernel releases like 6.14.11-5-bpo12-pve")
    inside(p, "esp_dirs")
    inside(p, "grub_cfg")


def _kernel_state(p):
    _common(p)
    boot_params("params", p.get("params"), "absent", p.get("absent"))
    names("kernel", [p["kernel"]] if p.get("kernel") else [], RELEASE,
          "a kernel release like 6.14.11-5-bpo12-pve")


def _dkms_build(p):
    _common(p)
    names("name", [p.get("name")], what="a DKMS module name (letters, digits, _ . + -)")
    names("version", [p["version"]] if p.get("version") else [], RELEASE,
          "a DKMS version like 550.144.03")
    names("kernel", [p["kernel"]] if p.get("kernel") else [], RELEASE,
          "a kernel release like 6.14.11-5-bpo12-pve")
    names("arch", [p["arch"]] if p.get("arch") else [], what="an architecture like x86_64")


def _initramfs_check(p):
    _common(p)
    non_empty_list("kernels", p.get("kernels"), "kernel releases")
    names("kernels", p.get("kernels"), RELEASE, "kernel releases like 6.14.11-5-bpo12-pve")
    for option in ("files", "absent_files"):
        for path in p.get(option) or []:
            if not path.startswith("/"):
                _fail(option, path, "absolute paths as inside the initramfs")
    for release in p.get("kernels") or []:
        inside(dict(p, image=p["image"].replace("{kernel}", release)), "image")


def latency_options(p):
    """The latency measurement (host_tune's latency part, cuda_probe's latency): round
    trips per mode and the sleep before each, a library."""
    if "latency_count" in p:
        int_range("latency_count", p.get("latency_count"), 1, 100000)
    if "latency_gap_us" in p:
        int_range("latency_gap_us", p.get("latency_gap_us"), 0, 1000000)
    if "cuda_library" in p and not p["cuda_library"]:
        _fail("cuda_library", p["cuda_library"], "a library name like libcuda.so.1 or a path")


def bandwidth_options(p):
    """host_tune's bandwidth part: the copy size and count the probe can use, a library."""
    int_range("bandwidth_size_mb", p.get("bandwidth_size_mb"), 1, 65536)
    int_range("bandwidth_repeats", p.get("bandwidth_repeats"), 1, 1000)
    int_range("bandwidth_timeout", p.get("bandwidth_timeout"), 1, 3600)
    if "cuda_library" in p and not p["cuda_library"]:
        _fail("cuda_library", p["cuda_library"], "a library name like libcuda.so.1 or a path")


def _cuda_probe(p):
    _common(p)
    if p.get("vmid") is not None:
        int_range("vmid", p["vmid"], *VMID_RANGE)
    int_range("size_mb", p.get("size_mb"), 1, 65536)
    int_range("repeats", p.get("repeats"), 1, 1000)
    int_range("timeout", p.get("timeout"), 1, 3600)
    if not p.get("library"):
        _fail("library", p.get("library"), "a library name like libcuda.so.1 or a path")
    latency_options(p)
    for bdf in p.get("latency_gpus") or []:
        if not PCI_ADDRESS.match(bdf or ""):
            _fail("latency_gpus", bdf, "PCI addresses like 0000:c1:00.0")


def _post_boot_verify(p):
    _common(p, skip=("audit",))
    wanted_values(p, ("boot_params", "cpufreq_drivers_wanted", "cpuidle_deeper_than",
                      "mrrs_size"))
    names("modules", p.get("modules"), what="kernel module names (letters, digits, _ . + -)")
    for module, wanted in (p.get("module_params") or {}).items():
        names("module_params", [module], what="kernel module names")
        if not isinstance(wanted, dict):
            _fail("module_params.%s" % module, wanted, "a mapping of parameter to value")
        names("module_params.%s" % module, list(wanted), what="parameter names")
    if p.get("tuning_service") is not None and not UNIT_NAME.match(p["tuning_service"]):
        _fail("tuning_service", p["tuning_service"], "a systemd unit name like "
                                                     "gpuhost-tuning.service")
    if p.get("expected_kernel"):
        names("expected_kernel", [p["expected_kernel"]], RELEASE, "a kernel release")


def _container_verify(p):
    _common(p)
    int_range("vmid", p.get("vmid"), *VMID_RANGE)
    inside(p, "config_dir")
    non_empty_list("drivers", p.get("drivers"), "driver names from /proc/devices")
    names("drivers", p.get("drivers"), what="driver names as /proc/devices lists them "
                                            "(letters, digits, _ . + -)")
    for major in p.get("previous_majors") or []:
        int_range("previous_majors", major, 0, MAX_MAJOR)
    int_range("cuda_timeout", p.get("cuda_timeout"), 1, 3600)


def _vfio_initramfs_check(p):
    _common(p)
    if not p.get("kernel"):
        _fail("kernel", p.get("kernel"), "the kernel release that boots next")
    names("kernel", [p["kernel"]], RELEASE, "a kernel release like 6.14.11-5-bpo12-pve")
    inside(dict(p, image=p["image"].replace("{kernel}", p["kernel"])), "image")
    int_range("timeout", p.get("timeout"), 1, 3600)


def _vm_verify(p):
    _common(p)
    for vmid in p.get("running_before") or []:
        int_range("running_before", vmid, *VMID_RANGE)
    int_range("start_timeout", p.get("start_timeout"), 1, 3600)


def _reboot_report(p):
    _common(p, skip=("report",))
    if not isinstance(p.get("report"), dict):
        _fail("report", p.get("report"), "the report document (a mapping)")
    if p.get("dest") in ("", None):
        _fail("dest", p.get("dest"), "a folder path")


def _run_lock(p):
    _common(p)
    if p.get("token") is not None and not re.match(r"^[0-9a-f]{32}$", p["token"]):
        _fail("token", p["token"], "the 32 hex digits a run_lock acquire returned")
    if p.get("state") == "released" and not p.get("token"):
        _fail("token", p.get("token"), "the token the acquire returned (state released)")


def _reports(option):
    def rule(p):
        value = p.get(option)
        if value is None and p.get("hosts") is not None:
            # the action plugin fills the results from hosts before it checks
            raise ValidationError("hosts and result_var are read from the play's variables by "
                                  "the action plugin on the controller; pass %s when running "
                                  "the module itself" % option)
        if not isinstance(value, dict):
            _fail(option, value, "a mapping of host name to result")
        if p.get("dest") in ("", None):
            _fail("dest", p.get("dest"), "a folder path")
    return rule


FINDING_KEYS = ("id", "severity", "subject", "current", "expected")


def _short(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _audit_report(p):
    """Each host's audit as host_audit returns it: findings a list of mappings with
    FINDING_KEYS, a known severity and a text id (the message names host and key)."""
    _reports("audits")(p)
    for host, audit in p["audits"].items():
        if not isinstance(audit, dict) or "findings" not in audit:
            continue  # the module says "no audit result for <host>"
        where = "audits.%s" % host
        findings = audit["findings"]
        if not isinstance(findings, list):
            raise ValidationError("%s.findings: %s is not allowed: a list of findings (pass "
                                  "the 'audit' value host_audit returned)"
                                  % (where, _short(findings)))
        for index, finding in enumerate(findings):
            at = "%s.findings[%d]" % (where, index)
            if not isinstance(finding, dict):
                raise ValidationError("%s: %s is not allowed: a finding mapping with %s"
                                      % (at, _short(finding), ", ".join(FINDING_KEYS)))
            missing = [key for key in FINDING_KEYS if key not in finding]
            if missing:
                raise ValidationError("%s: no %s: a finding needs %s"
                                      % (at, ", ".join(missing), ", ".join(FINDING_KEYS)))
            if not isinstance(finding["id"], str) or not finding["id"].strip():
                raise ValidationError("%s.id: %s is not allowed: a check id like mrrs_low"
                                      % (at, _short(finding["id"])))
            if finding["severity"] not in SEVERITIES:
                raise ValidationError("%s.severity: %s is not allowed: one of %s"
                                      % (at, _short(finding["severity"]), ", ".join(SEVERITIES)))


def _report_merge(p):
    if not p.get("folders"):
        _fail("folders", p.get("folders"), "one or more report folders (one per slice or run)")
    for folder in p["folders"]:
        if folder in ("", None):
            _fail("folders", p["folders"], "report folder paths, none empty")
    if p.get("dest") in ("", None):
        _fail("dest", p.get("dest"), "a folder path")
    if p.get("stale_hours") is not None and not p["stale_hours"] > 0:
        _fail("stale_hours", p["stale_hours"], "hours above 0 (a host audited longer ago "
              "is listed as stale)")


RULES = {
    "sysctl_settings": _sysctl_settings,
    "cpuidle_state": _cpuidle_state,
    "setpci_maxreadreq": _setpci_maxreadreq,
    "boot_service": _boot_service,
    "tuning_snapshot": _tuning_snapshot,
    "host_tune": _host_tune,
    "host_audit": _host_audit,
    "host_capture": _host_capture,
    "lxc_cgroup_devices": _lxc_cgroup_devices,
    "kernel_cmdline": _kernel_cmdline,
    "boot_entries": _boot_entries,
    "kernel_state": _kernel_state,
    "dkms_build": _dkms_build,
    "initramfs_check": _initramfs_check,
    "cuda_probe": _cuda_probe,
    "audit_report": _audit_report,
    "report_merge": _report_merge,
    "tune_report": _reports("results"),
    "post_boot_verify": _post_boot_verify,
    "container_verify": _container_verify,
    "vfio_initramfs_check": _vfio_initramfs_check,
    "vm_verify": _vm_verify,
    "reboot_report": _reboot_report,
    "run_lock": _run_lock,
}


def check(name, params):
    """Raise ValidationError when an option of module ``name`` can only be a mistake."""
    RULES[name](dict(params))


# Modules that change the host take the root's lock (not in check mode), per state that
# changes something. tests/hostile/test_locks_everywhere.py runs every module of the
# collection and fails when one with a changing side is not refused under another run's
# lock (a new module must be listed there as changing or read-only).
LOCKING = {
    "host_tune": None, "sysctl_settings": None, "cpuidle_state": None, "boot_service": None,
    "kernel_cmdline": None, "lxc_cgroup_devices": None, "container_verify": None,
    "dkms_build": None, "audit_timer": None, "vm_verify": None,
    "setpci_maxreadreq": ("present",), "tuning_snapshot": ("present", "restore"),
}


def check_module(module, name):
    """``check`` for an AnsibleModule: a bad value fails the task before anything runs.
    A module that changes the host then takes the root's lock (``hold_locks``)."""
    try:
        check(name, module.params)
    except ValidationError as exc:
        module.fail_json(msg="%s: %s (nothing was read or written)" % (name, exc),
                         changed=False)
    return hold_locks(module, name)


def hold_locks(module, name):
    """For a module of LOCKING (outside check mode): take the root's lock
    (``hostfs.RootLock``) until the module exits; a lock held by another run fails the task
    naming the holder, and so does a run lock (``runlock``) whose token is not the one this
    task was given, or a lock folder that leads out of the root."""
    if name not in LOCKING or module.check_mode:
        return None
    states = LOCKING[name]
    if states is not None and module.params.get("state") not in states:
        return None
    # imported here: a read-only module (host_audit on every host of a fleet) compiles less
    from ansible_collections.gpuhost.tuning.plugins.module_utils import runlock

    lock = RootLock(module.params.get("root") or "/", name)
    try:
        check_root(module.params.get("root") or "/")
        lock.acquire()
        foreign = runlock.refuse_foreign(module.params.get("root") or "/")
    except (LockError, OSError, PathError) as exc:
        lock.release()
        module.fail_json(msg="%s: %s (nothing was changed)" % (name, exc), changed=False)
    if foreign:
        lock.release()
        module.fail_json(msg="%s: another gpuhost.tuning run is changing this host: %s "
                             "(nothing was changed)" % (name, foreign), changed=False)
    for method in ("exit_json", "fail_json"):
        _release_before(module, method, lock)
    return lock


def _release_before(module, method, lock):
    original = getattr(module, method)

    def wrapped(*args, **kwargs):
        lock.release()
        return original(*args, **kwargs)
    setattr(module, method, wrapped)
