"""Hostile operator cases against copies of host trees: each asserts the message a user sees
and, with a full digest of the tree (content, mode, owner, links), that nothing outside what
is documented changed."""

import base64
import json
import os

import pytest
from digest import changed, digest
from fixtures import boot, cpu, hosts, lxc, procsys
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.modules import (
    audit_report,
    boot_entries,
    boot_service,
    cpuidle_state,
    dkms_build,
    host_audit,
    host_capture,
    host_tune,
    initramfs_check,
    kernel_cmdline,
    lxc_cgroup_devices,
    setpci_maxreadreq,
    sysctl_settings,
    tune_report,
    tuning_snapshot,
)

SYSCTL = {"kernel.numa_balancing": "0", "vm.swappiness": "10"}


def refused(module, args, expect, root, check_mode=False, diff=False):
    """Run ``module`` on ``root``; it must fail with ``expect`` in its message and leave the
    whole tree (and the folder around it) exactly as it was."""
    outer = os.path.dirname(root)
    before = digest(outer)
    result = run_module(module, args, check_mode=check_mode, diff=diff)
    assert result.get("failed") is True, result
    assert expect in result["msg"], result["msg"]
    assert changed(before, digest(outer)) == []
    return result


# ---------------------------------------------------------------------------------------
# option values refused before anything is read or written (module, args, message)

BAD_OPTIONS = [
    (sysctl_settings, {"values": {"kernel.": "1"}}, "values key: 'kernel.'"),
    (sysctl_settings, {"values": {"vm swappiness": "1"}}, "'vm swappiness'"),
    (sysctl_settings, {"values": {"vm.swappiness=1": "1"}}, "'vm.swappiness=1'"),
    (sysctl_settings, {"values": {"vm.swappiness": "10\nkernel.panic = 1"}}, "control"),
    (sysctl_settings, {"values": {"vm.swappiness": ""}}, "a non-empty value"),
    (sysctl_settings, {"values": {"vm.swappiness": None}}, "a string or number"),
    (sysctl_settings, {"values": SYSCTL, "path": "/etc/sysctl.d/../../../../x.conf"},
     "outside root"),
    (sysctl_settings, {"values": SYSCTL, "at_least": ["net core"]}, "at_least"),
    (cpuidle_state, {"deeper_than": "c1"}, "case matters"),
    (cpuidle_state, {"deeper_than": "C1;reboot"}, "deeper_than"),
    (cpuidle_state, {"names": []}, "names"),
    (cpuidle_state, {"names": ["c2"]}, "case matters"),
    (cpuidle_state, {"max_latency_us": -1}, "max_latency_us: -1"),
    (cpuidle_state, {"max_latency_us": 10 ** 9}, "max_latency_us"),
    (cpuidle_state, {"deeper_than": "C1", "cpus": ["0-10000000"]}, "CPU numbers 0-65535"),
    (cpuidle_state, {"deeper_than": "C1", "cpus": ["5-1"]}, "backwards"),
    (cpuidle_state, {"deeper_than": "C1", "cpus": []}, "cpus"),
    (setpci_maxreadreq, {"devices": []}, "an empty list is refused"),
    (setpci_maxreadreq, {"devices": ["gpu0"]}, "invalid PCI address 'gpu0'"),
    (setpci_maxreadreq, {"classes": []}, "at least one PCI class"),
    (setpci_maxreadreq, {"vendor": "nvidia"}, "vendor"),
    (tuning_snapshot, {"state": "restore", "parts": []}, "an empty list is refused"),
    (tuning_snapshot, {"state": "restore", "snapshot": "../../../etc/passwd"},
     "outside root"),
    (tuning_snapshot, {"state": "restore", "snapshot": ".hidden"}, "snapshot"),
    (tuning_snapshot, {"dir": "/../../tmp"}, "outside root"),
    (tuning_snapshot, {"files": ["/etc/../../x"]}, "outside root"),
    (tuning_snapshot, {"sysctl_keys": ["a b"]}, "sysctl_keys"),
    (lxc_cgroup_devices, {"vmid": 129, "access": "rrr"}, "subset of rwm"),
    (lxc_cgroup_devices, {"vmid": 129, "access": ""}, "subset of rwm"),
    (lxc_cgroup_devices, {"vmid": 129, "access": "rwx"}, "subset of rwm"),
    (lxc_cgroup_devices, {"vmid": 129, "previous_majors": [70000]}, "0 to 4095"),
    (lxc_cgroup_devices, {"vmid": 5}, "vmid: 5"),
    (lxc_cgroup_devices, {"vmid": 129, "drivers": []}, "drivers"),
    (lxc_cgroup_devices, {"vmid": 129, "drivers": ["nvidia\nlxc.mount.entry"]}, "control"),
    (lxc_cgroup_devices, {"path": "/etc/pve/lxc/../../../../129.conf"}, "outside root"),
    (kernel_cmdline, {"params": {"root": None}}, "refusing to remove root="),
    (kernel_cmdline, {"absent": ["root"]}, "refusing to remove root="),
    (kernel_cmdline, {"params": {"quiet": "1\nroot=/dev/sdb"}}, "control"),
    (kernel_cmdline, {"params": {"x": "$(reboot)"}}, "'$'"),
    (kernel_cmdline, {"params": {"x": "`reboot`"}}, "'`'"),
    (kernel_cmdline, {"params": {"a b": "1"}}, "kernel parameter name"),
    (kernel_cmdline, {"grub_file": "../../../../x.cfg"}, "outside root"),
    (boot_entries, {"params": {"root": None}}, "refusing to remove root="),
    (boot_service, {"after": ["x.service\nExecStartPre=/bin/sh"]}, "control"),
    (boot_service, {"after": ["network.target foo.service"]}, "systemd unit names"),
    (boot_service, {"before": ["pve-guests"]}, "systemd unit names"),
    (boot_service, {"python": "/usr/bin/python3 -c 'import os'"}, "python"),
    (boot_service, {"cpuidle_deeper_than": "c1"}, "case matters"),
    (host_tune, {"cpuidle_deeper_than": "c1"}, "case matters"),
    (host_tune, {"sysctl": {"vm.swappiness": "1\nvm.panic=1"}}, "control"),
    (host_tune, {"sysctl_file": "/etc/sysctl.d/../../../../x.conf"}, "outside root"),
    (host_tune, {"parts": []}, "parts"),
    (host_audit, {"cpuidle_deeper_than": "C1 "}, "cpuidle_deeper_than"),
    (host_audit, {"sysctl": {"kernel.": "0"}}, "kernel."),
    (host_capture, {"gpu_vendor": "zz"}, "gpu_vendor"),
    (dkms_build, {"name": "nvidia; rm -rf /"}, "DKMS module name"),
    (dkms_build, {"name": "nvidia", "kernel": "../../x"}, "kernel release"),
    (initramfs_check, {"kernels": []}, "kernels"),
    (initramfs_check, {"kernels": ["6.1.0-1-amd64"], "image": "/../../../x-{kernel}"},
     "outside root"),
]


@pytest.mark.parametrize("module,args,expect", BAD_OPTIONS,
                         ids=["%s-%d" % (m.__name__.rsplit(".", 1)[1], i)
                              for i, (m, _a, _e) in enumerate(BAD_OPTIONS)])
def test_bad_option_refused_and_nothing_changed(shared_seed, module, args, expect):
    result = refused(module, dict(args, root=shared_seed), expect, shared_seed)
    assert result.get("changed") in (False, None)


# ---------------------------------------------------------------------------------------
# roots


@pytest.mark.parametrize("module,args", [
    (sysctl_settings, {"values": SYSCTL}),
    (host_tune, {}),
    (host_audit, {}),
    (tuning_snapshot, {}),
    (cpuidle_state, {"deeper_than": "C1"}),
])
def test_missing_root_refused_and_not_created(tmp_path, module, args):
    root = str(tmp_path / "nothere")
    result = run_module(module, dict(args, root=root))
    assert result["failed"] and "does not exist" in result["msg"]
    assert not os.path.exists(root) and os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("module,args", [
    (sysctl_settings, {"values": SYSCTL}), (host_audit, {}), (host_tune, {}),
])
def test_empty_root_is_not_the_live_host(module, args):
    result = run_module(module, dict(args, root=""))
    assert result["failed"] and "is empty" in result["msg"] and "unset variable" in result["msg"]


def test_root_that_only_resolves_to_slash_is_refused(tmp_path):
    result = run_module(sysctl_settings, {"values": SYSCTL, "root": "//"})
    assert result["failed"] and "resolves to /" in result["msg"]


def test_root_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    result = run_module(host_audit, {"root": str(path)})
    assert result["failed"] and "is not a folder" in result["msg"]


def test_symlink_out_of_the_root_refused(seed, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(seed, "etc", "sysctl.d-link"))
    refused(sysctl_settings, {"values": SYSCTL, "root": seed,
                              "path": "/etc/sysctl.d-link/99-x.conf"}, "outside root", seed)
    assert os.listdir(str(outside)) == []


# ---------------------------------------------------------------------------------------
# operator data


def _write(root, rel, text, mode=0o644):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def test_sysctl_settings_refuses_an_operator_file(seed):
    _write(seed, "/etc/sysctl.d/60-local.conf", "vm.swappiness = 1\n", 0o600)
    refused(sysctl_settings, {"values": SYSCTL, "root": seed,
                              "path": "/etc/sysctl.d/60-local.conf"},
            "refusing to overwrite the operator's settings", seed)


def test_sysctl_settings_refuses_debian_link(seed):
    _write(seed, "/etc/sysctl.conf", "#kernel.domainname = example.com\n")
    os.makedirs(os.path.join(seed, "etc/sysctl.d"), exist_ok=True)
    os.symlink("../sysctl.conf", os.path.join(seed, "etc/sysctl.d/99-sysctl.conf"))
    refused(sysctl_settings, {"values": SYSCTL, "root": seed,
                              "path": "/etc/sysctl.d/99-sysctl.conf"}, "a symlink to", seed)


def test_sysctl_absent_leaves_operator_file(seed):
    path = _write(seed, "/etc/sysctl.d/60-local.conf", "vm.swappiness = 1\n")
    before = digest(seed)
    result = run_module(sysctl_settings, {"state": "absent", "root": seed,
                                          "path": "/etc/sysctl.d/60-local.conf"})
    assert result["changed"] is False and result["kept"] is True
    assert changed(before, digest(seed)) == [] and os.path.isfile(path)


def test_tune_takes_over_only_what_the_original_snapshot_holds_and_revert_restores(seed):
    path = _write(seed, "/etc/sysctl.d/60-local.conf", "vm.swappiness = 1\n", 0o640)
    os.chown(path, 1234, 4321)
    original = digest(seed)
    args = hosts.as_wanted({"root": seed, "sysctl": SYSCTL,
                            "sysctl_file": "/etc/sysctl.d/60-local.conf",
                            "parts": ["snapshot", "sysctl"]})
    result = run_module(host_tune, args)
    assert not result.get("failed"), result.get("msg")
    with open(path) as handle:
        assert handle.read().startswith("# Managed by gpuhost.tuning")
    doc = json.load(open(os.path.join(seed, "var/lib/gpuhost/original.json")))
    rec = doc["state"]["files"]["/etc/sysctl.d/60-local.conf"]
    assert rec["uid"] == 1234 and rec["mode"] == "0640"
    # revert as the role does it: the file goes, the snapshot puts the operator's back
    run_module(sysctl_settings, {"state": "absent", "root": seed,
                                 "path": "/etc/sysctl.d/60-local.conf"})
    back = run_module(tuning_snapshot, {"state": "restore", "root": seed})
    assert not back.get("failed"), back.get("msg")
    now = digest(seed)
    diff = [p for p in changed(original, now) if not p.startswith("var/lib/gpuhost")
            and p != "var/lib" and p != "var"]
    assert diff == []


def test_tune_refuses_operator_file_the_original_does_not_hold(seed):
    run_module(host_tune, hosts.as_wanted({"root": seed, "sysctl": SYSCTL, "parts": ["snapshot"]}))
    _write(seed, "/etc/sysctl.d/60-local.conf", "vm.swappiness = 1\n")
    result = run_module(host_tune, hosts.as_wanted({"root": seed, "sysctl": SYSCTL,
                                                    "sysctl_file": "/etc/sysctl.d/60-local.conf",
                                                    "parts": ["snapshot", "sysctl"]}))
    assert result["failed"] and "does not hold its current state" in result["msg"]
    with open(os.path.join(seed, "etc/sysctl.d/60-local.conf")) as handle:
        assert handle.read() == "vm.swappiness = 1\n"


# ---------------------------------------------------------------------------------------
# snapshots


def _tuned(seed):
    result = run_module(host_tune, hosts.as_wanted({"root": seed, "sysctl": SYSCTL,
                                                    "parts": ["snapshot", "sysctl",
                                                              "boot_service"]}))
    assert not result.get("failed"), result.get("msg")
    return os.path.join(seed, "var/lib/gpuhost/original.json")


@pytest.mark.parametrize("edit,expect", [
    (lambda s: s["files"].update({"/etc/../../../tmp/x": {"type": "absent"}}), "'..'"),
    (lambda s: s["files"].update({"etc/x": {"type": "absent"}}), "absolute host path"),
    (lambda s: s["files"].update({"/etc/x": {"type": "block"}}), "type 'block'"),
    (lambda s: s["files"].update({"/etc/x": {"type": "file", "mode": "0644",
                                             "content_b64": "!!"}}), "unreadable"),
    (lambda s: s["sysctl"].update({"vm.swappiness\nx": "1"}), "sysctl key"),
    (lambda s: s["cpuidle"]["cpus"].update({"x": {}}), "CPU"),
    (lambda s: s.update(pcie=[{"address": "zz", "mrrs": 4096}]), "PCI address"),
    (lambda s: s.update(pcie=[{"address": "0000:01:00.0", "mrrs": 3}]), "MRRS 3"),
])
def test_edited_snapshot_refused_before_anything_is_restored(seed, edit, expect):
    path = _tuned(seed)
    doc = json.load(open(path))
    edit(doc["state"])
    with open(path, "w") as handle:
        json.dump(doc, handle)
    refused(tuning_snapshot, {"state": "restore", "root": seed}, expect, seed)


def test_snapshot_not_json_is_a_message(seed):
    path = _tuned(seed)
    with open(path, "w") as handle:
        handle.write("{not json")
    refused(tuning_snapshot, {"state": "restore", "root": seed}, "not valid JSON", seed)


def test_restore_recreates_preexisting_folders_and_owners(seed):
    folder = os.path.join(seed, "etc/gpuhost-tuning")
    os.makedirs(folder, 0o750)
    os.chmod(folder, 0o750)
    os.chown(folder, 77, 88)
    lib = os.path.join(seed, "usr/local/lib/gpuhost-tuning")
    os.makedirs(lib)
    original = digest(seed)
    _tuned(seed)
    run_module(boot_service, {"state": "absent", "root": seed})
    back = run_module(tuning_snapshot, {"state": "restore", "root": seed})
    assert not back.get("failed"), back.get("msg")
    st = os.stat(folder)
    assert (st.st_mode & 0o777, st.st_uid, st.st_gid) == (0o750, 77, 88)
    assert os.path.isdir(lib)
    rest = [p for p in changed(original, digest(seed))
            if not p.startswith("var/lib/gpuhost") and p not in ("var/lib", "var")]
    assert rest == [] or rest == ["etc/sysctl.d"], rest


def test_restore_removes_folders_tune_created(tmp_path):
    root = str(tmp_path / "host")
    os.makedirs(root)
    hosts.vm_host(root)
    original = digest(root)
    result = run_module(host_tune, hosts.as_wanted({"root": root, "sysctl": SYSCTL,
                                                    "parts": ["snapshot", "sysctl",
                                                              "boot_service"]}))
    assert not result.get("failed") or "sysctl" not in result["msg"]
    run_module(sysctl_settings, {"state": "absent", "root": root})
    run_module(boot_service, {"state": "absent", "root": root})
    run_module(tuning_snapshot, {"state": "restore", "root": root})
    rest = [p for p in changed(original, digest(root))
            if not p.startswith("var/lib/gpuhost") and p not in ("var/lib", "var")]
    assert rest == [] or set(rest) <= {"proc/sys/kernel/numa_balancing",
                                       "proc/sys/vm/swappiness"}, rest


# ---------------------------------------------------------------------------------------
# partial failure, raw errors, audit


def test_cpuidle_failure_after_writes_reports_changed_and_what(tmp_path, monkeypatch):
    root = cpu.epyc_cpus(str(tmp_path), threads=8)
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import (
        cpuidle_state as cpu_mod,
    )
    real = cpu_mod.write_in_place

    def immutable(path, text):
        if "/cpu7/" in path:
            raise PermissionError(1, "Operation not permitted")
        real(path, text)
    monkeypatch.setattr(cpu_mod, "write_in_place", immutable)
    result = run_module(cpuidle_state, {"root": root, "names": ["C2"]})
    assert result["failed"] and result["changed"] is True
    assert "7 flag(s) written (changed): C2 on CPUs 0-6" in result["msg"]
    assert {"cpu": 0, "name": "C2"} in result["written"]


def test_disable_file_that_is_a_folder_is_a_message(tmp_path):
    root = cpu.epyc_cpus(str(tmp_path), threads=4)
    path = os.path.join(root, "sys/devices/system/cpu/cpu2/cpuidle/state2/disable")
    os.unlink(path)
    os.mkdir(path)
    before = digest(root)
    result = run_module(cpuidle_state, {"root": root, "names": ["C2"]})
    assert result["failed"] and "not a cpuidle flag file" in result["msg"]
    assert changed(before, digest(root)) == []


@pytest.mark.parametrize("content,expect", [
    (None, "is missing"), ("", "is empty"), ("garbage\x00\x01", "not in the kernel's format"),
    ("Character devices:\n195 nvidia\nnonsense line\n", "line 3"),
])
def test_proc_devices_unread_is_an_audit_error(seed, content, expect):
    path = os.path.join(seed, "proc/devices")
    os.unlink(path)
    if content is not None:
        with open(path, "w") as handle:
            handle.write(content)
    result = run_module(host_audit, {"root": seed})
    errors = [f for f in result["audit"]["findings"] if f["id"] == "audit_error"]
    assert {f["subject"] for f in errors} >= {"char_devices", "lxc"}
    assert all(expect in f["current"] for f in errors if f["subject"] == "lxc")


def test_proc_devices_folder_is_a_message_for_lxc(seed):
    path = os.path.join(seed, "proc/devices")
    os.unlink(path)
    os.mkdir(path)
    refused(lxc_cgroup_devices, {"root": seed, "vmid": 129}, "cannot be read", seed)


def test_looping_capability_list_is_a_finding_and_tune_fails(seed):
    from fixtures import pci as pcifix
    built = hosts.seed_host  # noqa: F841 - the seed tree is already built
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import pci
    gpu = pci.select_devices(seed)[0].address
    path = pci.PciDevice(seed, gpu).config_path
    data = bytearray(open(path, "rb").read())
    first = data[0x34] & 0xFC
    data[first + 1] = first  # the first capability points at itself
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    assert pcifix  # fixture builders importable
    audit = run_module(host_audit, {"root": seed})
    text = json.dumps(audit["audit"]["findings"])
    assert "loops at" in text and gpu in text
    result = run_module(host_tune, {"root": seed, "parts": ["pcie"]})
    assert result["failed"] and gpu in result["msg"]


def test_lxc_non_utf8_config_under_diff(seed):
    path = os.path.join(seed, "etc/pve/lxc/129.conf")
    with open(path, "ab") as handle:
        handle.write(b"# caf\xe9\n")
    result = run_module(lxc_cgroup_devices, {"root": seed, "vmid": 129}, diff=True)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True and "\ufffd" in result["diff"]["before"]
    with open(path, "rb") as handle:
        assert b"# caf\xe9\n" in handle.read()


def test_backup_on_a_full_disk_leaves_nothing(seed, monkeypatch):
    import builtins
    real_open = builtins.open

    def full(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if "x" in mode and str(path).endswith("~"):
            handle.close()

            class Full(object):
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    return False

                def write(self, data):
                    raise OSError(28, "No space left on device")
            return Full()
        return handle
    monkeypatch.setattr(builtins, "open", full)
    result = refused(lxc_cgroup_devices, {"root": seed, "vmid": 129, "backup": True},
                     "backup of", seed)
    assert "No space left" in result["msg"]


def test_atomic_write_leaves_no_temp_file_on_failure(tmp_path, monkeypatch):
    path = str(tmp_path / "f.conf")

    def full(fd):
        raise OSError(28, "full")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        hostfs.atomic_write(path, "x")
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("module,args,expect", [
    (audit_report, {"audits": "nope"}, "audits"),
    (audit_report, {"audits": {"h1": {"nofindings": 1}}}, "no audit result for h1"),
    (tune_report, {"results": "nope"}, "results"),
    (audit_report, {"audits": {"h1": {"findings": "x"}}},
     "audits.h1.findings: 'x' is not allowed: a list of findings"),
    (audit_report, {"audits": {"h1": {"findings": ["x"]}}},
     "audits.h1.findings[0]: 'x' is not allowed: a finding mapping with id, severity"),
    (audit_report, {"audits": {"h1": {"findings": [{"id": "mrrs_low", "severity": "high"}]}}},
     "audits.h1.findings[0]: no subject, current, expected: a finding needs"),
    (audit_report, {"audits": {"h1": {"findings": [
        {"id": "mrrs_low", "severity": "huge", "subject": "", "current": "",
         "expected": ""}]}}}, "audits.h1.findings[0].severity: 'huge' is not allowed: one of "
                              "critical, high"),
    (audit_report, {"audits": {"ok": {"findings": []}, "h2": {"findings": [], "checks": 7}}},
     "the audit of h2 is malformed (TypeError"),
])
def test_malformed_report_input_is_a_message(tmp_path, module, args, expect):
    dest = str(tmp_path / "reports")
    result = run_module(module, dict(args, dest=dest))
    assert result["failed"] and expect in result["msg"] and "Traceback" not in result["msg"]
    assert not os.path.exists(dest)


# ---------------------------------------------------------------------------------------
# GRUB: values that a shell would run never reach the file


def test_grub_value_with_command_substitution_refused(tmp_path):
    root = str(tmp_path / "host")
    os.makedirs(root)
    boot.debian_grub(root)
    refused(kernel_cmdline, {"root": root, "params": {"foo": "$(touch /tmp/pwned)"}},
            "'$'", root)


def test_deeper_than_no_cpu_has_is_an_error_in_tune(seed):
    result = run_module(host_tune, hosts.as_wanted({"root": seed, "cpuidle_deeper_than": "C9",
                                                    "parts": ["cpuidle"]}))
    assert result["failed"] and "C9 (deeper_than) not found" in result["msg"]


def test_deeper_than_on_a_vm_without_c_states_is_not_applicable(tmp_path):
    root = str(tmp_path / "vm")
    os.makedirs(root)
    hosts.vm_host(root)
    result = run_module(host_tune, {"root": root, "parts": ["cpuidle"]})
    assert not result.get("failed"), result.get("msg")


# ---------------------------------------------------------------------------------------
# the lock


def test_a_second_run_is_refused_naming_the_holder(seed):
    lock = hostfs.RootLock(seed, "host_tune").acquire()
    try:
        result = run_module(sysctl_settings, {"values": SYSCTL, "root": seed})
        assert result["failed"] and "held by pid %d" % os.getpid() in result["msg"]
        assert "host_tune" in result["msg"]
    finally:
        lock.release()
    assert not os.path.exists(os.path.join(seed, "run/gpuhost-tuning.lock"))
    again = run_module(sysctl_settings, {"values": SYSCTL, "root": seed})
    assert not again.get("failed"), again.get("msg")


def test_check_mode_takes_no_lock_and_changes_nothing(seed):
    before = digest(seed)
    result = run_module(host_tune, hosts.as_wanted({"root": seed, "sysctl": SYSCTL}),
                        check_mode=True)
    assert result["changed"] is True
    assert changed(before, digest(seed)) == []


def test_lock_on_readonly_root_is_a_message(seed, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(hostfs.RootLock, "acquire", refuse)
    refused(sysctl_settings, {"values": SYSCTL, "root": seed}, "Read-only file system", seed)


def test_capture_archive_write_outside_checked(tmp_path):
    data = base64.b64encode(b"x").decode()
    dest = str(tmp_path / "c.tar.gz")
    result = run_module(host_capture, {"archive": data, "dest": dest})
    assert result["changed"] is True and open(dest, "rb").read() == b"x"


def test_procsys_fixture_untouched_by_refused_sysctl(seed):
    procsys.sysctls(seed, {"vm.swappiness": "60"})
    refused(sysctl_settings, {"root": seed, "values": {"vm.swappiness": "10", "bad key": "1"}},
            "'bad key'", seed)
    with open(os.path.join(seed, "proc/sys/vm/swappiness")) as handle:
        assert handle.read().strip() == "60"
    assert lxc  # fixture module importable (seed built container 129 from it)


# ---------------------------------------------------------------------------------------
# revert and boot_service remove only what they created


def _revert(root):
    """The revert role's changing steps, in its order."""
    sysctl = run_module(sysctl_settings, {"state": "absent", "root": root})
    service = run_module(boot_service, {"state": "absent", "root": root})
    restore = run_module(tuning_snapshot, {"state": "restore", "root": root})
    return sysctl, service, restore


def test_revert_keeps_a_folder_tune_created_that_now_holds_operator_files(tmp_path):
    root = str(tmp_path / "host")
    os.makedirs(root)
    hosts.vm_host(root)
    assert not os.path.exists(os.path.join(root, "etc/gpuhost-tuning"))
    original = digest(root)
    run_module(host_tune, hosts.as_wanted({"root": root, "sysctl": SYSCTL,
                                           "parts": ["snapshot", "sysctl", "boot_service"]}))
    notes = _write(root, "/etc/gpuhost-tuning/notes.txt", "operator notes\n")
    _sysctl, service, restore = _revert(root)
    assert service["changed"] is True
    assert service["kept"] == [{"path": "/etc/gpuhost-tuning", "reason": (
        "holds 1 file(s) boot_service did not install (/etc/gpuhost-tuning/notes.txt): kept "
        "with them; only its own files were removed")}]
    assert restore["failed"] is True
    assert ("/etc/gpuhost-tuning: holds 1 file(s) that gpuhost.tuning did not install "
            "(/etc/gpuhost-tuning/notes.txt): left in place; move them away and run the "
            "revert again") in restore["msg"]
    with open(notes) as handle:
        assert handle.read() == "operator notes\n"
    rest = [p for p in changed(original, digest(root))
            if not p.startswith("var/lib/gpuhost") and p not in ("var/lib", "var")
            and not p.startswith("proc/sys/")]
    assert rest == ["etc/gpuhost-tuning", "etc/gpuhost-tuning/notes.txt"], rest
    # once the operator moves the file away, the revert completes and leaves nothing
    os.unlink(notes)
    assert not _revert(root)[2].get("failed")
    rest = [p for p in changed(original, digest(root))
            if not p.startswith("var/lib/gpuhost") and p not in ("var/lib", "var")
            and not p.startswith("proc/sys/")]
    assert rest == [], rest


LIB = "usr/local/lib/gpuhost-tuning"


def test_boot_service_absent_removes_only_its_own_library_files(seed):
    foreign = {LIB + "/site.py": "x = 1\n", LIB + "/vendor/tool.py": "y = 2\n",
               LIB + "/ansible_collections/other/tool/x.py": "z = 3\n"}
    for rel, text in foreign.items():
        _write(seed, rel, text, 0o600)
    original = digest(seed)
    present = run_module(boot_service, {"root": seed})
    assert not present.get("failed"), present.get("msg")
    assert not [f for f in present["files"] if f["action"] == "remove"]
    assert all(original[rel] == digest(seed)[rel] for rel in foreign)
    absent = run_module(boot_service, {"state": "absent", "root": seed})
    assert absent["changed"] is True
    assert absent["kept"] == [{"path": "/" + LIB, "reason": (
        "holds 3 file(s) boot_service did not install (/%s/ansible_collections/other/tool/x.py, "
        "/%s/site.py, /%s/vendor/tool.py): kept with them; only its own files were removed"
        % (LIB, LIB, LIB))}]
    now = digest(seed)
    assert [p for p in changed(original, now) if p.startswith(LIB)] == []
    assert not os.path.exists(os.path.join(seed, "etc/systemd/system/gpuhost-tuning.service"))
    # a second absent changes nothing and still says why the folder stays
    again = run_module(boot_service, {"state": "absent", "root": seed})
    assert again["changed"] is False and again["kept"] == absent["kept"]
    assert changed(now, digest(seed)) == []


def test_boot_service_absent_removes_a_library_folder_it_created(seed):
    original = digest(seed)
    run_module(boot_service, {"root": seed})
    absent = run_module(boot_service, {"state": "absent", "root": seed})
    assert absent["changed"] is True and absent["kept"] == []
    # its own folders go; the folders above them (usr/local/lib here) are the snapshot
    # restore's to remove (it knows which existed)
    rest = [p for p in changed(original, digest(seed)) if p.startswith((LIB, "etc/gpu"))]
    assert rest == [], rest


# ---------------------------------------------------------------------------------------
# boot_service: the unit file as systemd reads it


def test_python_path_with_spaces_is_quoted_and_systemd_reads_it(seed, tmp_path):
    import shutil
    import subprocess
    import sys
    folder = tmp_path / "py env 100%"
    folder.mkdir()
    python = str(folder / "python3")
    os.symlink(sys.executable, python)
    before = digest(seed)
    result = run_module(boot_service, {"root": seed, "python": python})
    assert not result.get("failed"), result.get("msg")
    unit = os.path.join(seed, "etc/systemd/system/gpuhost-tuning.service")
    with open(unit) as handle:
        text = handle.read()
    assert ('\nExecStart="%s" -m ansible_collections.gpuhost.tuning.plugins.module_utils'
            '.engines.tune.boot_program --config /etc/gpuhost-tuning/boot.json\n'
            % python.replace("%", "%%")) in text
    assert set(changed(before, digest(seed))) >= {
        "etc/systemd/system/gpuhost-tuning.service", "etc/gpuhost-tuning/boot.json"}
    # make hostile installs systemd (HOSTILE_PKGS) before this tier runs
    assert shutil.which("systemd-analyze"), "systemd-analyze missing: apt-get install systemd"
    # systemd's own parser: an unquoted path would be "Command .../py is not executable"
    out = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True,
                         check=False)
    assert "not executable" not in out.stderr and "bad" not in out.stderr.lower(), out.stderr


@pytest.mark.parametrize("python,expect", [
    ("/usr/bin/python3 -c 'import os'", "no arguments, quotes"),
    ('/opt/py"thon', "no arguments, quotes"),
    ("/opt/py\\thon", "backslashes"),
    ("/opt/../usr/bin/python3", "'..'"),
    ("/opt/py\nExecStartPre=/bin/sh", "control"),
])
def test_python_that_is_not_a_plain_path_is_refused(shared_seed, python, expect):
    refused(boot_service, {"root": shared_seed, "python": python}, expect, shared_seed)


# ---------------------------------------------------------------------------------------
# a host with no boot loader configuration (a VM booted directly, a container)


def test_no_boot_loader_says_what_was_looked_for_and_what_to_set(tmp_path):
    # what a container's root (or a directly booted VM's) has: no loader files at all
    root = str(tmp_path / "ct")
    _write(root, "/etc/os-release", 'ID=debian\nVERSION_ID="12"\n')
    _write(root, "/proc/cmdline", "console=ttyS0 root=/dev/vda rw\n")
    result = refused(kernel_cmdline, {"root": root, "params": {"nmi_watchdog": "0"}},
                     "no boot loader configuration under %s: looked for /etc/kernel/cmdline"
                     % root, root)
    for text in ("/etc/kernel/proxmox-boot-uuids (proxmox-boot-tool)",
                 "/etc/default/grub or /etc/default/grub.d/*.cfg (GRUB)",
                 "kernel_cmdline option backend=systemd-boot or backend=grub",
                 "gpuhost_boot_config_backend"):
        assert text in result["msg"], result["msg"]
    assert "is GRUB installed" not in result["msg"]
