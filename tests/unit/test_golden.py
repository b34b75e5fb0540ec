"""Golden outputs of the audit: what a user reads, byte for byte, on every fixture host.

For each host below, the ``host_audit`` module's whole result (facts, findings, per-check
status, counts, worst, text lines, headline, the files it read) and the reports
``audit_report`` writes for all of them (``<host>.json``, ``summary.md``, ``index.html``) are
compared with the files in ``tests/unit/golden/audit/``. A refactoring must leave them
alone; an intended change of output regenerates them on purpose and shows in the diff:

    .venv/bin/pytest -q tests/unit/test_golden.py --update-golden

Only what differs between runs is neutralised: the temporary root's path, ``collected_at``
and ``duration_s`` (the reports' ``generated_at`` is an argument and is fixed here).
"""

import io
import json
import os
import shutil
import tarfile

import pytest
from conftest import TESTS
from fixtures import (
    boot,
    cpu,
    devnodes,
    dkms,
    health,
    hosts,
    kernmsg,
    lxc,
    nvhealth,
    nvlink,
    pci,
    procsys,
    realhost,
)
from fixtures import passthrough as ptfix
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "audit")
GENERATED_AT = "2026-01-01 00:00:00Z"
ROOT_MARK = "/HOSTROOT"


def empty_host(root):
    """Nothing at all under root: every fact absent, every check ok or n/a."""
    return {}


def odd_host(root):
    """The paths the three whole hosts leave untried: links trained down (a bad riser, and an
    NVIDIA GPU idling at 2.5 GT/s), a config space a non-root reader sees (64 bytes), a GPU
    with no driver bound, CPUs of an Intel host on acpi-cpufreq, a running kernel from
    outside the root (the DKMS fallback, headers missing for the next boot), boot
    parameters wanted as false and absent, containers missing majors without onboot,
    ib_core available without nvidia_peermem, and a reader that fails (``audit_error``)."""
    root = str(root)
    built = pci.seed_gpus(root, mrrs=4096)
    pci.degrade_link(root, built["gpus"][1], speed=16.0, width=8)
    pci.degrade_link(root, built["gpus"][2], speed=2.5, width=16)
    path = os.path.join(pci.device_dir(root, built["gpus"][3]), "config")
    with open(path, "rb") as handle:
        data = handle.read(64)
    with open(path, "wb") as handle:
        handle.write(data)
    os.unlink(os.path.join(pci.device_dir(root, built["gpus"][4]), "driver"))
    cpu.mixed_cpus(root, threads=8)
    cpu_base = os.path.join(root, "sys/devices/system/cpu/cpufreq")
    for name in os.listdir(cpu_base):
        with open(os.path.join(cpu_base, name, "scaling_driver"), "w") as handle:
            handle.write("acpi-cpufreq\n")
    procsys.cpuinfo(root, threads=8, vendor="GenuineIntel",
                    model="Intel(R) Xeon(R) Platinum 8480+", family=6, model_number=143,
                    flags="fpu vme de pse tsc msr pae", mhz="2000.000")
    procsys.sysctls(root, {"kernel.numa_balancing": "0", "net.core.rmem_max": "1048576",
                           "vm.swappiness": "10"})
    dkms.kernel_tree(root, hosts.SEED_RUNNING, headers=True)
    dkms.kernel_tree(root, hosts.SEED_NEW, headers=False)
    dkms.dkms_tree(root, "nvidia", hosts.SEED_NVIDIA, installed=[hosts.SEED_RUNNING])
    dkms.proc_running(root, "6.12.57+deb13-amd64")
    procsys.proc_modules(root, [("ib_core", 528384, 0, "-")] + [
        m for m in procsys.SEED_MODULES if m[0] != "nvidia_uvm"])
    procsys.nvidia_driver(root, hosts.SEED_NVIDIA, uvm_disable_hmm=None)
    lxc.proc_devices(root, "after")
    lxc.container_129(root, "after")
    text = lxc.container_129_text("before").replace("onboot: 1\n", "")
    lxc.write_config(root, 131, text)
    boot.proxmox_systemd_boot(root, cmdline=hosts.PVE_CMDLINE + " quiet mitigations=off")
    # a reader that fails: the THP setting is a folder, not a file
    thp = os.path.join(root, "sys/kernel/mm/transparent_hugepage/enabled")
    os.makedirs(thp)
    # GPU health: every memory and state finding, an XID 13, NVSwitches with a fatal SXID
    # and Fabric Manager 570 against driver 590
    switches = nvhealth.odd_health(root, built["gpus"], hosts.SEED_CAPTURED_AT)
    for address in switches:
        pci.add_function(root, address, "pci0000:00",
                         pci.plain_config(0x10DE, 0x22A3, 0x068000, 0xA1),
                         driver="nvidia-nvswitch")
    nvhealth.dpkg_status(root, [("nvidia-fabricmanager-570", "570.86.15-1")])
    # Device nodes at container start: /dev/nvidia-uvm missing (nothing ran nvidia-modprobe
    # before the containers started), nvidia-uvm-tools left with the major of before the
    # reboot, no /dev/char links for the nesting container 129, and container 132 (onboot,
    # PVE 8.1+ devN entries) with a gid= its own /etc/group lacks and no unit before
    # pve-guests.service
    devnodes.write_listing(root, devnodes.clean_nodes(
        char_links=False, without=["/dev/nvidia-uvm"],
        override={"/dev/nvidia-uvm-tools": "c 504:1 /dev/nvidia-uvm-tools"}))
    lxc.write_config(root, 132, lxc.container_130_text().replace("subvol-130", "subvol-132")
                     + "dev0: /dev/nvidia0,gid=44\ndev1: /dev/nvidiactl,gid=993\n"
                     "dev2: /dev/nvidia-uvm,mode=0666\n")
    devnodes.write_rootfs_group(root, 132, [("root", 0), ("video", 44), ("render", 104)])
    # Container 133 set up by a pre-cgroup2 guide: its GPU rules under lxc.cgroup.* keys,
    # which LXC ignores on this unified-hierarchy host (lxc_cgroup_v1_keys)
    lxc.write_config(root, 133, lxc.container_130_text().replace("subvol-130", "subvol-133")
                     + "lxc.cgroup.devices.allow: c 195:* rwm\n"
                     "lxc.cgroup.devices.allow: c 509:* rwm\n"
                     "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,"
                     "create=file\n")
    # NVLink (fixtures/nvlink.py, NVIDIA's format): GPU 2 with every link inactive, GPU 5
    # with two, CRC and replay errors on GPU 1 and a recovery error on GPU 6
    uuids = [(i, "NVIDIA B200", "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44%02x" % i)
             for i in range(8)]
    nvlink.write(root, nvlink.status_text(uuids, gbs="53.125",
                                          inactive={2: list(range(18)), 5: [3, 7]}),
                 nvlink.errors_text(uuids, counts={
                     (1, 4): {"CRC Errors": 891, "Replay Errors": 142},
                     (6, 0): {"Recovery Errors": 3}}))
    return built


H200_CAPTURE = realhost.H200


def h200_real(root):
    """The real read-only capture of the lent H200 machine (tests/fixtures/h200.tar.gz): a
    Firecracker microVM, one H200 on the host bridge, driver 580.159.04."""
    for name in ("proc", "sys"):
        shutil.copytree(os.path.join(H200_CAPTURE, name), os.path.join(str(root), name),
                        symlinks=True)
    return {}


def cuda_results():
    """The opt-in CUDA pass's input on the H200 VM: the real H200's probe (its copy rates
    set to 45 % of the link, and a launch latency set as a host with deep idle states gives
    it: 95 us p99 after a 1 ms sleep against 12.4 us back to back), container 129 with
    the measured 999 negative, and the lent two-H200 machine's peer matrix
    (tests/fixtures/h200x2/probe-1.json) with its peer copies set to 40 GB/s: the VM tree
    has no NVLink fact, so their path is PCIe Gen5 x16 and 63 % of it is low."""
    probe = os.path.join(H200_CAPTURE, "probe")
    with open(os.path.join(probe, "bw-2.json")) as handle:
        host = json.load(handle)
    with open(os.path.join(probe, "negative.json")) as handle:
        ct = json.load(handle)
    host.pop("error")
    host["devices"][0].update(pci_bus_id="0000:00:10.0", h2d_gbs=28.35, h2d_pct=45.0,
                              d2h_gbs=28.98, d2h_pct=46.0)
    host["devices"][0]["latency"] = {
        "count": 100, "gap_us": 1000, "skipped": None,
        "back_to_back": {"p50_us": 9.8, "p99_us": 12.4, "max_us": 30.2},
        "sleeping": {"p50_us": 48.1, "p99_us": 95.0, "max_us": 160.7}}
    ct.update(vmid=129, msg="CUDA check failed on container 129: %s; cause: %s"
              % (ct.pop("error"), ct["cause"]))
    with open(os.path.join(TESTS, "fixtures", "h200x2", "probe-1.json")) as handle:
        pair = json.load(handle)
    pair.pop("error", None)
    for peer in pair["peers"]:
        peer["gbs"] = 40.0
    # the compute and memory ceiling (cuda_ceiling), shaped as cuda_ceiling.py returns it:
    # the pair's second H200 20 % slow in BF16 (gpu_compute_low), the VM's own H200's
    # device-to-device copy 14.6 % below the node's best (gpu_memory_bandwidth_low)
    for dev, bf16, gbs in ((pair["devices"][0], 620.0, 4100.0),
                           (pair["devices"][1], 496.0, 4080.0),
                           (host["devices"][0], 615.0, 3500.0)):
        dev["ceiling"] = {
            "compute_capability": "9.0", "sm_count": 132, "seconds": 4.1,
            "memory": {"bytes": 1073741824, "limited_by": "asked", "copies_per_run": 160,
                       "path": "ptx-dtod", "checked": True, "runs_gbs": [gbs], "gbs": gbs},
            "fp32": {"iters": 4096, "threads": 135168, "path": "ptx-fma", "checked": True,
                     "runs_tflops": [59.1], "tflops": 59.1},
            "bf16": {"iters": 4096, "threads": 135168, "path": "ptx-mma", "checked": True,
                     "runs_tflops": [bf16], "tflops": bf16},
            "fp8": {"iters": 4096, "threads": 135168, "path": "ptx-mma", "checked": True,
                    "runs_tflops": [1190.0], "tflops": 1190.0}}
    return [host, ct, pair]


def lost_gpu_host(root):
    """The issue-25 host (hosts.lost_gpu_host, GPU 3 held by container 129, which does not
    bind it) with every other host-health class in its kernel log (a fatal GHES report, an
    oops, a soft lockup, NVMe timeouts), 2 GiB used on GPU 0 by no process, and an
    expected count of 9 (role common's gpuhost_gpu_count)."""
    built = hosts.lost_gpu_host(root, unbound=True)
    now = built["now"]
    log = os.path.join(str(root), ".gpuhost-capture/kernel-log.txt")
    extra = kernmsg.ghes("fatal") + [kernmsg.OOPS, kernmsg.SOFT_LOCKUP, kernmsg.NVME_TIMEOUT,
                                     kernmsg.NVME_RESET]
    with open(log, "a") as handle:
        handle.write("\n".join(kernmsg.line(now - 1800, m) for m in extra) + "\n")
    smi = os.path.join(str(root), ".gpuhost-capture/nvidia-smi-q-x.xml")
    with open(smi) as handle:
        text = handle.read()
    with open(smi, "w") as handle:
        handle.write(text.replace("<used>0 MiB</used>", "<used>2048 MiB</used>", 1))
    return built


# name -> (builder, extra wanted values)
HOSTS = {
    "pve-gpu05": (lost_gpu_host, {"gpu_count": 9}),
    "pve-gpu01": (hosts.seed_health_host, {}),
    "pve-gpu02": (hosts.tuned_host, {}),
    "h200-vm": (hosts.vm_host, {"cuda": cuda_results()}),
    "pve-gpu03": (health.gpu_host, {}),
    "pve-gpu04": (health.switch_host, {}),
    "h200-real": (h200_real, {}),
    "empty": (empty_host, {}),
    # GPUs shared with VMs and vGPU (fixtures/passthrough.py): every passthrough finding
    "pve-vm01": (ptfix.broken_host, {}),
    "pve-vm02": (ptfix.iommu_off_host, {}),
    "odd": (odd_host, {"boot_params": {"amd_pstate": "active", "nmi_watchdog": 0,
                                       "mitigations": False, "quiet": None, "pti": False,
                                       "intel_pstate": "active"}}),
}


def _neutral(text, root):
    return text.replace(root, ROOT_MARK)


def generate(base):
    """``{relative path: bytes}`` of every golden file, built under folder ``base``."""
    files = {}
    audits = {}
    for name, (build, extra) in HOSTS.items():
        root = os.path.join(str(base), name)
        os.makedirs(root)
        build(root)
        args = dict(hosts.common_wanted(host=name), root=root, record_files=True)
        args.update(extra)
        result = run_module(host_audit, hosts.as_wanted(args))
        assert not result.get("failed"), result.get("msg")
        result["audit"]["collected_at"] = "2026-01-01T00:00:00Z"
        result["audit"]["duration_s"] = 0.0
        files_read = result.pop("files_read")
        result.pop("invocation", None)
        text = json.dumps(result, indent=1) + "\n"
        files["%s.result.json" % name] = _neutral(text, root)
        files["%s.files_read.json" % name] = json.dumps(files_read, indent=1,
                                                        sort_keys=True) + "\n"
        files["%s.lines.txt" % name] = _neutral("\n".join(
            [result["headline"]] + result["lines"]) + "\n", root)
        audits[name] = json.loads(_neutral(json.dumps(result["audit"]), root))
    out = os.path.join(str(base), "reports")
    paths, _written = report.write_files(out, report.report_files(audits, GENERATED_AT, 4096))
    for path in paths:
        with open(path, "rb") as handle:
            files["reports/" + os.path.basename(path)] = handle.read().decode("utf-8")
    return dict((k, v.encode("utf-8")) for k, v in files.items())


def _stored():
    out = {}
    for folder, _dirs, names in os.walk(GOLDEN):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, GOLDEN)] = handle.read()
    return out


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("golden"))


def test_golden_outputs_unchanged(generated, request):
    if request.config.getoption("--update-golden"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        for rel, data in generated.items():
            path = os.path.join(GOLDEN, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(data)
    stored = _stored()
    assert sorted(stored) == sorted(generated), "golden files added or gone: run with " \
        "--update-golden if intended"
    changed = [rel for rel in sorted(generated) if generated[rel] != stored[rel]]
    assert not changed, "output changed in %s (tests/unit/golden/audit; --update-golden if " \
        "intended)" % ", ".join(changed)


def test_golden_hosts_cover_every_finding_id(generated):
    # the golden files are only as good as the paths they take: every id shows up somewhere
    seen = set()
    for rel, data in generated.items():
        if rel.endswith(".result.json"):
            seen.update(f["id"] for f in json.loads(data)["audit"]["findings"])
        elif rel.startswith("reports/") and rel.endswith(".json"):
            # report-level checks (fleet_drift) are found by audit_report
            seen.update(f["id"] for f in json.loads(data)["findings"])
    documented = set(host_audit.DOCUMENTATION.split("Finding ids (stable):")[1]
                     .split("Some ids")[0].replace("C(", " ").replace(")", " ").split())
    documented = set(w.strip(",") for w in documented if "_" in w)
    assert documented - seen == set()


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_capture_of_each_golden_host_audits_the_same(name, tmp_path):
    # what the audit read, packed and unpacked elsewhere, gives the same audit
    build, extra = HOSTS[name]
    src = str(tmp_path / "src")
    os.makedirs(src)
    build(src)
    # the CUDA results come from a live probe, never from a capture: compare without them
    wanted = dict(hosts.common_wanted(host=name),
                  **dict((k, v) for k, v in extra.items() if k != "cuda"))
    builder, original, _recorded = host_capture.capture(src, wanted)
    buf = io.BytesIO()
    builder.write(buf, "{}")
    dest = str(tmp_path / "unpacked")
    os.makedirs(dest)
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue()), mode="r:gz") as tar:
        tar.extractall(dest, filter="tar")
    again = audit.audit(dest, wanted)

    def comparable(result, root):
        out = dict((k, v) for k, v in result.items()
                   if k not in ("collected_at", "duration_s", "root"))
        return _neutral(json.dumps(out, sort_keys=True), root)

    assert comparable(again, dest) == comparable(original, src)
