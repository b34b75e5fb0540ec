"""gpuuse: which container a GPU process belongs to, from its ``/proc/<pid>/cgroup``
lines (cgroup v2 ``0::/lxc/<vmid>/...`` and the ``lxc.payload.<vmid>`` form; moved from
test_host_health.py)."""


import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import gpu_use


@pytest.mark.parametrize("text, want", [
    ("0::/lxc/129/ns/system.slice/sglang.service", "129"),  # Proxmox, cgroup2
    ("0::/lxc.payload.129/init.scope", "129"),  # LXC 4+
    ("12:devices:/lxc/131/ns\n0::/lxc/131/ns/init.scope", "131"),  # hybrid, v1 first
    ("0::/lxc.monitor/129", None),  # the container's monitor runs on the host
    ("0::/process_api/e9f34180c56b1101f3190413158d597f", None),  # the real H200's process
    ("0::/user.slice/user-0.slice/session-3.scope", None),
])
def test_cgroup_lines_name_the_container(text, want):
    assert gpu_use.cgroup_container(text) == want
