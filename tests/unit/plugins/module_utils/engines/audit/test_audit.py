"""The audit on whole hosts: the seed host, the tuned host, a VM, odd trees."""

import io
import os
import shutil
import tarfile

import pytest
from fixtures import cpu, dkms, hosts, pci, procsys
from fixtures import lxc as lxcfix

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import audit_pcie

WANTED = hosts.common_wanted(host="pve-gpu01")


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed")
    built = hosts.seed_host(root)
    return built, audit.audit(str(root), WANTED)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    root = tmp_path_factory.mktemp("tuned")
    built = hosts.tuned_host(root)
    return built, audit.audit(str(root), WANTED)


def by_id(result, fid):
    return [f for f in result["findings"] if f["id"] == fid]


# --- the seed host: every problem of the scenario, with the right id, subject, severity


def test_seed_mrrs_on_every_gpu_and_root_port(seed):
    built, result = seed
    mrrs = by_id(result, "pcie_mrrs")
    assert len(mrrs) == 16
    assert {f["subject"] for f in mrrs} == set(built["gpus"]) | set(built["root_ports"])
    assert all(f["severity"] == "high" for f in mrrs)
    assert all(f["current"] == "512 bytes" and f["expected"] == "4096 bytes" for f in mrrs)
    # the NVMe's root port also reads 512 but sits above no GPU: not this audit's business
    assert built["nvme_root_port"] not in {f["subject"] for f in mrrs}
    # remedy writes bits 14:12 only, and names the playbook that persists it
    first = [f for f in mrrs if f["subject"] == "0000:01:00.0"][0]
    assert "setpci -s 0000:01:00.0 CAP_EXP+8.w=5000:7000" in first["remedy"]
    assert "gpuhost.tuning.tune -l pve-gpu01" in first["remedy"]


def test_seed_dkms_gap_is_critical_and_first(seed):
    _built, result = seed
    first = result["findings"][0]
    assert first["id"] == "dkms_missing_for_kernel"
    assert first["severity"] == "critical"
    assert first["subject"] == "6.14.11-5-bpo12-pve"
    assert "nvidia/590.48.01" in first["current"]
    assert "apt-get install proxmox-headers-6.14.11-5-bpo12-pve" in first["remedy"]
    assert "dkms install nvidia/590.48.01 -k 6.14.11-5-bpo12-pve" in first["remedy"]
    assert len(by_id(result, "dkms_missing_for_kernel")) == 1
    # MRRS ranks first among the high findings (the fixed order)
    assert result["findings"][1]["id"] == "pcie_mrrs"


def test_seed_cpu_findings(seed):
    _built, result = seed
    (numa,) = by_id(result, "numa_balancing")
    assert (numa["severity"], numa["subject"], numa["current"], numa["expected"]) == (
        "high", "kernel.numa_balancing", "1", "0")
    (c2,) = by_id(result, "cpuidle_deep_state")
    assert c2["subject"] == "C2" and c2["severity"] == "high"
    assert "128 of 128 CPUs" in c2["current"]
    (freq,) = by_id(result, "cpufreq_driver")
    assert freq["current"] == "acpi-cpufreq" and freq["reboot_required"] is True
    assert "amd_pstate=active" in freq["remedy"]


def test_seed_sysctls_one_finding_per_key(seed):
    _built, result = seed
    found = {f["subject"]: f for f in by_id(result, "sysctl")}
    assert set(found) == set(WANTED["sysctl"]) - {"kernel.numa_balancing"}
    assert found["net.core.rmem_max"]["current"] == "212992"
    assert found["net.core.rmem_max"]["severity"] == "medium"
    assert found["kernel.nmi_watchdog"]["severity"] == "medium"
    assert found["vm.swappiness"]["severity"] == "low"
    assert "sysctl -w vm.swappiness=10" in found["vm.swappiness"]["remedy"]


def test_seed_kernel_headers_reboot(seed):
    _built, result = seed
    (headers,) = by_id(result, "kernel_headers_missing")
    assert headers["subject"] == "6.14.11-5-bpo12-pve" and headers["severity"] == "high"
    assert headers["remedy"] == "apt-get install proxmox-headers-6.14.11-5-bpo12-pve"
    reboot = by_id(result, "reboot_pending")
    assert [(f["subject"], f["current"], f["expected"]) for f in reboot] == [
        ("kernel", "6.8.12-9-pve", "6.14.11-5-bpo12-pve")]
    kern = result["kernel"]
    assert kern["running"] == "6.8.12-9-pve" and kern["next_boot"] == "6.14.11-5-bpo12-pve"
    assert kern["headers"] == {"6.8.12-9-pve": True, "6.14.11-5-bpo12-pve": False}
    assert kern["boot_tool"] == "proxmox-boot-tool"
    assert kern["configured_cmdline"] == "root=ZFS=rpool/ROOT/pve-1 boot=zfs"
    assert {f["subject"] for f in by_id(result, "boot_param")} == {
        "amd_pstate", "processor.max_cstate", "nmi_watchdog"}


def test_seed_lxc_stale_majors(seed):
    _built, result = seed
    (stale,) = by_id(result, "lxc_stale_majors")
    assert "129" in stale["subject"] and stale["severity"] == "high"
    assert "504" in stale["current"] and "507" in stale["current"]
    assert "pct stop 129" in stale["remedy"]
    ct = [c for c in result["lxc"] if c["vmid"] == 129][0]
    assert ct["stale_majors"] == [504, 507]
    assert ct["onboot"] is False and ct["gpu"] is True
    assert {m["driver"] for m in ct["missing_majors"]} == {"nvidia-uvm", "nvidia-caps"}
    assert [f["subject"] for f in by_id(result, "lxc_onboot")] == ["lxc 129"]
    # container 130 allows no GPU majors and starts on boot: nothing about it
    assert not [f for f in result["findings"] if f["subject"] == "lxc 130"]


def test_seed_nvidia(seed):
    _built, result = seed
    (hmm,) = by_id(result, "nvidia_uvm_hmm")
    assert hmm["subject"] == "nvidia_uvm" and hmm["current"] == "uvm_disable_hmm=N"
    (peer,) = by_id(result, "nvidia_peermem_unavailable")
    assert peer["severity"] == "info"
    nv = result["nvidia"]
    assert nv["driver_version"] == "590.48.01"
    assert nv["ib_core"] == {"loaded": False, "available": False}
    assert nv["nvidia_peermem"] == {"loaded": False, "available": True}
    assert result["char_devices"]["nvidia-uvm"] == 509
    assert all(isinstance(v, int) for v in result["char_devices"].values())


def test_seed_facts_schema(seed):
    built, result = seed
    assert [g["address"] for g in result["gpus"]] == built["gpus"]
    gpu = result["gpus"][0]
    assert gpu["vendor"] == "10de" and gpu["class"] == "030200" and gpu["driver"] == "nvidia"
    assert gpu["max_read_request_size"] == 512 and gpu["max_payload_size"] == 256
    assert gpu["link"] == {"speed_gts": 32.0, "width": 16, "max_speed_gts": 32.0,
                           "max_width": 16}
    assert isinstance(gpu["link"]["speed_gts"], float)
    assert [b["address"] for b in gpu["upstream"]] == built["upstream"][gpu["address"]]
    assert gpu["upstream"][0]["driver"] == "pcieport"
    assert result["gpus"][4]["numa_node"] == 1
    assert result["dkms"] == [{"name": "nvidia", "version": "590.48.01",
                               "kernel": "6.8.12-9-pve", "arch": "x86_64",
                               "state": "installed", "warning": None}]
    states = {s["name"]: s for s in result["cpu"]["cpuidle"]["states"]}
    assert states["C2"]["cpus"] == 128 and states["C2"]["cpus_disabled"] == 0
    assert result["sysctl"]["values"]["kernel.numa_balancing"] == "1"
    assert result["sysctl"]["transparent_hugepage"] == {"enabled": "madvise",
                                                        "defrag": "madvise"}
    assert result["errors"] == []
    assert not by_id(result, "pcie_link_degraded") and not by_id(result, "audit_error")


def test_findings_sorted_worst_first(seed):
    _built, result = seed
    ranks = [audit.SEVERITY_RANK[f["severity"]] for f in result["findings"]]
    assert ranks == sorted(ranks)
    for f in result["findings"]:
        assert set(f) >= {"id", "severity", "subject", "current", "expected", "remedy",
                          "reboot_required"}
        assert f["severity"] in audit.SEVERITIES and f["remedy"]


def test_seed_checks_matrix(seed):
    _built, result = seed
    status = {k: v["status"] for k, v in result["checks"].items()}
    assert status["dkms"] == "critical"
    assert status["pcie_mrrs"] == "high" and status["pcie_link"] == "ok"
    assert status["lxc"] == "high" and status["nvidia"] == "medium"


# --- the tuned host and the VM


def test_tuned_host_has_nothing_high(tuned):
    _built, result = tuned
    assert not [f for f in result["findings"] if f["severity"] in ("critical", "high")]
    assert [f["id"] for f in result["findings"]] == ["nvidia_peermem_unavailable"]
    assert result["errors"] == []


def test_vm_host_audits_without_error(tmp_path):
    built = hosts.vm_host(tmp_path)
    result = audit.audit(str(tmp_path), WANTED)
    assert result["errors"] == []
    (gpu,) = result["gpus"]
    assert gpu["address"] == built["gpu"] and gpu["upstream"] == [] and gpu["on_host_bridge"]
    assert gpu["max_read_request_size"] == 4096
    assert result["cpu"]["cpuidle"]["driver"] is None and result["cpu"]["cpufreq"]["driver"] is None
    assert result["kernel"]["boot_tool"] == "grub"
    assert result["nvidia"]["driver_version"] == "580.159.04"
    ids = {f["id"] for f in result["findings"]}
    assert not ids & {"pcie_mrrs", "cpuidle_deep_state", "cpufreq_driver", "numa_balancing",
                      "dkms_missing_for_kernel", "lxc_stale_majors", "audit_error"}
    # CPU-specific boot parameters make no sense in a guest; nmi_watchdog=0 does
    assert {f["subject"] for f in result["findings"] if f["id"] == "boot_param"} == {
        "nmi_watchdog"}
    checks = result["checks"]
    assert checks["cpuidle"]["status"] == "n/a" and checks["cpufreq"]["status"] == "n/a"
    assert checks["lxc"]["status"] == "n/a" and checks["numa_balancing"]["status"] == "n/a"


def test_empty_root_is_all_absent_facts(tmp_path):
    result = audit.audit(str(tmp_path), WANTED)
    # /proc/devices unread: said, never a clean bill for the containers
    assert [e["section"] for e in result["errors"]] == ["char_devices", "lxc"]
    assert "proc/devices is missing" in result["errors"][0]["error"]
    assert result["gpus"] == [] and result["dkms"] == [] and result["lxc"] == []
    assert result["kernel"]["running"] is None
    assert [f["id"] for f in result["findings"]] == ["audit_error", "audit_error"]


def test_audit_reads_only(tmp_path, snapshot_tree):
    hosts.seed_host(tmp_path)
    before = snapshot_tree(str(tmp_path))
    audit.audit(str(tmp_path), WANTED)
    builder, _result, _recorded = host_capture.capture(str(tmp_path), WANTED)
    builder.write(io.BytesIO())
    assert snapshot_tree(str(tmp_path)) == before


# --- edge cases that real hosts have


def _gpu_tree(root):
    built = pci.seed_gpus(root, mrrs=4096)
    return built


def test_link_degraded_is_high(tmp_path):
    built = _gpu_tree(tmp_path)
    pci.degrade_link(tmp_path, built["gpus"][2], speed=16.0, width=8)
    result = audit.audit(str(tmp_path), WANTED)
    (link,) = by_id(result, "pcie_link_degraded")
    assert link["subject"] == built["gpus"][2] and link["severity"] == "high"
    assert "x8 of x16" in link["current"] and "16 of 32 GT/s" in link["current"]


def test_idle_gpu_at_gen1_speed_is_low(tmp_path):
    built = _gpu_tree(tmp_path)
    pci.degrade_link(tmp_path, built["gpus"][0], speed=2.5, width=16)
    result = audit.audit(str(tmp_path), WANTED)
    (link,) = by_id(result, "pcie_link_degraded")
    assert link["severity"] == "low" and "idle" in link["remedy"]


def test_unreadable_config_space_is_info_not_crash(tmp_path):
    built = _gpu_tree(tmp_path)
    path = os.path.join(pci.device_dir(tmp_path, built["gpus"][0]), "config")
    with open(path, "rb") as handle:
        data = handle.read(64)
    with open(path, "wb") as handle:  # what a non-root reader gets
        handle.write(data)
    lxcfix.proc_devices(tmp_path, "after")
    result = audit.audit(str(tmp_path), WANTED)
    (item,) = by_id(result, "pcie_unreadable")
    assert item["subject"] == built["gpus"][0] and item["severity"] == "info"
    assert result["gpus"][0]["max_read_request_size"] is None
    assert len(result["gpus"]) == 8 and result["errors"] == []


def test_larger_socket_buffers_are_fine(tmp_path):
    procsys.sysctls(tmp_path, {"net.core.rmem_max": "67108864", "net.core.wmem_max": "1048576"})
    result = audit.audit(str(tmp_path), WANTED)
    assert [f["subject"] for f in by_id(result, "sysctl")] == ["net.core.wmem_max"]


def test_pinned_running_kernel_means_no_dkms_gap(tmp_path):
    dkms.seed(tmp_path)
    os.makedirs(tmp_path / "etc/kernel", exist_ok=True)
    (tmp_path / "etc/kernel/proxmox-boot-pin").write_text("6.8.12-9-pve\n")
    result = audit.audit(str(tmp_path), WANTED)
    assert result["kernel"]["next_boot"] == "6.8.12-9-pve"
    assert not by_id(result, "dkms_missing_for_kernel") and not by_id(result, "reboot_pending")


def test_c2_disabled_on_some_cpus_still_found(tmp_path):
    cpu.epyc_cpus(tmp_path, threads=8, c2_disabled=[0, 1, 2, 3, 4, 5])
    result = audit.audit(str(tmp_path), WANTED)
    (c2,) = by_id(result, "cpuidle_deep_state")
    assert "2 of 8 CPUs" in c2["current"] and "6-7" in c2["detail"]


def test_a_failing_reader_is_an_audit_error_not_a_crash(tmp_path, monkeypatch):
    hosts.vm_host(tmp_path)

    def broken(*_args, **_kwargs):
        raise RuntimeError("simulated reader bug")

    monkeypatch.setattr(audit_pcie.pci, "select_devices", broken)
    result = audit.audit(str(tmp_path), WANTED)
    errs = dict((e["subject"], e) for e in by_id(result, "audit_error"))
    assert "simulated reader bug" in errs["gpus"]["current"]
    # every reader that selects the GPUs fails on its own; nothing else does
    assert sorted(errs) == ["gpus", "p2p", "pcie_aer"]
    assert result["kernel"]["running"] == hosts.VM_KERNEL  # the rest was still read


def test_severity_gate():
    assert audit.severity_at_least("critical", "high")
    assert audit.severity_at_least("high", "high")
    assert not audit.severity_at_least("medium", "high")
    assert not audit.severity_at_least("critical", "none")


def test_text_lines_group_same_findings(seed):
    _built, result = seed
    lines = audit.text_lines(result["findings"])
    mrrs = [line for line in lines if " pcie_mrrs" in line]
    assert len(mrrs) == 1 and "x16" in mrrs[0] and 'setpci -s "$s"' in mrrs[0]
    assert lines[0].startswith("CRITICAL dkms_missing_for_kernel")
    assert audit.headline(result["findings"]).startswith("worst critical: 1 critical, ")


# --- capture: what the audit read, packed, audits the same elsewhere


def _comparable(result):
    return dict((k, v) for k, v in result.items()
                if k not in ("collected_at", "duration_s", "root"))


def test_capture_roundtrip_gives_the_same_audit(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    hosts.seed_host(src)
    builder, original, recorded = host_capture.capture(str(src), WANTED)
    buf = io.BytesIO()
    builder.write(buf, "{}")
    dest = tmp_path / "unpacked"
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        tar.extractall(dest, filter="tar")
    # links kept as links, the PCI config space whole
    assert members["sys/bus/pci/devices/0000:01:00.0"].issym()
    cfg = [n for n in members if n.endswith("/0000:01:00.0/config")]
    assert cfg and members[cfg[0]].size == 4096
    assert members[cfg[0].rsplit("/", 1)[0] + "/driver"].issym()
    assert "/proc/sys/kernel/numa_balancing" in recorded
    again = audit.audit(str(dest), WANTED)
    assert _comparable(again) == _comparable(original)
    # and much smaller than the tree: only what the audit read
    assert len(members) < sum(len(files) + len(dirs) for _p, dirs, files in os.walk(src))


def test_grub_saved_entry_decides_the_next_kernel(tmp_path):
    from fixtures import boot, bootloader
    old, new = "6.1.0-56-amd64", "6.1.0-58-amd64"
    dkms.kernel_tree(tmp_path, old, headers=True)
    dkms.kernel_tree(tmp_path, new, headers=True)
    dkms.dkms_tree(tmp_path, "nvidia", "580.159.04", installed=[old])
    dkms.proc_running(tmp_path, old)
    boot.debian_grub(tmp_path)
    bootloader.grub_cfg(tmp_path, [old, new], default="saved")
    result = audit.audit(str(tmp_path), WANTED)
    # GRUB_DEFAULT=saved without a saved entry boots the first entry: the newest kernel
    assert result["kernel"]["next_boot"] == new
    assert [f["subject"] for f in by_id(result, "dkms_missing_for_kernel")] == [new]
    bootloader.grubenv(tmp_path, saved_entry="Advanced options for Debian GNU/Linux>"
                                             "Debian GNU/Linux, with Linux %s" % old)
    result = audit.audit(str(tmp_path), WANTED)
    assert result["kernel"]["next_boot"] == old
    assert "boot loader" in result["kernel"]["next_boot_source"]
    assert not by_id(result, "dkms_missing_for_kernel")


# --- the DKMS gap when the running kernel has no DKMS module of its own


def _two_kernels_outside(root, running="6.12.57+deb13-amd64", installed_for=(hosts.SEED_RUNNING,)):
    """A Proxmox tree audited from a container or a capture: the running kernel is the
    outer host's (not installed here, no DKMS build); nvidia installed for the old kernel,
    the new one installed without headers and without the build."""
    dkms.kernel_tree(root, hosts.SEED_RUNNING, headers=True)
    dkms.kernel_tree(root, hosts.SEED_NEW, headers=False)
    dkms.dkms_tree(root, "nvidia", hosts.SEED_NVIDIA, installed=list(installed_for))
    dkms.proc_running(root, running)


def test_dkms_gap_found_when_running_kernel_is_from_outside(tmp_path):
    _two_kernels_outside(tmp_path)
    result = audit.audit(str(tmp_path), WANTED)
    assert result["kernel"]["running_installed"] is False
    (gap,) = by_id(result, "dkms_missing_for_kernel")
    assert gap["severity"] == "critical" and gap["subject"] == hosts.SEED_NEW
    # how it reads: which kernel stood in for the running one, and that it has none
    assert gap["current"] == (
        "nvidia/590.48.01 not built (headers missing); installed for 6.8.12-9-pve (the "
        "running kernel 6.12.57+deb13-amd64 has no DKMS module)")
    assert "dkms install nvidia/590.48.01 -k 6.14.11-5-bpo12-pve" in gap["remedy"]
    assert "apt-get install proxmox-headers-6.14.11-5-bpo12-pve" in gap["remedy"]
    assert "running kernel 6.12.57+deb13-amd64 has no DKMS module" in gap["detail"]
    assert "installed for 6.8.12-9-pve, not for 6.14.11-5-bpo12-pve" in gap["detail"]
    assert result["checks"]["dkms"]["status"] == "critical"


def test_dkms_gap_fallback_takes_the_newest_kernels_version(tmp_path):
    old = "6.5.13-6-pve"
    dkms.kernel_tree(tmp_path, old, headers=True)
    dkms.kernel_tree(tmp_path, hosts.SEED_RUNNING, headers=True)
    dkms.kernel_tree(tmp_path, hosts.SEED_NEW, headers=True)
    dkms.dkms_tree(tmp_path, "nvidia", "550.144.03", installed=[old])
    dkms.dkms_tree(tmp_path, "nvidia", hosts.SEED_NVIDIA, installed=[hosts.SEED_RUNNING])
    dkms.proc_running(tmp_path, "6.12.57+deb13-amd64")
    (gap,) = by_id(audit.audit(str(tmp_path), WANTED), "dkms_missing_for_kernel")
    assert gap["current"].startswith("nvidia/590.48.01 not built (headers present); "
                                     "installed for 6.8.12-9-pve")
    assert "dkms install nvidia/590.48.01 -k 6.14.11-5-bpo12-pve" in gap["remedy"]
    assert "apt-get install" not in gap["remedy"]


def test_dkms_fallback_finds_nothing_when_next_kernel_has_the_module(tmp_path):
    _two_kernels_outside(tmp_path, installed_for=(hosts.SEED_RUNNING, hosts.SEED_NEW))
    result = audit.audit(str(tmp_path), WANTED)
    assert not by_id(result, "dkms_missing_for_kernel")
    assert result["checks"]["dkms"]["status"] == "ok"


def test_running_kernel_with_its_own_module_reads_as_before(seed):
    _built, result = seed
    (gap,) = by_id(result, "dkms_missing_for_kernel")
    assert gap["current"] == "nvidia/590.48.01 not built (headers missing)"
    assert gap["detail"].startswith("6.8.12-9-pve runs with nvidia 590.48.01; booting "
                                    "6.14.11-5-bpo12-pve leaves")


# --- uvm_disable_hmm: the remedy is the boot configuration, not tune


def test_uvm_hmm_remedy_is_modprobe_initramfs_and_reboot_verify(seed):
    _built, result = seed
    (hmm,) = by_id(result, "nvidia_uvm_hmm")
    remedy = hmm["remedy"]
    assert "gpuhost.tuning.tune" not in remedy
    assert ("echo 'options nvidia_uvm uvm_disable_hmm=1' > "
            "/etc/modprobe.d/gpuhost-nvidia-uvm.conf") in remedy
    # every kernel that may boot carries the option, the new one included
    assert ("update-initramfs -u -k 6.8.12-9-pve && update-initramfs -u -k "
            "6.14.11-5-bpo12-pve, then reboot") in remedy
    assert "ansible-playbook gpuhost.tuning.reboot_verify -l pve-gpu01 (role boot_config" in remedy
    assert "-e gpuhost_reboot_verify_reboot=true" in remedy
    assert hmm["reboot_required"] is True


def test_uvm_hmm_not_loaded_not_configured_same_remedy(tmp_path):
    hosts.vm_host(tmp_path)
    shutil.rmtree(str(tmp_path / "sys/module/nvidia_uvm"))
    modules = (tmp_path / "proc/modules").read_text().splitlines()
    (tmp_path / "proc/modules").write_text(
        "".join(line + "\n" for line in modules if not line.startswith("nvidia_uvm ")))
    result = audit.audit(str(tmp_path), WANTED)
    (hmm,) = by_id(result, "nvidia_uvm_hmm")
    assert hmm["subject"] == "modprobe.d"
    assert "update-initramfs -u -k 6.1.0-56-amd64, then reboot" in hmm["remedy"]
    assert "gpuhost.tuning.reboot_verify" in hmm["remedy"]
    assert "gpuhost.tuning.tune" not in hmm["remedy"]


# --- boot parameters given as YAML booleans read as kernel_cmdline writes them


def test_boot_param_false_means_off_and_null_means_absent(tmp_path):
    from fixtures import boot
    boot.proxmox_systemd_boot(tmp_path, cmdline=hosts.PVE_CMDLINE + " mitigations=off quiet")
    wanted = dict(WANTED, boot_params={"mitigations": False, "quiet": None, "pti": False})
    result = audit.audit(str(tmp_path), wanted)
    found = {f["subject"]: f for f in by_id(result, "boot_param")}
    # mitigations=off is there: no finding; pti=off is not; quiet must go
    assert set(found) == {"pti", "quiet"}
    assert (found["pti"]["current"], found["pti"]["expected"]) == ("absent", "pti=off")
    assert (found["quiet"]["current"], found["quiet"]["expected"]) == ("quiet", "absent")
    assert "removes it from" in found["quiet"]["remedy"]


def test_nvidia_not_loaded_fixed_major_is_not_stale(tmp_path):
    # Audited before nvidia loads (or where it failed to load): /proc/devices has no 195,
    # yet 195 is NVIDIA's fixed major. Calling it stale would tell the user to remove the
    # container's GPU access; the repair keeps it, so must the audit.
    from fixtures import lxc

    lxc.seed_host(tmp_path, era="after", config_era="after")
    lxc.proc_devices(tmp_path, "after", without=("nvidia-frontend",))
    result = audit.audit(str(tmp_path), WANTED)
    ct = [c for c in result["lxc"] if c["vmid"] == 129][0]
    assert 195 in ct["allowed_majors"]
    assert ct["stale_majors"] == []
    assert not by_id(result, "lxc_stale_majors")


def test_char_majors_keeps_both_majors_of_a_name_registered_twice(tmp_path):
    # The seed's literal reading after the upgrade: nvidia-caps at 237 and 238. reboot_verify
    # takes the GPU drivers' majors before the reboot from char_majors: both must be there,
    # or a stale rule for the second survives the container repair.
    from fixtures import lxc

    lxc.seed_host(tmp_path, era="after", config_era="after")
    lxc.proc_devices(tmp_path, "after", caps_twice=True)
    result = audit.audit(str(tmp_path), WANTED)
    assert sorted(result["char_majors"]["nvidia-caps"]) == [237, 238]
    assert result["char_devices"]["nvidia-caps"] in (237, 238)  # the first, as documented
    assert result["char_majors"]["nvidia-uvm"] == [509]
