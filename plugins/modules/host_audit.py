#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_audit
short_description: Read-only audit of a GPU host (PCIe, CPU, kernel, DKMS, NVIDIA, GPU health, LXC)
version_added: "0.1.0"
description:
  - Reads sysfs, procfs and files under O(root) in one call and returns the facts and the
    ranked findings against the wanted values (role C(gpuhost.tuning.common) passes them).
  - Never writes. Files only, with two exceptions where only the driver or the journal
    knows, each run at most once per audit and only when O(root) is C(/) (the live host)
    and the tool is installed there - C(nvidia-smi -q -x) (ECC, row remapping, clock event
    reasons, power limits, persistence mode; about 0.1 s on an H200 with persistence mode
    on) and C(journalctl _TRANSPORT=kernel --since "N days ago") (XID/SXID lines; without a
    journal, C(/var/log/kern.log*) files are read). A capture (playbook
    C(gpuhost.tuning.capture)) stores both outputs under C(/.gpuhost-capture/), and an
    audit of an unpacked capture (any other O(root)) reads them from there, so it finds the
    same things.
  - A missing file is a fact (null or empty), never a failure; a reader that fails
    unexpectedly is reported as an C(audit_error) finding and the rest of the audit goes on.
  - "Finding ids (stable):
    C(dkms_missing_for_kernel), C(gpu_row_remap_failed), C(cuda_init_failed),
    C(passthrough_iommu_off), C(gpu_vm_container_conflict), C(host_edac_errors) (critical),
    C(gpu_retired_pages), C(gpu_xid_events), C(nvswitch_sxid_events), C(fabric_manager),
    C(gpu_recovery_needed), C(gpu_row_remap_pending), C(gpu_ecc_uncorrectable),
    C(gpu_clock_throttle),
    C(gpu_no_driver), C(pcie_mrrs), C(pcie_link_degraded), C(numa_balancing),
    C(cpuidle_deep_state), C(lxc_stale_majors), C(lxc_gpu_majors_missing),
    C(lxc_cgroup_v1_keys),
    C(kernel_headers_missing), C(pcie_aer_errors), C(p2p_iommu_translated),
    C(gpu_numa_mismatch), C(pcie_bandwidth_low), C(gpu_peer_bandwidth_low),
    C(gpu_compute_low), C(gpu_memory_bandwidth_low),
    C(passthrough_device_missing),
    C(passthrough_id_mismatch), C(passthrough_iommu_group), C(vm_hookscript_missing),
    C(vgpu_manager_not_running), C(vgpu_type_unavailable), C(gpu_lost),
    C(gpu_count_expected), C(host_hardware_error), C(host_fs_readonly), C(host_kernel_oops),
    C(host_kernel_hang), C(host_nvme_errors), C(gpu_held_unbound), C(lxc_device_node_missing),
    C(lxc_device_node_major), C(nvlink_inactive) (high),
    C(gpu_ecc_pending), C(cpufreq_driver), C(sysctl), C(nvidia_uvm_hmm), C(reboot_pending),
    C(gpu_power_capped), C(gpu_persistence_off), C(fleet_drift), C(audit_error),
    C(p2p_acs_redirect), C(gpu_bar1_small), C(gpu_container_unpinned),
    C(gpu_launch_latency_high), C(passthrough_not_vfio), C(passthrough_no_reset),
    C(host_oom_kill), C(gpu_memory_no_process), C(lxc_dev_gid_unknown),
    C(device_nodes_unit_missing), C(lxc_dev_char_links_missing), C(nvlink_errors),
    C(gpu_slowdown_since_load), C(gpu_thermal_margin_low) (medium),
    C(boot_param), C(lxc_onboot), C(nvidia_peermem_not_loaded) (low),
    C(pcie_unreadable), C(nvidia_peermem_unavailable), C(gpu_held), C(host_is_guest) (info).
    Some ids take another severity by context; see RV(audit.findings)."
  - The wanted values come whole in O(wanted) (role C(gpuhost.tuning.common) composes
    them). The per-key options below (O(mrrs_size), O(sysctl), O(gpu_vendor) and every
    other key of O(wanted)) are deprecated and stop working in 0.3.0.
extends_documentation_fragment:
  - gpuhost.tuning.wanted
  - gpuhost.tuning.gpu_selection
  - gpuhost.tuning.boot_wanted
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  root:
    description: Root under which every host path is read (C(/) on a live host).
    type: path
    default: /
  mrrs_size:
    description: Wanted PCIe Max Read Request Size (bytes) of GPUs and their bridges.
    type: int
    default: 4096
    choices: [128, 256, 512, 1024, 2048, 4096]
  cpuidle_deeper_than:
    description: Idle states with a higher exit latency than this named state should be disabled.
    type: str
    default: C1
  sysctl:
    description: Wanted sysctl values (key to value as a string).
    type: dict
    default: {}
  nvidia_uvm_disable_hmm:
    description: Whether C(nvidia_uvm) should load with C(uvm_disable_hmm=1).
    type: bool
    default: true
  nvidia_uvm_modprobe_file:
    description:
      - The modprobe.d file the C(nvidia_uvm_hmm) remedy tells to write (role boot_config
        writes the option there; role common's C(gpuhost_nvidia_uvm_modprobe_file)).
    type: path
    default: /etc/modprobe.d/gpuhost-nvidia-uvm.conf
  lxc_gpu_drivers:
    description: Character-device drivers GPU containers must be allowed.
    type: list
    elements: str
    default: [nvidia, nvidia-uvm, nvidia-caps]
  lxc_config_dir:
    description: Folder of the Proxmox container configs.
    type: path
    default: /etc/pve/lxc
  host:
    description: Inventory name of the host, used in the remedies (C(-l <host>)).
    type: str
  xid_window_days:
    description:
      - How many days of the kernel log the XID/SXID count covers (read back to then, counted
        up to the time of the read; a capture counts from when it was taken).
    type: int
    default: 7
  cuda:
    description:
      - Results of M(gpuhost.tuning.cuda_probe) on this live host and in its running GPU
        containers (each the registered result, with C(vmid) for a container), judged as
        C(cuda_init_failed) (a failed probe), C(pcie_bandwidth_low) (the host's measured
        copy rates), C(gpu_launch_latency_high) (each GPU's launch round trip after a
        sleep against back to back, C(devices[].latency)), C(gpu_compute_low) and
        C(gpu_memory_bandwidth_low) (C(devices[].ceiling), O(cuda_ceiling)). Results
        gathered some other way; O(cuda_probe) gathers them in the same call. Without
        either the audit runs no CUDA code, so an audit of a capture has none.
    type: list
    elements: dict
  cuda_probe:
    description:
      - The CUDA pass of a live host (O(root) C(/)), in this same call - CUDA initialised
        and the pinned copy rates and launch latency measured on the host (as
        M(gpuhost.tuning.cuda_probe) with C(bandwidth), C(peer) and C(latency), 100 round
        trips each way), then CUDA initialised in each running container with a GPU
        (C(pct exec); without C(pct) the host alone); the results judged as with O(cuda).
      - Takes about a second (plus the peer copies, 6 of O(cuda_size_mb) per ordered GPU
        pair) and O(cuda_size_mb) of GPU memory per GPU; reads and memory copies only.
        Role audit sets it with C(gpuhost_audit_cuda=true).
    type: bool
    default: false
  cuda_ceiling:
    description:
      - With O(cuda_probe), the CUDA pass also measures each GPU's compute and memory
        ceiling (M(gpuhost.tuning.cuda_probe) C(ceiling)) on the host and in each probed
        container - device-to-device copies, an FP32 FMA loop, BF16 and FP8 C(mma.sync)
        loops the driver compiles from PTX, each result checked - judged as
        C(gpu_compute_low) and C(gpu_memory_bandwidth_low) against the model table and the
        node's best GPU of the same model (O(wanted.ceiling_spread_pct),
        O(wanted.ceiling_min_pct)).
      - Adds about 4 s per GPU (a second per part) and 2 GiB of free GPU memory per GPU
        (less where less is free); it loads the GPUs fully while it runs, so run it on an
        idle host. Measures what the GPU delivers, not what the workload's own kernels
        reach. Role audit sets it with C(gpuhost_audit_cuda_ceiling=true).
    type: bool
    default: false
  cuda_ceiling_cublas:
    description:
      - With O(cuda_ceiling), also a BF16 GEMM (8192^3 where memory allows) through the
        cuBLAS the host or the container has (a PyTorch install ships one;
        M(gpuhost.tuning.cuda_probe) C(ceiling_cublas)), the realistic matmul figure, judged
        as part C(BF16 GEMM) against the table's published cuBLAS figures. Off by default,
        since it loads a library a framework installed; a host without one says so in the
        result.
    type: bool
    default: false
  cuda_size_mb:
    description: Size of each timed copy of the O(cuda_probe) pass, in MiB.
    type: int
    default: 256
  cuda_timeout:
    description:
      - Seconds each probe of the O(cuda_probe) pass may take to initialise CUDA and list
        the devices (1 to 3600); the host's copies get the time they take at 1 GB/s on top.
        Each probe runs in a child process, killed at its limit (process group, C(pct exec)
        included); a probe that did not return, or that a signal killed, is
        C(cuda_init_failed) naming that and the step it was in, and the audit goes on.
    type: int
    default: 30
  bandwidth_min_pct:
    description: A GPU whose measured pinned copy rate is below this percentage of its
      link's ceiling, either way, is C(pcie_bandwidth_low).
    type: int
    default: 70
  acknowledged:
    description:
      - Findings the operator has acknowledged, each C({id, subject}) (C(subject) left out -
        every subject of that id; an optional C(reason) is kept for the record). Such a
        finding stays in the results and the reports, marked C(acknowledged=true), and is
        left out of role audit's C(gpuhost_audit_fail_on) gate and of the alerting series
        (C(gpuhost_finding); it is C(gpuhost_finding_acknowledged) instead).
      - An id that is no finding id of the audit is refused, naming it.
    type: list
    elements: dict
    default: []
  xid_policy:
    description:
      - Overrides of NVIDIA's XID catalogue for C(gpu_xid_events), one entry per XID -
        C({xid, class, min_count, window_hours}). C(class) (C(none), C(restart_app),
        C(reset_gpu), C(reboot), C(hardware)) replaces the catalogue's class and so the
        severity and remedy; C(min_count) - fewer events of it in the XID window
        (O(wanted.xid_window_days)) are no finding; C(window_hours) - its last event older than
        this many hours before the log was read is no finding.
      - 'For example C([{xid: 13, min_count: 3}, {xid: 31, class: none}, {xid: 79,
        window_hours: 24}]).'
    type: list
    elements: dict
    default: []
  copy_rate_marks:
    description:
      - Pass marks per GPU model for the copy rates, C({model, host_gbs, peer_gbs}) (GB/s;
        C(model) a word of the driver's GPU name, e.g. C(H100)), looked up before the
        built-in table (H100 and H200 - host<->device 48 GB/s each way and NVLink peer 335
        GB/s, Azure azurehpc-health-checks' C(check_gpu_bw 48 335) of
        C(conf/nd96isr_h100_v5.conf) and C(conf/nd96isr_h200_v5.conf)).
      - C(pcie_bandwidth_low) uses a model's C(host_gbs) where the GPU's link can carry it,
        else O(wanted.bandwidth_min_pct) of the link. C(gpu_peer_bandwidth_low) uses
        C(peer_gbs) for the peer matrix (the O(cuda_probe) pass measures it on hosts with two
        or more GPUs; O(cuda) results of M(gpuhost.tuning.cuda_probe) C(peer=true)) where the
        pair's path (NVLink, else PCIe) can carry it, else O(wanted.bandwidth_min_pct) of that
        path.
    type: list
    elements: dict
    default: []
  gpu_count:
    description:
      - How many NVIDIA GPUs this host has (role common's C(gpuhost_gpu_count)); NVIDIA
        display and 3D functions on the PCI bus other than this are C(gpu_count_expected).
        Unset, only the bus is compared with the driver (C(gpu_lost)).
    type: int
  record_files:
    description:
      - Also return RV(files_read), every path under O(root) the audit read, listed or
        checked (what a capture must hold).
    type: bool
    default: false
  capture:
    description:
      - Audit this capture tarball (playbook C(gpuhost.tuning.capture), a file on the machine
        the task runs on) instead of O(root), which then stays C(/). It is unpacked into a
        private temporary folder, audited there and removed again.
      - Only folders, plain files and symlinks inside the tree are unpacked. A tarball with a
        device node, a FIFO, a hard link, an absolute name, a name with C(..), a member
        inside a link or a link that leads out of the tree is refused naming each such
        member, and nothing is written. An absolute link target is taken from the tree's
        root, as on the host.
      - Not with O(cuda_probe).
    type: path
notes:
  - Check mode is the same read-only run; C(changed) is always false.
  - C(host_is_guest) info - a container or a VM guest (fact C(virt)); subject C(container) or
    C(vm); the roles that change a host refuse it unless C(gpuhost_allow_guest).
  - Run as root (C(become)) on a live host; without root, PCI config space is only 64 bytes
    readable and the PCIe fields come back null with a C(pcie_unreadable) finding.
seealso:
  - module: gpuhost.tuning.audit_report
  - module: gpuhost.tuning.host_capture
"""

EXAMPLES = r"""
- name: Audit this GPU host
  gpuhost.tuning.host_audit:
    wanted:
      sysctl:
        kernel.numa_balancing: "0"
  register: result

- name: Audit an unpacked capture of another host
  gpuhost.tuning.host_audit:
    root: /srv/captures/gpu07
    wanted: {mrrs_size: 4096}
  delegate_to: localhost

- name: Audit a capture tarball as it is (unpacked safely, then removed)
  gpuhost.tuning.host_audit:
    capture: gpuhost-reports/gpu07-capture.tar.gz
  delegate_to: localhost

- name: Show the worst finding
  ansible.builtin.debug:
    msg: "{{ result.audit.findings | first | default('nothing found') }}"
"""

RETURN = r"""
audit:
  description: Facts and findings of the host.
  returned: always
  type: dict
  contains:
    virt:
      description:
        - What the host under O(root) is (module_utils/subjects/host/virt.py), C(kind)
          (C(proxmox_node), C(host), C(container), C(vm); C(unknown) when the reader
          failed), C(guest), C(technology), C(proxmox_node), C(evidence) (the files that
          decided it) and C(dmi).
      type: dict
      returned: always
      sample: {"kind": "container", "guest": true, "technology": "lxc",
               "proxmox_node": false, "evidence": ["/proc/1/environ container=lxc"]}
    kernel:
      description:
        - C(running) release (C(/proc/sys/kernel/osrelease), else C(/proc/version)),
          C(cmdline) (C(/proc/cmdline)), C(installed) kernels (C(/lib/modules), C(/boot)),
          C(newest), C(pinned) (proxmox-boot-tool pin), C(next_boot) (what the boot
          loader's own files say when readable offline (grub.cfg, grubenv, ESP entries
          under root), else the pin, else the newest installed) and C(next_boot_source),
          C(running_installed), C(headers) (release to bool), C(configured_cmdline) and its
          C(configured_cmdline_source), C(boot_tool) (C(proxmox-boot-tool), C(kernel-install),
          C(grub) or null), C(boot_backend).
      type: dict
      returned: always
      sample: {"running": "6.8.12-9-pve", "newest": "6.14.11-5-bpo12-pve",
               "next_boot": "6.14.11-5-bpo12-pve",
               "headers": {"6.8.12-9-pve": true, "6.14.11-5-bpo12-pve": false},
               "boot_tool": "proxmox-boot-tool"}
    cpu:
      description:
        - C(vendor), C(model_name), C(cppc), C(hypervisor), C(online) CPU count;
          C(cpuidle) C({driver, governor, states}) with each state's C(name), C(desc),
          C(latency_us), C(cpus), C(cpus_disabled) (counts) and C(cpus_enabled_list);
          C(cpufreq) C({driver, drivers, governors, epp, boost}); C(amd_pstate_status).
        - C(cpuidle.driver) is null without a cpuidle folder (VMs); C(cpufreq.driver) is
          null without cpufreq.
      type: dict
      returned: always
    sysctl:
      description: C(values) (key to string, null when the kernel lacks the key) for every
        key of O(wanted.sysctl); C(transparent_hugepage) C({enabled, defrag}).
      type: dict
      returned: always
      sample: {"values": {"kernel.numa_balancing": "1"},
               "transparent_hugepage": {"enabled": "madvise", "defrag": "madvise"}}
    gpus:
      description:
        - Every GPU (O(wanted.gpu_vendor), O(wanted.gpu_classes)) by address, each with C(address),
          C(vendor), C(device), C(class), C(driver), C(numa_node), C(max_read_request_size),
          C(max_payload_size), C(max_payload_size_supported) (bytes; null without a
          readable PCIe capability), C(link) C({speed_gts, width, max_speed_gts,
          max_width}), C(error) (why config space could not be read, else null),
          C(on_host_bridge), C(owner) (C(host) bound to a host driver, C(vm <vmid>) named by a
          VM's C(hostpciN:) by address or mapping, C(vgpu) a vGPU parent or virtual function,
          C(vfio) bound to vfio-pci or pci-stub with no VM naming it, C(none) no driver; only
          C(host) and C(none) GPUs are judged by the host-side GPU checks), and C(upstream),
          the same fields for every bridge above it, nearest first.
      type: list
      elements: dict
      returned: always
    passthrough:
      description:
        - "What VMs pass through (C(/etc/pve/qemu-server/<vmid>.conf) C(hostpciN:), by address
          or by C(mapping=) of C(/etc/pve/mapping/pci.cfg) for this node) - C(node),
          C(vms) (C(vmid), C(name), C(path), C(onboot), C(running), C(devices), C(hookscript)
          C({volume, path, state})), C(devices) (one per address - C(vmid), C(key),
          C(address), C(via), C(mdev), C(exists), C(id), C(subsystem), C(driver),
          C(iommu_group), C(group_others), C(reset_method), the mapping's C(expected_*),
          and for mdev C(sriov_numvfs), C(sriov_totalvfs), C(physfn), C(mdev_type)),
          C(mapping_problems), C(iommu_groups) (how many), C(vfio_boot) (modprobe.d C(ids),
          C(softdeps), C(blacklist), C(files)), C(vgpu_manager_active) and C(conflicts)
          (GPUs a container and a VM both claim)."
      type: dict
      returned: always
    nvidia:
      description: C(driver_version) (C(/proc/driver/nvidia/version)), C(modules_loaded)
        (nvidia* and ib_core from C(/proc/modules)), C(uvm_disable_hmm) (bool or null when
        nvidia_uvm is not loaded), C(uvm_disable_hmm_raw), C(uvm_disable_hmm_configured)
        (modprobe.d), C(uvm_options_files), C(nvidia_peermem) and C(ib_core), each
        C({loaded, available}) (available as a .ko for the running kernel; null when its
        module folder is absent).
      type: dict
      returned: always
    char_devices:
      description: Character device name to major (int) from C(/proc/devices), the first
        major of names registered twice.
      type: dict
      returned: always
      sample: {"nvidia-frontend": 195, "nvidia-uvm": 509, "nvidia-caps": 238}
    char_majors:
      description: Character device name to every major (list of int, file order) from
        C(/proc/devices); a name registered twice (C(nvidia-caps)) lists both.
      type: dict
      returned: always
      sample: {"nvidia-frontend": [195], "nvidia-uvm": [509], "nvidia-caps": [238, 237]}
    dkms:
      description: DKMS modules read from C(/var/lib/dkms) and C(/lib/modules) without
        running dkms, each C({name, version, kernel, arch, state, warning}); C(state) is
        C(installed), C(built) or C(added) (C(kernel) null).
      type: list
      elements: dict
      returned: always
    lxc:
      description: Every container config in O(wanted.lxc_config_dir), each C({vmid, path, onboot,
        gpu, allowed_majors, stale_majors, missing_majors}); C(stale_majors) are allowed
        character majors C(/proc/devices) does not register any more.
      type: list
      elements: dict
      returned: always
    nvidia_smi:
      description:
        - The audit's one C(nvidia-smi -q -x), parsed - C(available), C(source) (C(command),
          C(capture) or null), C(seconds) (the command's time on a live host), C(error) (why
          it is not available - not installed, its exit code and message, no stored copy),
          C(driver_version), C(cuda_version) and C(gpus).
        - Each GPU - C(address) (sysfs form C(0000:bb:dd.f)), C(name), C(memory_total_mib),
          C(architecture), C(serial), C(uuid), C(vbios), C(persistence_mode) (bool), C(mig_mode),
          C(performance_state), C(ecc_mode), C(ecc_mode_pending), C(ecc_volatile_correctable),
          C(ecc_volatile_uncorrectable), C(ecc_aggregate_correctable),
          C(ecc_aggregate_uncorrectable), C(sram_threshold_exceeded), C(retired_pages_sbe),
          C(retired_pages_dbe), C(retired_pages_pending), C(remapped_rows_correctable),
          C(remapped_rows_uncorrectable), C(remapped_rows_pending), C(remapped_rows_failure),
          C(clock_reasons_active) and C(clock_reasons_read) (short names such as
          C(sw_power_cap)), C(clock_event_counters_us) (microseconds per reason since the
          driver loaded, 535 and later, else null), C(temperature_c),
          C(temperature_margin_c) (T.Limit, the degrees left to the slowdown limit),
          C(memory_temperature_c), C(recovery_action) (C(<gpu_recovery_action>) - None, Reset,
          Reboot, Drain P2P, Drain and Reset), C(power) C({limit_w, default_limit_w,
          max_limit_w, draw_w, management}), C(fabric_state), C(fabric_status), C(memory_used_mib)
          (C(fb_memory_usage/used)), C(minor) (C(/dev/nvidiaN)), C(processes) (each
          C({pid, type, name, used_mib})). N/A and missing elements are null.
      type: dict
      returned: always
    kernel_log:
      description:
        - The audit's one kernel-log read, reduced to XID and SXID lines - C(available),
          C(source) (C(journal) or C(kern.log)), C(read_at), C(window_days), C(seconds),
          C(error), C(boot_time) (C(btime) of C(/proc/stat)), C(lines) (events read) and
          C(devices).
        - Each device - C(address) (a GPU, or an NVSwitch for C(kind) C(sxid)), C(kind),
          C(events), C(worst) and C(codes), each C({code, class, description, count, first,
          last, message, before_boot}) with C(class) one of C(none), C(restart_app),
          C(unknown), C(reset_gpu), C(reboot), C(hardware) (NVIDIA's catalogue's immediate
          action; a reset or reboot class seen 3 times or more in the window is
          C(hardware)).
      type: dict
      returned: always
    fabric_manager:
      description: C(nvswitches) (PCI addresses of class 0680 NVIDIA functions), C(needed),
        C(unit_active) (systemd's C(/run/systemd/units/invocation:nvidia-fabricmanager.service)),
        C(unit_enabled), C(package) and C(version) (dpkg status), C(driver_version),
        C(gpu_states) (each GPU's fabric state and status from nvidia-smi).
      type: dict
      returned: always
    device_nodes:
      description:
        - C({available, error, source, containers, units}). C(containers) - each container
          binding NVIDIA nodes, C({vmid, onboot, nesting, groups_source, groups_note,
          nodes}); each node C({path, how, optional, folder, options, kind, major, minor,
          driver, majors, char_link}) and, for a C(devN:) entry with C(gid=), C(gid) and
          C(group) (its name in the container's C(/etc/group), null when absent).
          C(kind) is C(c), C(b), C(f), C(d), C(l) or C(missing).
        - The nodes come from the live C(/dev) (read before C(nvidia-smi) runs, which
          creates some), or from the stored listing C(/.gpuhost-capture/dev-nodes) of a
          capture; C(available) is false without either.
        - C(units) - service units and udev rules that create NVIDIA nodes, C({name, path,
          before_guests, enabled, creates}).
      type: dict
      returned: always
    nvlink:
      description:
        - C({checked, reason, available, error, gpus}). C(checked) - whether
          C(nvidia-smi nvlink -s) and C(-e) were asked (a live host, each bounded by a
          timeout) or read from a capture, only with 2 or more GPUs in C(-q -x) and
          NVSwitch functions on the bus, a fabric state, or an NVLink GPU model; C(reason)
          says why or why not.
        - C(gpus) - per GPU C({address, index, name, links, active, inactive, gbs, errors}),
          C(gbs) the active links' speeds added (GB/s per direction), C(errors) the
          non-zero error counters, by link and counter name.
      type: dict
      returned: always
    containers_nvidia:
      description: For each GPU container C({vmid, rootfs, path, version, library, note}) -
        the NVIDIA user-space driver version from C(libcuda.so.1)'s link in the container's
        root file system when the host can read it (ZFS subvolume, directory storage),
        else null with the reason in C(note).
      type: list
      elements: dict
      returned: always
    pcie_aer:
      description:
        - PCIe AER counters since boot of every GPU and every bridge above one, each
          C({address, role, port_type, gpus, below, available, fatal, nonfatal,
          correctable, rootport_total}); C(role) is C(gpu) or C(bridge); each kind is
          C({total, counters}) (C(counters) maps the kernel's names, C(BadTLP), C(CmpltTO),
          ..., to counts) or null without C(aer_dev_*) files; C(rootport_total) maps
          C(correctable), C(fatal), C(nonfatal) to the root port's totals (root ports only).
        - Kept raw so that two audits compare (a report shows the change since the last).
      type: list
      elements: dict
      returned: always
    p2p:
      description:
        - Peer-to-peer readiness. C(gpu_count) (GPUs on the nvidia driver), C(iommu_groups)
          (whether the kernel made IOMMU groups), C(cmdline) (the IOMMU and ACS parameters
          of C(/proc/cmdline)), C(gpus) (each C({address, driver, numa_node, iommu_group,
          iommu_type, translated, bar1_index, bar1_bytes}); C(iommu_type) as
          C(/sys/kernel/iommu_groups/N/type) says, C(bar1_bytes) the largest BAR, the
          memory aperture), C(bridges) (every bridge between two of them, each
          C({address, port_type, gpus, turns_at, turnaround, acs, error}); C(acs) is
          C({offset, capability, control, enabled, p2p_redirect}) read from config space,
          or null without the capability).
      type: dict
      returned: always
    host_health:
      description:
        - The host's own health from the same kernel-log read (its host-health lines are
          kept with the XID ones) and EDAC - C(available) (a kernel log was read),
          C(window_days), C(read_at), C(boots) (C(Linux version) lines, one per boot),
          C(events), C(lost_gpus) and C(edac).
        - C(events) maps each class (C(hardware_error), C(lockup), C(oops), C(oom),
          C(nvme), C(fs_readonly)) to C({count, first, last, samples, subjects}) over the
          window; C(subjects) maps an OOM kill's memory cgroup owner (C(lxc/<vmid>) or
          C(host)), an NVMe controller or a block device to C({count, tasks});
          C(hardware_error) also has C(severities) (the CPER severities reported).
        - C(lost_gpus) - each GPU the log says fell off the bus, C({address, text (lines
          without an XID), xid (XID 79 lines), boots (the boots it happened in), last}).
        - C(edac) - each C(/sys/devices/system/edac/mc/mc*) as C({controller, name,
          ce_count, ue_count, dimms}), C(dimms) the DIMMs with a count.
      type: dict
      returned: always
    gpu_count:
      description: NVIDIA GPUs on the PCI bus against the driver's - C(bus) (the host's,
        bound to nvidia), C(bus_all) (any owner), C(bus_gpus), C(driver) (how many the
        driver lists, null when it cannot be read), C(driver_source) (C(nvidia-smi) or
        C(/proc/driver/nvidia/gpus)), C(missing) (on the bus, not in the driver),
        C(expected) (O(wanted.gpu_count)), C(lost_text) (C(host_health.lost_gpus)), C(boots).
      type: dict
      returned: always
    gpu_processes:
      description: For each GPU of nvidia-smi C({address, index, memory_used_mib, mig_mode,
        processes, bound}); each process C({pid, type, name, used_mib, container, how}),
        C(container) the LXC container its C(/proc/<pid>/cgroup) names (null - the host's),
        C(bound) the containers whose config passes in that GPU's C(/dev/nvidiaN).
      type: list
      elements: dict
      returned: always
    gpu_recovery:
      description: For each GPU of nvidia-smi or the kernel log C({address, need,
        driver_action, evidence, holders}) - C(need) one of C(none), C(drain_p2p),
        C(reset), C(drain_and_reset), C(reboot); C(driver_action) nvidia-smi's
        C(<gpu_recovery_action>) text (null before 550 or for a GPU it does not list);
        C(holders) C({containers, vms, processes}).
      type: list
      elements: dict
      returned: always
    gpu_placement:
      description:
        - C(nodes) (NUMA node -> CPU list) and C(containers), one per container config that
          passes in a C(/dev/nvidiaN), each C({vmid, path, minors, gpus, gpu_nodes, cores,
          cpuset_key, cpuset_cpus, cpu_nodes, cpuset_mems, mem_nodes}); C(gpus) maps each
          minor to its PCI address (C(/proc/driver/nvidia/gpus/*/information)) and node.
      type: dict
      returned: always
    errors:
      description:
        - Readers that failed unexpectedly, each C({section, error}).
        - Section C(files) names a host file that was not read, with what it is (a FIFO, a
          socket, a device where a regular file belongs, or a file over the cap of its
          read); C(kernel_log) says what a bounded kernel-log read left out (lines over
          64 KiB, what lies beyond 32 MiB of kern.log and its rotations read newest first,
          journal messages beyond the newest 50,000) and how many lines were skipped
          because their time stamp could not be read (the other lines still count).
      type: list
      elements: dict
      returned: always
    findings:
      description:
        - Ranked worst first (severity, then a fixed order with C(pcie_mrrs)
          first among the high ones, then subject).
        - Each C({id, severity, subject, current, expected, remedy, reboot_required}) and
          sometimes C(detail). C(severity) is one of C(critical), C(high), C(medium),
          C(low), C(info).
        - "C(dkms_missing_for_kernel) critical: the kernel that boots next (subject) lacks
          an installed build of a DKMS module the running kernel has."
        - "C(pcie_mrrs) high: one per GPU and per upstream bridge (subject: PCI address)
          below O(wanted.mrrs_size)."
        - "C(pcie_link_degraded) high: current link width or speed below the maximum; low
          when an nvidia-driven GPU idles at 2.5 GT/s (its power-saving state)."
        - "C(gpu_no_driver) high: a GPU with no driver bound."
        - "C(numa_balancing) high: C(kernel.numa_balancing) off its wanted value."
        - "C(cpuidle_deep_state) high: subject names the state (C(C2)) still enabled on
          some CPU while deeper than O(wanted.cpuidle_deeper_than)."
        - "C(lxc_stale_majors) high: subject C(lxc <vmid>); allowed majors no longer
          registered. C(lxc_gpu_majors_missing) high: a GPU container lacks the current
          major of a driver of O(wanted.lxc_gpu_drivers). C(lxc_onboot) low: GPU container not
          started on boot. C(lxc_stale_majors) never counts C(devN:) entries (they name a
          path, not a major). C(lxc_cgroup_v1_keys) high: a GPU container's device rule only
          under a cgroup v1 key (C(lxc.cgroup.devices.allow)), which LXC ignores on a host
          booted with the unified hierarchy (the default since Proxmox VE 7, the only one VE 9's
          systemd boots unforced), so the GPUs are denied; low for other C(lxc.cgroup.*) lines
          there (dead settings); not raised when the running kernel's command line has
          C(systemd.unified_cgroup_hierarchy=0)."
        - "C(lxc_device_node_missing) high: subject C(lxc <vmid> <node>); a node a GPU
          container binds (C(lxc.mount.entry) under C(/dev/nvidia), any C(devN:) path) is
          not on the host (a C(devN:) entry stops the start). C(lxc_device_node_major)
          high: it is not a character device, or its major is not its driver's in
          C(/proc/devices). C(lxc_dev_gid_unknown) medium: a C(devN:) C(gid=) that the
          container's own C(/etc/group) lacks (not checked, said in the column's note,
          when its root file system cannot be read from the host).
          C(device_nodes_unit_missing) medium: subject C(pve-guests.service); containers
          started at boot bind C(nvidia-uvm), C(nvidia-modeset) or C(nvidiaN) and no
          enabled unit ordered C(Before=pve-guests.service) (nor a udev rule) creates them
          (tune part C(device_nodes)). C(lxc_dev_char_links_missing) medium: a
          C(features: nesting=1) container's NVIDIA nodes lack their
          C(/dev/char/<major>:<minor>) links."
        - "C(gpu_peer_bandwidth_low) high: subject C(<from> -> <to>) (bus ids); a peer copy
          of the CUDA pass below the model's C(peer_gbs) pass mark where the pair's path
          (NVLink, else the slower GPU's PCIe link) can carry it, else below
          O(wanted.bandwidth_min_pct) of that path; a pair without peer access is no finding."
        - "C(gpu_compute_low) and C(gpu_memory_bandwidth_low) high: subject the GPU's bus id;
          its ceiling (O(cuda_ceiling)) - FP32/BF16/FP8 TFLOPS, the device-to-device copy
          rate - more than O(wanted.ceiling_spread_pct) below the node's best GPU of the same
          model and probe path, or below O(wanted.ceiling_min_pct) of the model table's
          healthy figure of that path; a kernel or copy whose result was wrong is the same
          finding, saying so. The detail holds nvidia-smi's power limit, clock-event reasons
          and temperature of that GPU."
        - "C(nvlink_inactive) high: subject the GPU's address; links C(nvidia-smi nvlink -s)
          shows inactive (all of them after XID 149). C(nvlink_errors) medium for non-zero
          CRC or replay error counters of C(nvidia-smi nvlink -e), high for recovery errors
          or failed recoveries (counters count since the driver loaded)."
        - "C(kernel_headers_missing) high for the next-boot kernel, medium for the running
          one (only when DKMS modules exist)."
        - "C(cpufreq_driver) medium: acpi-cpufreq where amd-pstate (AMD) or intel_pstate
          is possible."
        - "C(sysctl) medium or low: one per key off its wanted value (C(net.core.rmem_max)
          and C(wmem_max) count as right when larger)."
        - "C(nvidia_uvm_hmm) medium: nvidia_uvm loaded without uvm_disable_hmm=1, or not
          loaded and not configured in modprobe.d."
        - "C(reboot_pending) medium: subject C(kernel) (a newer or pinned kernel will boot)
          or C(cmdline) (configured parameters not running)."
        - "C(boot_param) low: a wanted boot parameter missing from the configured command
          line (CPU-specific ones only on matching bare-metal CPUs)."
        - "C(nvidia_peermem_unavailable) info: ib_core absent, so GPUDirect RDMA does not
          apply (not a problem). C(nvidia_peermem_not_loaded) low when ib_core is there."
        - "C(pcie_unreadable) info: config space not readable (not root)."
        - "C(audit_error) medium: a reader failed; subject is the fact section."
        - "C(gpu_xid_events): one per GPU with XID events in the window (subject: its
          address); severity by the worst class - hardware critical, reset the GPU or
          reboot high, not in the catalogue medium, restart the application low, nothing to
          do info; a reset or reboot asked for only before this boot low.
          C(nvswitch_sxid_events): the same per NVSwitch (fatal SXID high)."
        - "C(gpu_recovery_needed): one per GPU that needs a reset, a drain or a reboot (the
          driver's C(<gpu_recovery_action>) where it gives one, else the XID events since
          this boot; a pending row remap), naming the evidence and the GPU's holders
          (containers, VMs, host processes); critical for a reboot, high otherwise."
        - "C(gpu_slowdown_since_load): clock event counters since the driver loaded non-zero
          for a hardware reason (thermal slowdown, power brake) medium, for the software
          thermal limit alone low. C(gpu_thermal_margin_low): the T.Limit margin below
          O(wanted.thermal_margin_min_c) medium, at or past the limit high."
        - "C(gpu_row_remap_failed) critical, C(gpu_row_remap_pending) high (a GPU reset or
          reboot applies it), C(gpu_ecc_uncorrectable) high since the driver loaded, medium
          for lifetime counts only, C(gpu_ecc_pending) medium (ECC mode changes at the next
          reset), C(gpu_retired_pages) high when pending, critical at 60 retired pages, low
          below."
        - "C(gpu_persistence_off) medium, C(gpu_clock_throttle) by reason (hardware slowdown
          high, software thermal medium, power cap low, sync boost info; idle and
          application clocks are no finding), C(gpu_power_capped) medium (limit below the
          default)."
        - "C(fabric_manager) (NVSwitch hosts): not installed, another version than the
          driver's, fabric not Completed or the service down high; not enabled medium."
        - "C(fleet_drift) is found by M(gpuhost.tuning.audit_report) across the hosts of a
          run (medium; high for a container's user space against its host's module);
          C(host_audit) shows its column as n/a."
        - "C(pcie_aer_errors) high for fatal or non-fatal (uncorrectable) AER errors on a
          GPU or a bridge above one (subject: its address), medium for 100 or more
          correctable ones, low for fewer; a root port's totals beyond what the devices
          below it count themselves are reported on the root port."
        - "C(p2p_iommu_translated) high (2 or more GPUs): GPUs in translated IOMMU domains
          (C(DMA), C(DMA-FQ)); subject C(iommu). The remedy (C(iommu=pt)) and its
          trade-off (host devices lose DMA isolation) are in the finding."
        - "C(p2p_acs_redirect) medium, high when the IOMMU translates too: ACS request or
          completion redirect (or egress control) on a switch port between GPUs, so P2P
          goes up through the root complex; subject the port. ACS is read, never written."
        - "C(gpu_bar1_small) medium: a GPU's memory aperture (largest BAR) smaller than its
          memory when the driver reports that, else 256 MiB or less."
        - "C(gpu_numa_mismatch) high: a GPU container's C(lxc.cgroup2.cpuset.cpus) has no
          CPU on its GPUs' nodes; medium when some of it (or its C(cpuset.mems)) is off
          them. Subject C(lxc <vmid>)."
        - "C(gpu_container_unpinned) medium: a GPU container with C(cores:) and no cpuset
          (pvestatd moves it), low with neither; only when its GPUs sit on some nodes."
      type: list
      elements: dict
      returned: always
      sample: [{"id": "pcie_mrrs", "severity": "high", "subject": "0000:01:00.0",
                "current": "512 bytes", "expected": "4096 bytes",
                "remedy": "setpci -s 0000:01:00.0 CAP_EXP+8.w=5000:7000 (now); ...",
                "reboot_required": false}]
    checks:
      description: Per check (matrix column of the reports) C({label, status, count,
        note}); C(status) is the worst severity of its findings, C(ok) or C(n/a).
      type: dict
      returned: always
    collected_at:
      description: UTC time the audit started (ISO 8601).
      type: str
      returned: always
    duration_s:
      description: Seconds the audit took on the host.
      type: float
      returned: always
    root:
      description: The O(root) audited, or the O(capture) tarball.
      type: str
      returned: always
worst:
  description: Severity of the worst finding, or C(none).
  returned: always
  type: str
  sample: critical
counts:
  description: Number of findings per severity.
  returned: always
  type: dict
  sample: {"critical": 1, "high": 21, "medium": 6, "low": 9, "info": 1}
headline:
  description: One line with the worst severity and the counts.
  returned: always
  type: str
  sample: "worst critical: 1 critical, 21 high, 6 medium, 9 low, 1 info"
lines:
  description: The ranked findings as readable log lines (same id and values grouped).
  returned: always
  type: list
  elements: str
  sample: ["HIGH     pcie_mrrs x16 [0000:00:01.1, ...]: 512 bytes (want 4096 bytes). Fix: ..."]
files_read:
  description: Every path (host-absolute) read, listed or checked, with how
    (C(read), C(list), C(stat)); only with O(record_files).
  returned: when O(record_files) is true
  type: dict
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before ansible's and the collection's imports: each file compiled once

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    fail,
    int_range,
)

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import cmdout  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import text  # noqa: E402

# Every wanted value of 0.1 was a top-level option before option wanted: kept until 0.3.0.
# A wanted value added since (thermal_margin_min_c) is option wanted's only.
PER_KEY = ("acknowledged", "bandwidth_min_pct", "boot_params", "copy_rate_marks",
           "cpufreq_drivers_wanted", "cpuidle_deeper_than", "gpu_classes", "gpu_count",
           "gpu_vendor", "host", "lxc_config_dir", "lxc_gpu_drivers", "mrrs_size",
           "nvidia_uvm_disable_hmm", "nvidia_uvm_modprobe_file", "sysctl", "xid_policy",
           "xid_window_days")


def argument_spec():
    spec = dict(root=dict(type="path", default="/"), wanted=facts.wanted_option())
    spec.update(facts.per_key_spec(PER_KEY))
    spec["cuda"] = dict(type="list", elements="dict")
    spec["cuda_probe"] = dict(type="bool", default=False)
    spec["cuda_ceiling"] = dict(type="bool", default=False)
    spec["cuda_ceiling_cublas"] = dict(type="bool", default=False)
    spec["cuda_size_mb"] = dict(type="int", default=256)
    spec["cuda_timeout"] = dict(type="int", default=30)
    spec["record_files"] = dict(type="bool", default=False)
    spec["capture"] = dict(type="path")
    return spec


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p, skip=("cuda",))   # probe results carry the driver's own messages
    if p.get("capture") and ((p.get("root") or "/") != "/" or p.get("cuda_probe")):
        fail("capture", p["capture"], "a capture tarball audited instead of root, so root "
             "stays / and cuda_probe off (got root %s%s)" % (
                 p.get("root"), ", cuda_probe true" if p.get("cuda_probe") else ""))
    if p.get("capture") and not p["capture"].startswith("/"):
        fail("capture", p["capture"], "an absolute path of the tarball (e.g. $PWD/%s)"
             % p["capture"])
    if p.get("cuda_ceiling_cublas") and not p.get("cuda_ceiling"):
        fail("cuda_ceiling_cublas", p["cuda_ceiling_cublas"], "false unless cuda_ceiling is "
             "true (the GEMM is part of the ceiling)")
    if p.get("cuda_ceiling") and not p.get("cuda_probe"):
        fail("cuda_ceiling", p["cuda_ceiling"], "false unless cuda_probe is true (the "
             "ceiling is measured in the CUDA pass)")
    int_range("cuda_size_mb", p.get("cuda_size_mb"), 1, 65536)
    int_range("cuda_timeout", p.get("cuda_timeout"), 1, 3600)
    if not isinstance(p.get("cuda") or [], list) or \
            not all(isinstance(item, dict) for item in p.get("cuda") or []):
        fail("cuda", p.get("cuda"), "a list of cuda_probe results")
    return facts.wanted_values(p, PER_KEY)   # the run takes them as checked here


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    held = check_module(module, "host_audit", rules)
    with held:
        _run(module, held.checked)


def _run(module, wanted):
    params = module.params
    facts.per_key_used(params, PER_KEY, _deprecate(module))
    if wanted["xid_window_days"] < 1:
        module.fail_json(msg="host_audit: xid_window_days must be 1 or more (days of kernel "
                             "log to count XID events over), got %s" % wanted["xid_window_days"])
    if params["cuda_probe"] and (params["root"] != "/" or params["cuda"] is not None):
        module.fail_json(msg="host_audit: cuda_probe runs CUDA on the live host: it needs root "
                             "/ and no cuda results given (got root %s)" % params["root"])
    scratch = None
    if params["capture"]:
        # imported only for a capture: one module less to compile on every live audit
        from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import capture_unpack

        try:
            scratch, _count = capture_unpack.unpack(params["capture"])
        except capture_unpack.UnpackError as exc:
            module.fail_json(msg="host_audit: %s" % exc)
        params["root"] = scratch
    try:
        out = _audit(module, params, wanted)
    finally:
        if scratch is not None:
            capture_unpack.remove_scratch(scratch)
    if scratch is not None:
        out["audit"]["root"] = params["capture"]
    module.exit_json(**out)


def _deprecate(module):
    def deprecate(text):
        module.deprecate(text, version=facts.PER_KEY_REMOVED_IN,
                         collection_name="gpuhost.tuning")
    return deprecate


def _audit(module, params, wanted):
    recorder = None
    if params["record_files"]:
        # imported only for host_capture's list: one module less to compile on every audit
        from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import (
            host_capture,
        )

        recorder = host_capture.ReadRecorder(params["root"])
    runner = Runner(module)
    outputs = cmdout.CommandOutputs(params["root"], runner)
    probe = None
    if params["cuda_probe"]:
        # imported only for the opt-in pass: one module less to compile on every other audit
        from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cuda import cuda

        def probe(facts):
            return cuda.audit_pass(runner, module.get_bin_path("pct"), facts.get("lxc"),
                                   params["cuda_size_mb"], timeout=params["cuda_timeout"],
                                   ceiling=params["cuda_ceiling"],
                                   ceiling_cublas=params["cuda_ceiling_cublas"])
    result = audit.audit(params["root"], wanted, recorder=recorder, outputs=outputs,
                         cuda=params["cuda"], cuda_probe=probe)
    counts, worst = text.summary(result["findings"])
    out = dict(changed=False, audit=result, counts=counts, worst=worst,
               lines=text.text_lines(result["findings"]),
               headline=text.headline(result["findings"]))
    if recorder is not None:
        out["files_read"] = recorder.paths
    return out


if __name__ == "__main__":
    main()
