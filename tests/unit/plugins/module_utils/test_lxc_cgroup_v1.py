"""lxc_cgroup_v1_keys: ``lxc.cgroup.*`` lines in a container config, which LXC ignores on a
host booted with the unified cgroup hierarchy (liblxc cgfsng_setup_limits_legacy, LXC 4.0 to
6.0: "Ignoring legacy cgroup limits on pure cgroup2 system"; Debian's wiki LXC/CGroupV2).
Configs in pve-container's layout (tests/fixtures/lxc.py); the v1 lines are the form the
pre-cgroup2 Proxmox GPU guides wrote."""

import os

from fixtures import hosts
from fixtures import lxc as lxcfix

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit

V1_ONLY = "\n".join([
    "arch: amd64",
    "cores: 16",
    "hostname: llm-old-guide",
    "memory: 65536",
    "ostype: ubuntu",
    "rootfs: local-zfs:subvol-131-disk-0,size=64G",
    "lxc.cgroup.devices.allow: c 195:* rwm",
    "lxc.cgroup.devices.allow: c 509:* rwm",
    "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file",
    "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file",
    "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file",
]) + "\n"

BOTH = "\n".join([
    "arch: amd64",
    "hostname: llm-both-keys",
    "rootfs: local-zfs:subvol-132-disk-0,size=64G",
    "lxc.cgroup.devices.allow: c 195:* rwm",
    "lxc.cgroup2.devices.allow: c 195:* rwm",
    "lxc.cgroup2.devices.allow: c 509:* rwm",
    "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file",
]) + "\n"


def _host(tmp_path, cmdline=None):
    root = str(tmp_path)
    lxcfix.seed_host(root, era="after", config_era="after")
    lxcfix.write_config(root, 131, V1_ONLY)
    lxcfix.write_config(root, 132, BOTH)
    if cmdline is not None:
        os.makedirs(os.path.join(root, "proc"), exist_ok=True)
        with open(os.path.join(root, "proc", "cmdline"), "w") as handle:
            handle.write(cmdline + "\n")
    return root


def _found(result):
    return dict((f["subject"], f) for f in result["findings"] if f["id"] == "lxc_cgroup_v1_keys")


def test_v1_only_gpu_rules_are_high_and_v1_duplicates_low(tmp_path):
    result = audit.audit(_host(tmp_path), hosts.common_wanted())
    found = _found(result)
    assert set(found) == {"lxc 131", "lxc 132"}
    old = found["lxc 131"]
    assert old["severity"] == "high"
    assert "lxc.cgroup.devices.allow: c 195:* rwm" in old["current"]
    assert "pct stop 131" in old["remedy"] and "lxc.cgroup2." in old["remedy"]
    assert "/etc/pve/lxc/131.conf" in old["remedy"]
    # 132 has the same rules under lxc.cgroup2 too: dead lines, nothing lost
    assert found["lxc 132"]["severity"] == "low"
    facts = dict((c["vmid"], c) for c in result["lxc"])
    assert facts[131]["cgroup_v1_lines"] == [
        "lxc.cgroup.devices.allow: c 195:* rwm", "lxc.cgroup.devices.allow: c 509:* rwm"]
    # containers without v1 lines keep their facts as they were (no new key)
    assert "cgroup_v1_lines" not in facts[129] and "cgroup_v1_lines" not in facts[130]


def test_legacy_hierarchy_boot_applies_v1_keys(tmp_path):
    root = _host(tmp_path, cmdline="BOOT_IMAGE=/vmlinuz root=ZFS=rpool/ROOT/pve-1 "
                                   "systemd.unified_cgroup_hierarchy=0")
    assert _found(audit.audit(root, hosts.common_wanted())) == {}


def test_unified_hierarchy_named_on_the_command_line_still_fires(tmp_path):
    root = _host(tmp_path, cmdline="root=ZFS=rpool/ROOT/pve-1 systemd.unified_cgroup_hierarchy=1")
    assert set(_found(audit.audit(root, hosts.common_wanted()))) == {"lxc 131", "lxc 132"}


def test_seed_host_has_none(tmp_path):
    root = str(tmp_path)
    hosts.seed_host(root)
    assert _found(audit.audit(root, hosts.common_wanted())) == {}
