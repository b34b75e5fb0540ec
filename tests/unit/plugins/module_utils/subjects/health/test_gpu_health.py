"""GPU health (gpuhealth, nvsmi, kernlog, xid): nvidia-smi XML, kernel-log XID/SXID lines,
the findings of a whole log, container user space for fleet drift; the live path (one
nvidia-smi, one journal read) through the doubles in tests/doubles, everything else from
trees. The findings of one check each are in checks/test_<check>.py."""

import gzip
import io
import json
import os
import subprocess
import tarfile
import time

import pytest
from fixtures import nvhealth as health
from fixtures import pci

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import check_registry
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import container_driver
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import (
    gpu_health,
    kernel_log,
    nvsmi,
    xid,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_drift
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from auditcase import health_facts
from conftest import TESTS

DOUBLES = os.path.join(TESTS, "doubles")


COLUMNS = ("gpu_xid", "gpu_memory", "gpu_state", "fabric_manager")
HEALTH_IDS = set(item.id for col in check_registry.columns() if col.key in COLUMNS
                 for item in col.checks)


def audit_health(root, driver="580.159.04", window_days=7):
    """The GPU health facts of ``root`` and the findings of the GPU health columns (the
    registry's checks, each column only where it applies)."""
    outputs = cmdout.CommandOutputs(str(root))
    facts = health_facts(root, outputs, driver, window_days)
    found = []
    wanted = {"host": "gpu07"}
    for col in check_registry.columns():
        if col.key in COLUMNS and col.not_applicable(facts, wanted) is None:
            for item in col.checks:
                found.extend(item.run(facts, wanted))
    return facts, found, outputs


def ids(found):
    return sorted((f["id"], f["subject"], f["severity"]) for f in found)


# ----------------------------------------------------------------------------- nvidia-smi


def test_old_driver_layout_reads_every_field():
    parsed = nvsmi.parse(health.read(health.OLD_470))
    assert parsed["driver_version"] == "470.141.03"
    gpu = parsed["gpus"][0]
    assert gpu["address"] == "0000:3b:00.0"
    assert gpu["persistence_mode"] is False
    assert (gpu["ecc_mode"], gpu["ecc_mode_pending"]) == ("Enabled", "Disabled")
    assert (gpu["ecc_volatile_uncorrectable"], gpu["ecc_aggregate_uncorrectable"]) == (1, 2)
    assert (gpu["ecc_volatile_correctable"], gpu["ecc_aggregate_correctable"]) == (3, 17)
    assert gpu["retired_pages_pending"] is None and gpu["retired_pages_dbe"] is None
    assert gpu["remapped_rows_uncorrectable"] == 2 and gpu["remapped_rows_pending"] is False
    assert gpu["clock_reasons_active"] == ["hw_thermal_slowdown"]
    assert gpu["power"]["limit_w"] == 200.0 and gpu["power"]["default_limit_w"] == 250.0
    assert gpu["vbios"] == "92.00.25.00.08"


def test_current_layout_reads_every_field():
    gpu = nvsmi.parse(health.read(health.B200_580))["gpus"][0]
    assert gpu["address"] == "0000:1b:00.0"
    assert gpu["persistence_mode"] is True
    assert gpu["ecc_volatile_uncorrectable"] == 0 and gpu["ecc_aggregate_uncorrectable"] == 0
    assert gpu["clock_reasons_active"] == ["gpu_idle"]
    assert gpu["power"]["limit_w"] == 1000.0 and gpu["power"]["default_limit_w"] == 1000.0
    assert (gpu["fabric_state"], gpu["fabric_status"]) == ("Completed", "Success")
    assert gpu["sram_threshold_exceeded"] is False


def test_na_and_missing_elements_are_unknown_not_errors():
    text = ('<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>N/A</driver_version>'
            '<gpu id="00000000:00:06.0"><persistence_mode>N/A</persistence_mode>'
            '<ecc_mode><current_ecc>N/A</current_ecc><pending_ecc>N/A</pending_ecc></ecc_mode>'
            '<ecc_errors><volatile><dram_uncorrectable>N/A</dram_uncorrectable></volatile>'
            '</ecc_errors><remapped_rows>N/A</remapped_rows>'
            '<gpu_power_readings><current_power_limit>N/A</current_power_limit>'
            '</gpu_power_readings></gpu></nvidia_smi_log>')
    parsed = nvsmi.parse(text)
    gpu = parsed["gpus"][0]
    assert parsed["driver_version"] is None
    assert gpu["persistence_mode"] is None and gpu["ecc_volatile_uncorrectable"] is None
    assert gpu["remapped_rows_pending"] is None and gpu["power"]["limit_w"] is None
    facts = {"nvidia_smi": {"available": True, "gpus": parsed["gpus"]}}
    found = [f for col in check_registry.columns() if col.key in ("gpu_memory", "gpu_state")
             for item in col.checks for f in item.run(facts, {})]
    assert found == []


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "not XML"),
    ("<?xml version=\"1.0\" ?><other/>", "<other>"),
])
def test_not_a_log_is_a_clear_error(text, message):
    with pytest.raises(nvsmi.NvsmiError, match=message):
        nvsmi.parse(text)


@pytest.mark.parametrize("text, want", [
    ("00000000:00:06.0", "0000:00:06.0"), ("00000000:9B:00.0", "0000:9b:00.0"),
    ("0000:01:00.0", "0000:01:00.0"), ("01:00.0", "0000:01:00.0"), ("N/A", None)])
def test_bus_ids_normalise_to_sysfs_form(text, want):
    assert nvsmi.normalize_bus_id(text) == want


def test_old_driver_findings_are_exactly_its_problems(tmp_path):
    health.write_smi(tmp_path, health.read(health.OLD_470))
    _facts, found, _outputs = audit_health(tmp_path)
    assert ids(found) == [
        ("gpu_clock_throttle", "0000:3b:00.0", "high"),
        ("gpu_ecc_pending", "0000:3b:00.0", "medium"),
        ("gpu_ecc_uncorrectable", "0000:3b:00.0", "high"),
        ("gpu_persistence_off", "0000:3b:00.0", "medium"),
        ("gpu_power_capped", "0000:3b:00.0", "medium"),
    ]
    pending = [f for f in found if f["id"] == "gpu_ecc_pending"][0]
    assert pending["reboot_required"] and "nvidia-smi -e 1 -i 0000:3b:00.0" in pending["remedy"]
    capped = [f for f in found if f["id"] == "gpu_power_capped"][0]
    assert capped["current"] == "power limit 200 W" and "nvidia-smi -pl 250" in capped["remedy"]


def test_healthy_current_layout_has_no_findings(tmp_path):
    health.write_smi(tmp_path, health.read(health.B200_580))
    facts, found, _outputs = audit_health(tmp_path)
    assert facts["nvidia_smi"]["available"] and found == []


def test_missing_output_is_unavailable_with_the_reason(tmp_path):
    facts, found, _outputs = audit_health(tmp_path)
    assert facts["nvidia_smi"]["available"] is False
    assert "no /.gpuhost-capture/nvidia-smi-q-x.xml" in facts["nvidia_smi"]["error"]
    assert gpu_health.smi_applies(facts).startswith("no nvidia-smi data")
    assert found == []
    assert found == []


def _live_env(monkeypatch, xml_path=None, smi_rc=0, journal=None, journal_rc=0, log=None):
    monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ["PATH"])
    if xml_path:
        monkeypatch.setenv("GPUHOST_NVSMI_XML", xml_path)
    monkeypatch.setenv("GPUHOST_NVSMI_RC", str(smi_rc))
    if journal:
        monkeypatch.setenv("GPUHOST_JOURNAL_TEXT", journal)
    monkeypatch.setenv("GPUHOST_JOURNAL_RC", str(journal_rc))
    if log:
        monkeypatch.setenv("GPUHOST_DOUBLES_LOG", log)


def test_live_root_runs_nvidia_smi_and_journal_once_each(tmp_path, monkeypatch):
    now = time.time()
    journal = tmp_path / "journal.txt"
    journal.write_text(health.xid_line(now - 600, "0000:1b:00.0", 79) + "\n")
    calls = tmp_path / "calls.jsonl"
    _live_env(monkeypatch, health.B200_580, journal=str(journal), log=str(calls))
    outputs = cmdout.CommandOutputs("/", Runner(processes=subprocess))
    smi = nvsmi.facts(outputs)
    again = nvsmi.facts(outputs)
    log = kernel_log.facts(outputs, 7)
    kernel_log.facts(outputs, 7)
    assert smi["available"] and smi["source"] == "command" and again["gpus"] == smi["gpus"]
    assert smi["seconds"] is not None
    assert log["source"] == "journal" and log["devices"][0]["codes"][0]["code"] == 79
    tools = [line.split('"')[3] for line in calls.read_text().splitlines()]
    assert tools == ["nvidia-smi", "journalctl"]
    stored = outputs.captured()
    assert sorted(stored) == ["/.gpuhost-capture/kernel-log.txt",
                              "/.gpuhost-capture/nvidia-smi-q-x.xml"]
    assert stored["/.gpuhost-capture/kernel-log.txt"].startswith(b"# gpuhost kernel log:")


def test_live_nvidia_smi_failure_is_reported(tmp_path, monkeypatch):
    _live_env(monkeypatch, health.B200_580, smi_rc=9, journal_rc=1)
    outputs = cmdout.CommandOutputs("/", Runner(processes=subprocess))
    smi = nvsmi.facts(outputs)
    assert smi["available"] is False
    assert "exited 9" in smi["error"] and "couldn't communicate" in smi["error"]


def test_an_empty_journal_is_no_kernel_log(tmp_path, monkeypatch):
    journal = tmp_path / "journal.txt"
    journal.write_text("")
    _live_env(monkeypatch, health.B200_580, journal=str(journal))
    monkeypatch.setattr(kernel_log, "KERN_LOG_DIR", str(tmp_path / "no-such-folder"))
    log = kernel_log.facts(cmdout.CommandOutputs("/", Runner(processes=subprocess)), 7)
    assert log["available"] is False
    assert "the journal holds no kernel message of the last 7 days" in log["error"]


def test_not_live_root_never_runs_a_command(tmp_path, monkeypatch):
    calls = tmp_path / "calls.jsonl"
    _live_env(monkeypatch, health.B200_580, journal=str(tmp_path / "none"), log=str(calls))
    audit_health(tmp_path / "tree")
    assert not calls.exists()


# ----------------------------------------------------------------------------- kernel log


REAL_LINES = [
    # (line, code, address, class)
    ("2026-11-30T12:00:01.418223+00:00 pve kernel: NVRM: Xid (PCI:0000:2b:00): 79, "
     "GPU has fallen off the bus.", 79, "0000:2b:00.0", "reboot"),
    ("Nov 30 12:00:01 pve kernel: [  812.345678] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, "
     "Row Remapper: New row marked for remapping, reset gpu to activate.", 63, "0000:10:1c.0",
     "none"),
    ("[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, "
     "name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected "
     "function 103 (GSP_RM_ALLOC) (0x2081 0x4).", 119, "0000:9b:00.0", "reset_gpu"),
    ("[171167.621162] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 "
     "(None) to 0x2 (Node Reboot Required)", 154, "0009:01:00.0", "reboot"),
    ("[171168.537473] NVRM: Xid (PCI:0018:01:00): 154, GPU recovery action changed from 0x4 "
     "(Drain and Reset) to 0x1 (GPU Reset Required)", 154, "0018:01:00.0", "reset_gpu"),
    ("[  123.1] NVRM: Xid (0000:03:00): 13, Graphics Exception: ESR 0x405840=0x0",
     13, "0000:03:00.0", "restart_app"),
    ("2026-11-30T12:00:01+0000 pve kernel: NVRM: Xid (PCI:0000:ca:00): 94, pid=41211, "
     "name=python3, Ch 00000008", 94, "0000:ca:00.0", "restart_app"),
    ("2026-11-30T12:00:01+0000 pve kernel: NVRM: Xid (PCI:0000:ca:00): 999, new", 999,
     "0000:ca:00.0", "unknown"),
    ("2026-11-30T12:00:01.5+00:00 dgx kernel: nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, "
     "Non-fatal, Link 32 egress non-posted PRIV error (First)", 12028, "0000:05:00.0", "none"),
    ("2026-11-30T12:00:01.5+00:00 dgx kernel: nvidia-nvswitch0: SXid (PCI:0000:c1:00.0): 23001, "
     "Fatal, Link 12 Always Fatal", 23001, "0000:c1:00.0", "reboot"),
]


@pytest.mark.parametrize("line, code, address, klass", REAL_LINES)
def test_real_line_formats(line, code, address, klass):
    event = kernel_log.parse_line(line)
    assert (event["code"], event["address"], event["class"]) == (code, address, klass)


@pytest.mark.parametrize("line", [
    "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae",
    "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.",
    "NVRM: Xid error: xyz, invalid data",
    "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): garbled, Fatal",
])
def test_lines_that_are_not_events(line):
    assert kernel_log.parse_line(line) is None


def test_times_of_each_stamp_form():
    assert kernel_log.line_time("2026-11-30T12:00:01.418223+00:00 h kernel: x") == \
        health.epoch("2026-11-30T12:00:01Z")
    assert kernel_log.line_time("2026-11-30T13:00:01+0100 h kernel: x") == \
        health.epoch("2026-11-30T12:00:01Z")
    # Traditional syslog has no year: December's lines read in January are last year's.
    hint = health.epoch("2027-01-02T00:00:00Z")
    assert kernel_log.line_time("Dec 31 23:59:59 h kernel: x", hint) == \
        health.epoch("2026-12-31T23:59:59Z")
    assert kernel_log.line_time("Jan  1 00:00:01 h kernel: x", hint) == \
        health.epoch("2027-01-01T00:00:01Z")
    assert kernel_log.line_time("[  812.345678] NVRM: x") is None


def test_window_counts_per_gpu_and_repeats_become_hardware(tmp_path):
    now = time.time()
    a, b = "0000:01:00.0", "0000:02:00.0"
    lines = [health.xid_line(now - 9 * 86400, a, 79),  # outside the 7-day window
             health.xid_line(now - 3 * 86400, a, 94),
             health.xid_line(now - 86400, a, 79),
             health.xid_line(now - 300, a, 79),
             health.xid_line(now - 200, b, 48),
             health.xid_line(now - 100, b, 48),
             health.xid_line(now - 50, b, 48)]
    health.write_kern_log(tmp_path, lines)
    facts, found, _outputs = audit_health(tmp_path)
    devices = dict((d["address"], d) for d in facts["kernel_log"]["devices"])
    assert devices[a]["events"] == 3 and devices[a]["worst"] == "reboot"
    assert [(c["code"], c["count"]) for c in devices[a]["codes"]] == [(79, 2), (94, 1)]
    assert devices[b]["worst"] == "hardware" and devices[b]["codes"][0]["repeated"]
    assert ids(found) == [("gpu_xid_events", a, "high"), ("gpu_xid_events", b, "critical")]
    assert "gpuhost.tuning.reboot_verify -l gpu07" in found[0]["remedy"]
    assert "hardware service" in found[1]["remedy"]


def test_events_before_this_boot_are_done(tmp_path):
    now = time.time()
    a = "0000:01:00.0"
    health.write_kern_log(tmp_path, [health.xid_line(now - 2 * 86400, a, 79)])
    health.proc_stat_btime(tmp_path, int(now - 86400))
    _facts, found, _outputs = audit_health(tmp_path)
    assert ids(found) == [("gpu_xid_events", a, "low")]
    assert "before this boot" in found[0]["current"]
    assert found[0]["remedy"].startswith("none now: rebooted since")


def test_rotations_gz_and_old_ones_skipped(tmp_path):
    now = time.time()
    a = "0000:01:00.0"
    health.write_kern_log(tmp_path, [health.xid_line(now - 100, a, 13)])
    health.write_kern_log(tmp_path, [health.xid_line(now - 2 * 86400, a, 31)],
                          name="kern.log.1", mtime=now - 86400)
    health.write_kern_log(tmp_path, [health.xid_line(now - 5 * 86400, a, 8)],
                          name="kern.log.2.gz", mtime=now - 4 * 86400)
    old = health.write_kern_log(tmp_path, [health.xid_line(now - 5 * 86400, a, 79)],
                                name="kern.log.3.gz", mtime=now - 30 * 86400)
    facts, _found, outputs = audit_health(tmp_path)
    codes = sorted(c["code"] for c in facts["kernel_log"]["devices"][0]["codes"])
    assert codes == [8, 13, 31]
    assert facts["kernel_log"]["source"] == "kern.log"
    with gzip.open(old, "rt") as handle:
        assert "79," in handle.read()
    stored = outputs.captured()["/.gpuhost-capture/kernel-log.txt"].decode()
    assert "uvm" not in stored and stored.count("NVRM: Xid") == 3


def test_stored_log_counts_from_the_time_it_was_read(tmp_path):
    """A capture audited weeks later finds what the live audit found."""
    read_at = time.time() - 40 * 86400
    a = "0000:01:00.0"
    text = "\n".join([kernel_log.header("journal", read_at, 7),
                      health.xid_line(read_at - 3600, a, 79)]) + "\n"
    os.makedirs(tmp_path / ".gpuhost-capture")
    (tmp_path / ".gpuhost-capture" / "kernel-log.txt").write_text(text)
    facts, found, _outputs = audit_health(tmp_path)
    assert facts["kernel_log"]["source"] == "journal"
    assert ids(found) == [("gpu_xid_events", a, "high")]


def test_catalogue_classes_are_known():
    assert set(c for c, _d in xid.CATALOGUE.values()) <= set(xid.CLASSES)
    assert xid.classify(79)[0] == "reboot" and xid.classify(63)[0] == "none"
    assert xid.classify(95)[0] == "reset_gpu" and xid.classify(94)[0] == "restart_app"


# ----------------------------------------------------------------------------- real H200


def test_real_h200_reads_as_it_is():
    parsed = nvsmi.parse(health.read(health.H200_XML))
    gpu = parsed["gpus"][0]
    assert parsed["driver_version"] == "580.159.04" and parsed["cuda_version"] == "13.0"
    assert (gpu["address"], gpu["name"]) == ("0000:00:06.0", "NVIDIA H200")
    assert gpu["persistence_mode"] is True and gpu["performance_state"] == "P0"
    assert (gpu["ecc_mode"], gpu["ecc_mode_pending"]) == ("Enabled", "Enabled")
    assert gpu["ecc_aggregate_correctable"] == 1 and gpu["ecc_aggregate_uncorrectable"] == 0
    assert gpu["remapped_rows_pending"] is False and gpu["remapped_rows_failure"] is False
    assert gpu["retired_pages_pending"] is None
    assert gpu["clock_reasons_active"] == [] and len(gpu["clock_reasons_read"]) == 9
    assert gpu["power"]["limit_w"] == 700.0 == gpu["power"]["default_limit_w"]
    assert gpu["fabric_state"] is None


def test_real_h200_audits_cleanly(tmp_path):
    health.h200_tree(tmp_path)
    result = audit.audit(str(tmp_path), {"host": "h200"})
    mine = [f for f in result["findings"] if f["id"] in HEALTH_IDS]
    assert mine == []
    assert result["checks"]["gpu_memory"]["status"] == "ok"
    assert result["checks"]["gpu_state"]["status"] == "ok"
    assert result["checks"]["gpu_xid"]["status"] == "n/a"
    assert result["checks"]["fabric_manager"]["note"] == "no NVSwitch (PCIe-only host)"


def test_doctored_h200_gives_exactly_those_findings(tmp_path):
    address = health.h200_tree(tmp_path)
    health.write_smi(tmp_path, health.smi_xml(health.H200_XML, edits={address: {
        "persistence_mode": "Disabled", "remapped_rows/remapped_row_pending": "Yes"}}))
    now = time.time()
    health.write_kern_log(tmp_path, [health.xid_line(now - 3600, address, 79)])
    result = audit.audit(str(tmp_path), {"host": "h200"})
    mine = sorted((f["id"], f["subject"], f["severity"]) for f in result["findings"]
                  if f["id"] in HEALTH_IDS)
    assert mine == [("gpu_persistence_off", address, "medium"),
                    ("gpu_row_remap_pending", address, "high"),
                    ("gpu_xid_events", address, "high")]


def test_h200_capture_round_trip_finds_the_same(tmp_path):
    """Capture (the stored nvidia-smi log and kernel-log lines go into the tarball), unpack
    elsewhere, audit: the same facts and findings."""
    src = tmp_path / "src"
    address = health.h200_tree(src)
    health.write_smi(src, health.smi_xml(health.H200_XML, edits={address: {
        "remapped_rows/remapped_row_pending": "Yes"}}))
    health.write_kern_log(src, [health.xid_line(time.time() - 3600, address, 79)])
    builder, original, _recorded = host_capture.capture(str(src), {"host": "h200"})
    buf = io.BytesIO()
    builder.write(buf, "{}")
    dest = tmp_path / "unpacked"
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(dest, filter="tar")
    assert ".gpuhost-capture/nvidia-smi-q-x.xml" in names
    assert ".gpuhost-capture/kernel-log.txt" in names and "var/log/kern.log" not in names
    again = audit.audit(str(dest), {"host": "h200"})
    for key in ("nvidia_smi", "kernel_log", "findings", "checks"):
        assert again[key] == original[key], key
    assert [f["id"] for f in again["findings"] if f["id"] in HEALTH_IDS] == [
        "gpu_xid_events", "gpu_row_remap_pending"]


# ----------------------------------------------------------------------------- seed host


def test_seed_health_finds_the_looping_xid79_and_the_pending_remap(tmp_path):
    built = pci.seed_gpus(str(tmp_path))
    seed = health.seed_health(tmp_path, built["gpus"])
    facts, found, _outputs = audit_health(tmp_path, driver="590.48.01")
    assert ids(found) == [("gpu_row_remap_pending", seed["remap"], "high"),
                          ("gpu_xid_events", seed["xid79"], "critical")]
    xid79 = [f for f in found if f["id"] == "gpu_xid_events"][0]
    assert xid79["current"].startswith("4 XID events in 7 days: XID 79 x4")
    assert len(facts["nvidia_smi"]["gpus"]) == 8


# ----------------------------------------------------------------------------- fabric


# ----------------------------------------------------------------------------- drift


def _audit(driver, kernel="6.8.12-9-pve", vbios="97.00.4B.00.01", gpus=8, containers=()):
    return {"nvidia": {"driver_version": driver}, "kernel": {"running": kernel},
            "gpus": [{"address": "0000:%02x:00.0" % (index + 1), "vendor": "10de",
                      "device": "2bb5", "upstream": []} for index in range(gpus)],
            "nvidia_smi": {"gpus": [{"name": health.SEED_NAME, "vbios": vbios}] * gpus},
            "containers_nvidia": list(containers)}


def test_container_user_space_against_the_host_module(tmp_path):
    root = tmp_path
    os.makedirs(root / "etc/pve/lxc")
    (root / "etc/pve/storage.cfg").write_text(
        "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup\n\n"
        "zfspool: local-zfs\n\tpool rpool/data\n\tsparse\n\tcontent images,rootdir\n")
    for vmid, version in ((129, "580.95.05"), (130, "590.48.01")):
        (root / ("etc/pve/lxc/%d.conf" % vmid)).write_text(
            "arch: amd64\nlxc.cgroup2.devices.allow: c 195:* rwm\n"
            "rootfs: local-zfs:subvol-%d-disk-0,size=200G\n" % vmid)
        lib = root / ("rpool/data/subvol-%d-disk-0/usr/lib/x86_64-linux-gnu" % vmid)
        os.makedirs(lib)
        os.symlink("libcuda.so.%s" % version, str(lib / "libcuda.so.1"))
    (root / "etc/pve/lxc/131.conf").write_text(
        "lxc.cgroup2.devices.allow: c 195:* rwm\nrootfs: local-lvm:vm-131-disk-0,size=8G\n")
    (root / "etc/pve/storage.cfg").write_text(
        (root / "etc/pve/storage.cfg").read_text() + "\nlvmthin: local-lvm\n\tthinpool data\n")
    cts = container_driver.container_facts(str(root), "/etc/pve/lxc", [129, 130, 131])
    assert [(c["vmid"], c["version"]) for c in cts] == [(129, "580.95.05"), (130, "590.48.01"),
                                                        (131, None)]
    assert "lvmthin" in cts[2]["note"]
    found = driver_drift.fleet_findings({"gpu01": _audit("590.48.01", containers=cts)})
    assert [(f["subject"], f["severity"]) for f in found["gpu01"]] == [("lxc 129", "high")]


def test_report_fills_the_fleet_drift_column():
    audits = {"gpu01": _audit("590.48.01"), "gpu02": _audit("590.48.01"),
              "gpu03": _audit("580.95.05")}
    for item in audits.values():
        item.update({"findings": [], "checks": {"fleet_drift": {
            "label": "Fleet drift", "status": "n/a", "count": 0,
            "note": "compared across the hosts of the run by the report"}}})
    files = report.report_files(audits, generated_at="2026-01-01 00:00:00Z")
    odd = json.loads(files["gpu03.json"])
    assert [(f["id"], f["subject"]) for f in odd["findings"]] == [("fleet_drift", "driver")]
    assert odd["checks"]["fleet_drift"]["status"] == "medium"
    assert json.loads(files["gpu01.json"])["checks"]["fleet_drift"]["status"] == "ok"
    assert "Fleet drift" in files["gpu03.html"] and "580.95.05" in files["summary.md"]
