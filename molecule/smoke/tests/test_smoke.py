"""Testinfra checks of the smoke container (run by `molecule verify`)."""

import os

import testinfra.utils.ansible_runner

# Straight `podman exec` (the podman backend): the ansible backend runs one ad-hoc Ansible
# call per command, about 20 times slower.
testinfra_hosts = [
    "podman://" + name
    for name in testinfra.utils.ansible_runner.AnsibleRunner(
        os.environ["MOLECULE_INVENTORY_FILE"]
    ).get_hosts("all")
]


def test_systemd_is_pid1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    assert state.stdout.strip() in ("running", "degraded"), state.stdout + state.stderr


def test_converge_left_its_marker(host):
    marker = host.file("/etc/gpuhost-smoke")
    assert marker.is_file
    assert marker.mode == 0o644
    assert marker.content_string == "distribution=Debian 12\n"


def test_old_kernel_is_installed_with_headers_and_initrd(host):
    """The image carries the "old" kernel the kernel scenarios start from."""
    kernels = host.run("ls /boot").stdout.split()
    olds = [k[len("vmlinuz-"):] for k in kernels if k.startswith("vmlinuz-")]
    assert olds, kernels
    for kver in olds:
        assert "initrd.img-" + kver in kernels
        assert host.file("/lib/modules/%s/build" % kver).exists
    assert host.exists("dkms")
