#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_tune
short_description: The whole runtime tune pass of a GPU host in one module call
version_added: "0.1.0"
description:
  - Pairs with M(gpuhost.tuning.host_audit) - one round trip to the host does everything
    role C(gpuhost.tuning.tune) does, in this order - audit the host (read-only); record
    a snapshot of everything managed (M(gpuhost.tuning.tuning_snapshot), kind C(before));
    apply and persist the sysctls (M(gpuhost.tuning.sysctl_settings)); disable the idle
    states deeper than O(wanted.cpuidle_deeper_than) (M(gpuhost.tuning.cpuidle_state)), only when
    that state exists on the host, else reported as not applicable; set the PCIe Max Read
    Request Size (M(gpuhost.tuning.setpci_maxreadreq)); install the boot-time re-apply
    service (M(gpuhost.tuning.boot_service)); handle C(nvidia_peermem); pin misplaced GPU
    containers to their GPUs' NUMA nodes (C(numa_pin), opt-in); record the applied state
    (only when something changed); audit again (only when something changed, not in check
    mode) and list the managed findings that remain.
  - Each part calls the same code as its own module, with the same results.
  - A failed snapshot stops the pass before anything is changed. Any other part that fails
    is recorded and the others are still tried; the module then fails, listing in
    RV(failures) every part that did not take and every managed finding that remains
    (C(pcie_mrrs), C(numa_balancing), C(cpuidle_deep_state), C(sysctl),
    C(gpu_numa_mismatch), C(gpu_container_unpinned) of the parts that ran; sysctl keys the
    kernel did not let it set are skipped, not failures, and so are containers C(numa_pin)
    was told to leave or refused, which are failures of their own), with the full result
    attached.
  - "C(nvidia_peermem): with O(nvidia_peermem=auto) it is loaded (C(modprobe), now) and
    listed in C(/etc/modules-load.d/gpuhost-nvidia-peermem.conf) (at boot) only where
    C(ib_core) is available; on a PCIe-only host it is reported as not applicable (loading
    it fails there with Invalid argument: GPUDirect RDMA does not apply). Already loaded: only
    the boot file. O(nvidia_peermem=load) always tries; O(nvidia_peermem=skip) leaves it
    alone."
  - "C(device_nodes) (opt-in: not in the default O(parts)): installs and enables
    C(/etc/systemd/system/gpuhost-nvidia-device-nodes.service), a oneshot unit ordered
    C(Before=pve-guests.service) running C(nvidia-modprobe -u -c=0) (nvidia-uvm),
    C(nvidia-modprobe -m) (nvidia-modeset) and C(nvidia-smi -L) (the GPU nodes), each
    allowed to fail, so containers that start at boot find the nodes they bind (finding
    C(device_nodes_unit_missing)). Written atomically and read back; on the live host
    followed by C(systemctl daemon-reload) and C(systemctl start) of the unit (bounded in
    time). Both files are in the snapshot, so a revert removes them."
  - "C(numa_pin) (opt-in: not in the default O(parts)): for each GPU container the audit
    finds misplaced (C(gpu_numa_mismatch), C(gpu_container_unpinned); only those in
    O(numa_pin_vmids) when given), sets C(lxc.cgroup2.cpuset.cpus) to the CPUs of its GPUs'
    NUMA nodes and C(lxc.cgroup2.cpuset.mems) to those nodes in the live section of its
    config in O(wanted.lxc_config_dir) (before the first C([section]) line; pending and snapshot
    sections and every other byte kept; written atomically, read back). It is applied at
    the container's next start: a running container keeps its old cpuset until then,
    which its report row says. A container already on its GPUs' nodes is left alone."
  - "C(numa_pin) changes a container's cpuset lines only when the snapshot a revert to the
    original uses for it holds them as they are now (C(original.json); for a container it
    does not hold, the oldest later before-snapshot that does, which with C(snapshot) in
    O(parts) is at the latest the one this run takes). A revert
    (M(gpuhost.tuning.tuning_snapshot) with C(state=restore)) then puts them back byte for
    byte. Lines set after that snapshot are the operator's, and a container no snapshot
    holds (no C(snapshot) part) is refused.
    It also refuses a container with a cpuset key on several live lines or a cgroup v1
    C(lxc.cgroup.cpuset.*) key (the message says what to fix), and a VMID in
    O(numa_pin_vmids) without a config or without a GPU (then nothing is written)."
  - With O(root) other than C(/), values are written under that root and the commands that
    only make sense on the live host (C(systemctl), C(modprobe)) are reported as skipped.
  - "C(bandwidth), off unless listed in O(parts): pinned host-to-device and device-to-host
    copy rates of every GPU through the CUDA driver library (as M(gpuhost.tuning.cuda_probe)
    measures them), once after the snapshot and before any change, and again after the
    changes; one row per GPU and direction, C(before -> after) in GB/s with the share of
    that GPU's PCIe link, status C(higher), C(lower) or C(same) (within 2 %). A lower rate
    is a warning, not a failure. It measures only on the live host (O(root) C(/)); under
    another root, without the driver library (O(cuda_library)) and in check mode its row
    says so and nothing is measured. A CUDA error (C(cuInit), a copy) fails the part with
    the code, its name and the usual cause."
  - "C(latency), off unless listed in O(parts) and switchable apart from C(bandwidth): the
    round trip of an empty kernel launch plus synchronise on every GPU (as
    M(gpuhost.tuning.cuda_probe) measures it with C(latency)), O(latency_count) times back
    to back and O(latency_count) times with the thread sleeping O(latency_gap_us) before each
    launch, once before any change and again after verify; two rows per GPU (after a sleep,
    back to back), C(before -> after) as p50 and p99 in microseconds, status C(better),
    C(worse) or C(same) by the median (within 10 % or 2 us; the note gives the p50 and p99
    changes: one preempted round trip moves a p99, every woken core the median), and the
    note names the parts that ran between the two measurements and whether each changed
    the host, so a change is attributed to what changed. Slower is a warning, not a
    failure; live host only, as for C(bandwidth)."
  - The wanted values come whole in O(wanted) (role C(gpuhost.tuning.common) composes
    them); the audits before and after judge all of them, as role audit does. The per-key
    options O(host), O(mrrs_size), O(cpuidle_deeper_than), O(sysctl), O(gpu_vendor),
    O(gpu_classes) and O(lxc_config_dir) are deprecated and stop working in 0.3.0.
extends_documentation_fragment:
  - gpuhost.tuning.wanted
  - gpuhost.tuning.gpu_selection
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  root:
    description: Root under which every host path is read and written (C(/) on a live host).
    type: path
    default: /
  host:
    description: Deprecated, use O(wanted.host) - host name for the result and the failure
      message (the inventory name).
    type: str
  mrrs_size:
    description: Deprecated, use O(wanted.mrrs_size).
    type: int
    default: 4096
    choices: [128, 256, 512, 1024, 2048, 4096]
  mrrs_include_upstream:
    description: Also set the bridges between each GPU and its root complex.
    type: bool
    default: true
  guest:
    description:
      - What to do on a host the audit reads as a container or a VM guest, or whose kind it
        cannot read (fact C(virt)), decided after the read-only audit and before any part
        runs. V(refuse) fails the task naming what the host is, nothing changed;
        V(warn) tunes it with a warning saying so; V(allow) tunes it.
      - Role C(tune) passes V(refuse), or V(warn) with C(gpuhost_allow_guest), in place of
        a module round trip of its own.
    type: str
    choices: [allow, warn, refuse]
    default: allow
  planned_changes:
    description:
      - The change set a saved plan holds for this host (its entry's C(changes) in the plan of
        playbook C(gpuhost.tuning.plan); role C(apply) passes it). Outside check mode,
        host_tune first makes its check-mode pass inside its run lock and refuses the host,
        changing nothing, when that pass is not exactly this change set (RV(plan_moved)
        names what moved); so nothing can move between the apply's comparison and the
        change. Unset, no such pass is made.
    type: list
    elements: dict
  cpuidle_deeper_than:
    description: Deprecated, use O(wanted.cpuidle_deeper_than).
    type: str
    default: C1
  sysctl:
    description: Deprecated, use O(wanted.sysctl) (applied and persisted).
    type: dict
    default: {}
  lxc_config_dir:
    description: Deprecated, use O(wanted.lxc_config_dir) - folder of the Proxmox container
      configs (under O(root)) that the audit reads, the snapshot records the GPU containers'
      cpuset lines of and C(numa_pin) edits.
    type: path
    default: /etc/pve/lxc
  # >>> tune part options, written by scripts/role-specs.py from the tune part registry
  parts:
    description:
      - The parts to run. C(snapshot) also records the applied state; C(verify) audits again
        afterwards and fails on managed findings that remain. C(bandwidth), C(latency),
        C(ceiling), C(device_nodes) and C(numa_pin) are opt-in (not in the default).
      - Role C(gpuhost.tuning.tune) builds this from its C(gpuhost_tune_*) switches and
        tags.
    type: list
    elements: str
    default: [snapshot, sysctl, cpuidle, pcie, boot_service, nvidia_peermem, verify]
    choices: [snapshot, bandwidth, latency, ceiling, sysctl, cpuidle, pcie, boot_service,
      nvidia_peermem, device_nodes, numa_pin, verify]
  snapshot_dir:
    description: Folder of the snapshots on the host (under O(root)).
    type: path
    default: /var/lib/gpuhost
  bandwidth_size_mb:
    description: Size of each copy of the C(bandwidth) part, in MiB (1 to 65536); each GPU
      needs this much free memory plus 64 MiB, or it is skipped with the reason.
    type: int
    default: 256
  bandwidth_repeats:
    description: Copies per direction of the C(bandwidth) part (1 to 1000); the best counts.
    type: int
    default: 5
  bandwidth_timeout:
    description: Seconds each measurement of the C(bandwidth) part may take to initialise
      CUDA and list the GPUs (1 to 3600); the copies get the time they take at 1 GB/s on
      top. The measurement runs in a child process, killed at its limit; one that did not
      return (or that a signal killed) fails the part naming the limit and the step.
    type: int
    default: 30
  cuda_library:
    description: The CUDA driver library the C(bandwidth) and C(latency) parts load (a name
      on the library path or a file path).
    type: str
    default: libcuda.so.1
  latency_count:
    description: Round trips per mode (after a sleep, back to back) of the C(latency) part
      (1 to 100000), after a warm-up of a tenth as many.
    type: int
    default: 200
  latency_gap_us:
    description: How long the C(latency) part's thread sleeps before each launch of the
      "after a sleep" mode, in microseconds (0 to 1000000); 1 ms is longer than the target
      residency of every idle state an EPYC offers, so a core that may enter them does.
    type: int
    default: 1000
  ceiling_seconds:
    description: About how long each part of the C(ceiling) measurement (memory, FP32, BF16,
      FP8) runs per GPU, its timed runs together (0.1 to 60 s).
    type: float
    default: 1.0
  ceiling_mb:
    description: Size of each buffer of the C(ceiling) part's device-to-device copy, in MiB
      (64 to 65536); two are taken per GPU, less where less memory is free.
    type: int
    default: 1024
  sysctl_at_least:
    description:
      - Keys where a larger current value counts as right and is kept (live and in the
        file). The default is the collection's rule, the one the audit judges by - the
        socket buffer sizes and ceilings; V([]) makes every key exact.
    type: list
    elements: str
    default: [net.core.rmem_max, net.core.wmem_max, net.core.rmem_default,
      net.core.wmem_default]
  sysctl_file:
    description: The sysctl.d file owned by the pass (it holds exactly O(wanted.sysctl)).
    type: path
    default: /etc/sysctl.d/99-gpuhost-tuning.conf
  mrrs_method:
    description: How MRRS is written now (the boot service always uses sysfs).
    type: str
    default: sysfs
    choices: [sysfs, setpci]
  boot_service_start:
    description: On a live host, start the boot service now (restart it after a change).
    type: bool
    default: true
  nvidia_peermem:
    description: What to do with C(nvidia_peermem) (see the description).
    type: str
    default: auto
    choices: [auto, load, skip]
  numa_pin_vmids:
    description: With C(numa_pin), pin only these containers (others are reported as
      skipped); each must have a config with a C(/dev/nvidiaN). Default all GPU containers.
    type: list
    elements: int
  # <<< end of the tune part options
notes:
  - Check mode plans every part and writes nothing (no snapshot, no file, no sysfs or procfs
    write, no command other than read-only C(systemctl is-active)); the applied snapshot and
    the verify audit are not taken (RV(verified) is false); the C(bandwidth) part measures
    nothing.
  - Needs root (C(become)) on a live host.
seealso:
  - module: gpuhost.tuning.host_audit
  - module: gpuhost.tuning.tune_report
  - module: gpuhost.tuning.tuning_snapshot
"""

EXAMPLES = r"""
- name: Tune the host in one module call (the tune role's main path)
  gpuhost.tuning.host_tune:
    wanted:
      host: "{{ inventory_hostname }}"
      sysctl:
        kernel.numa_balancing: "0"
        net.core.rmem_max: "16777216"
  register: tuned
  ignore_errors: true  # write the report first, then fail the host

- name: Pin the misplaced GPU containers to their GPUs' NUMA nodes (opt-in part)
  gpuhost.tuning.host_tune:
    parts: [snapshot, numa_pin, verify]
    numa_pin_vmids: [131, 132]

- name: Only the sysctls and the idle states, no boot service, no verify
  gpuhost.tuning.host_tune:
    parts: [snapshot, sysctl, cpuidle]
    wanted: {sysctl: {vm.swappiness: "10"}}
"""

RETURN = r"""
plan_moved:
  description:
    - With O(planned_changes), outside check mode, when the host's change set now is not the
      planned one - the lines naming what moved (C(state moved since the plan -
      kernel.numa_balancing is now 0 (planned 1 -> 0))). The task fails and nothing was
      changed.
  returned: when refused for it
  type: list
  elements: str
changed:
  description: Whether any part changed the host (planned changes in check mode).
  returned: always
  type: bool
host:
  description: O(wanted.host).
  returned: always
  type: str
root:
  description: O(root).
  returned: always
  type: str
check_mode:
  description: Whether this was a check-mode run (planned, nothing changed).
  returned: always
  type: bool
parts_on:
  description: The parts that were switched on, in the order they run.
  returned: always
  type: list
  elements: str
  sample: [snapshot, sysctl, cpuidle, pcie, boot_service, nvidia_peermem, verify]
parts:
  description:
    - Each part's own result, keyed by step - C(snapshot_before) and C(snapshot_applied)
      (as M(gpuhost.tuning.tuning_snapshot) returns), C(sysctl)
      (M(gpuhost.tuning.sysctl_settings)), C(cpuidle) (M(gpuhost.tuning.cpuidle_state)),
      C(pcie) (M(gpuhost.tuning.setpci_maxreadreq)), C(boot_service)
      (M(gpuhost.tuning.boot_service)), C(nvidia_peermem) (the C(modprobe)),
      C(modules_load_dir) and C(nvidia_peermem_at_boot) (the modules-load.d file),
      C(device_nodes) (C({changed, plan, diffs, commands, failed, msg})),
      C(numa_pin) (C({changed, containers, failed, diff, message}); per container
      C({vmid, path, before, after, changed, skipped_reason, error}), C(before)/C(after)
      its C({cpus, mems})), C(bandwidth_before) and C(bandwidth_after), C(latency_before)
      and C(latency_after) (as M(gpuhost.tuning.cuda_probe) returns, with C(error) and
      C(cause) when CUDA failed).
    - A step that did not run is absent; a failed step has C(failed) and C(msg). Diffs are
      moved to RV(diff).
  returned: always
  type: dict
  sample: {"sysctl": {"changed": true, "changed_keys": ["kernel.numa_balancing"]},
           "cpuidle": {"changed": true, "changed_count": 128}}
peermem:
  description: The C(nvidia_peermem) decision, C({action, status, reason}); C(action) is
    C(none), C(persist) or C(load).
  returned: when the nvidia_peermem part is on
  type: dict
  sample: {"action": "none", "status": "not applicable",
           "reason": "ib_core is not available (PCIe-only host): GPUDirect RDMA does not apply"}
rows:
  description: The before -> after table, one row per managed value (what the report shows).
  returned: always
  type: list
  elements: dict
  contains:
    part:
      description: C(sysctl), C(cpuidle), C(pcie), C(boot_service), C(nvidia_peermem),
        C(device_nodes), C(numa_pin), C(bandwidth) or C(latency).
      type: str
    item:
      description: The value (sysctl key, idle state, device and role, unit, C(lxc
        <vmid>); for C(bandwidth) the GPU's address and C(host->GPU) or C(GPU->host); for
        C(latency) the GPU's address and C(launch+sync after a 1000 us sleep) or
        C(launch+sync back to back)).
      type: str
    before:
      description: Value before (string, integer or null).
      type: raw
    after:
      description: Value after, read back (planned in check mode).
      type: raw
    status:
      description: C(ok), C(changed), C(skipped), C(failed), C(off), C(not applicable),
        C(not run), C(no GPU), C(loaded), C(planned); C(bandwidth) - C(higher), C(lower),
        C(same), C(measured), C(not measured); C(latency) - C(better), C(worse), C(same),
        C(measured), C(not measured).
      type: str
    note:
      description: Why (skip or failure reason, CPUs, commands run).
      type: str
  sample: [{"part": "pcie", "item": "0000:01:00.0 endpoint MRRS", "before": 512,
            "after": 4096, "status": "changed", "note": ""}]
failures:
  description: "Every part that did not take (C(part: why)), then every managed finding that
    remains (C(still off after tuning: id subject: current (want expected)))."
  returned: always
  type: list
  elements: str
findings_before:
  description: The managed findings (C(pcie_mrrs), C(numa_balancing), C(cpuidle_deep_state),
    C(sysctl), C(gpu_numa_mismatch), C(gpu_container_unpinned)) of the audit taken before,
    as M(gpuhost.tuning.host_audit) returns findings.
  returned: always
  type: list
  elements: dict
findings_after:
  description: Managed findings of the parts that ran that remain after tuning, minus sysctl
    keys the kernel did not let it set; empty when not verified.
  returned: always
  type: list
  elements: dict
verified:
  description: Whether RV(findings_after) comes from a verification (false in check mode
    and with C(verify) off).
  returned: always
  type: bool
audit_again:
  description: Whether the host was audited a second time (only when something changed; an
    unchanged host is still in the state the first audit read).
  returned: when verified
  type: bool
snapshot:
  description: The snapshot this run wrote (host path), or a note that the state is
    unchanged since the last recorded one.
  returned: always
  type: str
  sample: /var/lib/gpuhost/original.json
diff:
  description: Before/after of the files and values the parts changed (with C(--diff)).
  returned: when diff mode is on
  type: list
  elements: dict
msg:
  description: The host and every entry of RV(failures), when the module failed.
  returned: on failure
  type: str
"""

# Imports follow the documentation blocks (Ansible module layout), hence E402.
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before ansible's and the collection's imports: each file compiled once

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    fail,
    inside,
    non_empty_list,
    sysctl_key,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    non_empty_list("parts", p.get("parts"), "tune parts")
    for key in p.get("sysctl_at_least") or []:
        sysctl_key("sysctl_at_least", key)
    inside(p, "sysctl_file")
    tune.check_options(p)  # every registered tune part's own rules
    for index, change in enumerate(p.get("planned_changes") or []):
        if not isinstance(change, dict) or not all(k in change for k in changeset.CHANGE_KEYS):
            fail("planned_changes[%d]" % index, change, "a change of a saved plan: a mapping "
                 "with %s" % ", ".join(changeset.CHANGE_KEYS))
    return facts.wanted_values(p, tune.PER_KEY)   # the run takes them as checked here


def build_module():
    return AnsibleModule(argument_spec=tune.argument_spec(), supports_check_mode=True)


def main():
    module = build_module()
    held = check_module(module, "host_tune", rules)
    with held:
        _run(module, held.checked)


def _run(module, wanted):
    if module.params["planned_changes"] is not None and not module.check_mode:
        _refuse_moved(module, wanted)
    try:
        result = tune.tune_run(module.params, module.check_mode, Runner(module),
                               warn=module.warn, wanted=wanted)
    except (ValueError, OSError) as exc:
        module.fail_json(msg="%s: tune pass not started: %s" % (
            module.params["host"] or module.params["root"], exc))
    if not module._diff:
        result.pop("diff", None)
    msg = tune.tune_failure(result)
    if msg:
        module.fail_json(msg=msg, **result)
    module.exit_json(**result)


def _refuse_moved(module, wanted):
    """The saved plan's gate inside the run lock: the check-mode pass now against the
    planned change set; any difference (or a refusal of the pass) fails the task before
    anything is changed."""
    name = wanted["host"] or module.params["root"]
    try:
        now = tune.tune_run(module.params, True, Runner(module), wanted=wanted)
    except (ValueError, OSError) as exc:
        module.fail_json(msg="%s: tune pass not started: %s" % (name, exc))
    moved = changeset.difference(module.params["planned_changes"], now)
    refused = changeset.refusal(now)
    if refused or moved:
        module.fail_json(msg="%s: refused, nothing was changed: %s" % (
            name, refused or "; ".join(moved)), changed=False, plan_moved=moved or [refused])


if __name__ == "__main__":
    main()
