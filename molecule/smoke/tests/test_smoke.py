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


def test_doubles_run_under_the_containers_python(host):
    """proxmox-boot-tool and pct doubles, installed by prepare, work on the image's kernel."""
    # podman exec runs as root already (the image has no sudo)
    none = host.run("proxmox-boot-tool status")
    assert none.rc == 2
    assert "E: /etc/kernel/proxmox-boot-uuids does not exist." in none.stderr
    kernels = [k[len("vmlinuz-"):] for k in host.run("ls /boot").stdout.split()
               if k.startswith("vmlinuz-")]
    host.run_expect([0], "echo 'root=/dev/sda1 ro quiet' > /etc/kernel/cmdline")
    host.run_expect([0], "proxmox-boot-tool init /dev/disk/by-uuid/5A3E-11C0")
    status = host.run_expect([0], "proxmox-boot-tool status")
    assert "5A3E-11C0 is configured with: uefi (versions: %s)" % ", ".join(sorted(kernels)) \
        in status.stdout
    entry = host.file("/var/lib/gpuhost-doubles/esp/5A3E-11C0/loader/entries/"
                      "proxmox-%s.conf" % kernels[0])
    assert "options  root=/dev/sda1 ro quiet\n" in entry.content_string
    host.run_expect([0], "mkdir -p /etc/pve/lxc && "
                    "printf 'arch: amd64\\nhostname: smoke\\n' > /etc/pve/lxc/129.conf")
    assert host.run_expect([0], "pct status 129").stdout == "status: stopped\n"
    assert host.run("pct status 999").rc == 2
    log = host.file("/var/log/gpuhost-doubles.jsonl").content_string
    assert '"argv": ["pct", "status", "999"]' in log
