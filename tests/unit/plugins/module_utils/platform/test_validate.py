"""validate: the shared rule helpers each module's ``rules()`` is built from and what each
refuses, ``check_module``'s failure, and the root lock its context manager holds for a
module that changes the host (that every module has rules and runs inside check_module is
tests/unit/test_module_rules.py)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (
    ValidationError,
)


def test_no_control_walks_strings_dicts_and_lists():
    validate.no_control("x", {"a": ["tab\tok", 1, None]})
    with pytest.raises(ValidationError, match=r"^x\.a: 'b\\nc' is not allowed: no newline"):
        validate.no_control("x", {"a": "b\nc"})
    with pytest.raises(ValidationError, match=r"^x key: "):
        validate.no_control("x", {"k\r": 1})
    with pytest.raises(ValidationError):
        validate.no_control("x", ["ok", "bad\x00"])


def test_sysctl_values_names_every_bad_key_and_value():
    validate.sysctl_values("sysctl", {"vm.swappiness": 10, "net.core.rmem_max": "16777216"})
    with pytest.raises(ValidationError) as err:
        validate.sysctl_values("sysctl", {"vm": "1", "vm.a": None, "vm.b": " ", "vm.c": "x\ny",
                                          "vm.d": "9" * (validate.MAX_VALUE_CHARS + 1)})
    text = str(err.value)
    assert text.startswith("invalid sysctl values, nothing written: ")
    for option in ("sysctl key: 'vm'", "sysctl.vm.a: None", "sysctl.vm.b: ' '",
                   "sysctl.vm.c: ", "sysctl.vm.d: '9999"):
        assert option in text
    with pytest.raises(ValidationError, match="a mapping"):
        validate.sysctl_values("sysctl", ["vm.swappiness"])
    with pytest.raises(ValidationError, match="at least one key"):
        validate.sysctl_values("sysctl", {}, allow_empty=False)


@pytest.mark.parametrize("name,ok", [("C1", True), ("C1E", True), ("C1_ACPI", True),
                                     ("POLL", True), ("haltpoll", True), ("c2", False),
                                     ("C2 ", False), ("", False), (None, False)])
def test_idle_state_name(name, ok):
    if ok:
        validate.idle_state_name("o", name)
    else:
        with pytest.raises(ValidationError, match="an idle state name"):
            validate.idle_state_name("o", name)
    validate.idle_state_name("o", "", allow_empty=True)


@pytest.mark.parametrize("text,why", [("0-63,65-127", None), ("7", None),
                                      ("", "a CPU list"), ("0-3,,5", "a CPU list"),
                                      ("1-2-3", "a CPU list"), ("a-b", "a CPU list"),
                                      ("9-3", "9-3 is backwards"), ("0-70000", "CPU numbers")])
def test_cpu_list(text, why):
    if why is None:
        validate.cpu_list("cpus", text)
    else:
        with pytest.raises(ValidationError, match=why):
            validate.cpu_list("cpus", text)


def test_int_range_refuses_bools_strings_and_out_of_range():
    validate.int_range("n", None, 1, 5)
    validate.int_range("n", 5, 1, 5)
    for bad in (True, "3", 0, 6, 2.5):
        with pytest.raises(ValidationError, match="an integer from 1 to 5"):
            validate.int_range("n", bad, 1, 5)


def test_vendor_classes_addresses():
    validate.vendor_id("gpu_vendor", "10de")
    with pytest.raises(ValidationError, match="four hex digits"):
        validate.vendor_id("gpu_vendor", "nvidia")
    with pytest.raises(ValidationError, match="an empty list selects nothing"):
        validate.pci_classes("gpu_classes", [])
    with pytest.raises(ValidationError, match="^gpu_classes: "):
        validate.pci_classes("gpu_classes", ["zz"])
    validate.pci_addresses("a", ["0000:01:00.0", "01:00.0"])
    with pytest.raises(ValidationError, match="^a: "):
        validate.pci_addresses("a", ["01:00"])


def test_boot_params_never_remove_root_and_refuse_shell_syntax():
    validate.boot_params("p", {"amd_pstate": "active", "quiet": None, "isolcpus": ["1", "2"]},
                         "absent", ["splash", "mitigations=auto"])
    for params in ({"root": None}, {"root": False}):
        with pytest.raises(ValidationError, match="refusing to remove root="):
            validate.boot_params("p", params)
    with pytest.raises(ValidationError, match="anything but root"):
        validate.boot_params("p", {}, "absent", ["root"])
    for value in ("a;reboot", "$(x)", "a`b`", "x\\y", "'q'"):
        with pytest.raises(ValidationError, match="without quotes"):
            validate.boot_params("p", {"x": value})
    with pytest.raises(ValidationError, match="a kernel parameter name"):
        validate.boot_params("p", {"bad name": "1"})
    with pytest.raises(ValidationError, match="name=value"):
        validate.boot_params("p", {}, "absent", ["a b"])


def test_snapshot_name():
    for ok in ("original", "latest", "snapshot-20260101T120000Z.json", "/srv/snap.json"):
        validate.snapshot_name("snapshot", ok)
    for bad in ("", None, ".hidden", "a b", 7):
        with pytest.raises(ValidationError):
            validate.snapshot_name("snapshot", bad)


def test_root_and_inside(tmp_path):
    for bad in ("", None, str(tmp_path / "none"), "/tmp/.."):
        with pytest.raises(ValidationError, match="^root: "):
            validate.root({"root": bad})
    validate.inside({"root": str(tmp_path), "path": "/etc/pve/lxc"}, "path")
    with pytest.raises(ValidationError, match="outside root"):
        validate.inside({"root": str(tmp_path), "path": ["/ok", "/../../etc"]}, "path")
    with pytest.raises(ValidationError, match="a non-empty host path"):
        validate.inside({"root": str(tmp_path), "path": ""}, "path")


class _Module:
    """What check_module uses of an AnsibleModule; fail_json/exit_json raise as they exit."""

    def __init__(self, params, check_mode=False):
        self.params = params
        self.check_mode = check_mode
        self.failed = None

    def fail_json(self, **kw):
        self.failed = kw
        raise SystemExit(1)

    def exit_json(self, **kw):
        raise SystemExit(0)


def test_check_module_fails_before_anything_runs(tmp_path):
    from ansible_collections.gpuhost.tuning.plugins.modules import kernel_state

    module = _Module({"root": str(tmp_path), "kernel": "../x", "params": {}, "absent": []})
    with pytest.raises(SystemExit):
        validate.check_module(module, "kernel_state", kernel_state.rules)
    assert module.failed == {"changed": False, "msg": "kernel_state: kernel: '../x' is not "
                             "allowed: a kernel release like 6.14.11-5-bpo12-pve (nothing "
                             "was read or written)"}


def test_the_run_takes_what_the_rules_checked(tmp_path):
    # host_audit's rules return the wanted values, checked once; the run takes them from
    # the held lock (no second check, no memo between calls)
    seen = []

    def rules(params):
        params["wanted"] = "changed on the copy"
        seen.append(params)
        return {"mrrs_size": 4096}

    module = _Module({"root": str(tmp_path), "wanted": {}})
    held = validate.check_module(module, "host_audit", rules)
    assert held.checked == {"mrrs_size": 4096}
    assert module.params["wanted"] == {} and len(seen) == 1   # the rules saw a copy


def _no_rules(_params):
    return None


def test_a_changing_module_holds_the_root_lock_until_it_exits(tmp_path):
    root = str(tmp_path)
    lock_file = os.path.join(root, "run", "gpuhost-tuning.lock")
    first = _Module({"root": root, "state": "present"})
    with pytest.raises(SystemExit):
        with validate.check_module(first, "boot_service", _no_rules):
            assert os.path.exists(lock_file)
            second = _Module({"root": root, "state": "present"})
            with pytest.raises(SystemExit):
                with validate.check_module(second, "sysctl_settings", _no_rules):
                    pass  # never reached: the lock is held
            assert second.failed["changed"] is False
            assert second.failed["msg"].startswith("sysctl_settings: ")
            assert second.failed["msg"].endswith("(nothing was changed)")
            first.exit_json(changed=False)
    assert not os.path.exists(lock_file)


def test_read_only_modules_check_mode_and_other_states_take_no_lock(tmp_path):
    root = str(tmp_path)
    for module, name in ((_Module({"root": root}), "host_audit"),
                         (_Module({"root": root}, check_mode=True), "host_tune"),
                         (_Module({"root": root, "state": "query"}), "tuning_snapshot")):
        with validate.check_module(module, name, _no_rules):
            assert not os.path.exists(os.path.join(root, "run"))
