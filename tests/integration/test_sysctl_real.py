"""Which sysctl files apply at boot, against the REAL systemd of both platforms (the
``suite`` fixture, tests/platforms.py): systemd 252 on this Debian 12 machine, systemd 257
inside the Debian 13 image. ``systemd-analyze --root=<tree> cat-config sysctl.d`` lists
the files systemd-sysctl applies, in order; sysctl_write.boot_files must list the same, on
host trees built in a temporary folder (never this machine's /etc).

Debian 12's procps ships /etc/sysctl.conf and the link /etc/sysctl.d/99-sysctl.conf to it;
Debian 13's ships neither (procps 2:4.0.4-7 removes an unmodified /etc/sysctl.conf on
upgrade: dpkg-maintscript-helper rm_conffile in its maintainer scripts), and its
systemd-sysctl, like every systemd-sysctl, never reads /etc/sysctl.conf by that name.
"""

import os
import shutil
import subprocess

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.sysctl import (
    sysctl_settings as sysctl_write,
)
from ansible_collections.gpuhost.tuning.plugins.modules import sysctl_settings
from modrun import run_module

pytestmark = [pytest.mark.integration]


def _systemd_order(root):
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze missing (Debian package systemd)"
    proc = subprocess.run([tool, "--root=%s" % root, "cat-config", "sysctl.d"],
                          capture_output=True, text=True, check=True, timeout=60,
                          env=dict(os.environ, SYSTEMD_PAGER="", LC_ALL="C.UTF-8"))
    prefix = "# " + root
    return [line[len(prefix):] for line in proc.stdout.splitlines() if line.startswith(prefix)]


def _write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


def _host(tmp_path, link):
    """A host tree as Debian's packages leave it: systemd's and procps' vendor files,
    an operator's /etc/sysctl.conf setting vm.swappiness, with or without the link."""
    root = str(tmp_path / "host")
    _write(root, "/usr/lib/sysctl.d/50-pid-max.conf", "kernel.pid_max = 4194304\n")
    _write(root, "/usr/lib/sysctl.d/99-zz-vendor.conf", "kernel.numa_balancing = 1\n")
    _write(root, "/etc/sysctl.d/README.sysctl", "sysctl.d(5)\n")
    _write(root, "/etc/sysctl.conf", "vm.swappiness = 60\n")
    if link:
        os.symlink("../sysctl.conf", os.path.join(root, "etc/sysctl.d/99-sysctl.conf"))
    _write(root, "/proc/sys/vm/swappiness", "60\n")
    _write(root, "/proc/sys/kernel/numa_balancing", "1\n")
    return root


@pytest.mark.parametrize("link", [True, False], ids=["debian12-link", "no-link"])
def test_boot_files_are_what_systemd_sysctl_reads(suite, tmp_path, link):
    root = _host(tmp_path, link)
    # gpuhost.tuning's own file, as sysctl_settings writes it
    _write(root, "/etc/sysctl.d/99-gpuhost-tuning.conf", "vm.swappiness = 10\n")
    assert [p for p, _name in sysctl_write.boot_files(root)] == _systemd_order(root)
    expected = ["/usr/lib/sysctl.d/50-pid-max.conf", "/etc/sysctl.d/99-gpuhost-tuning.conf"]
    expected += ["/etc/sysctl.d/99-sysctl.conf"] if link else []
    expected += ["/usr/lib/sysctl.d/99-zz-vendor.conf"]
    assert _systemd_order(root) == expected


@pytest.mark.parametrize("link", [True, False], ids=["debian12-link", "no-link"])
def test_overridden_at_boot_only_by_what_systemd_applies(suite, tmp_path, link):
    """The /etc/sysctl.conf a Debian 13 host has no link to (an operator's file, kept by an
    upgrade or written by hand) undoes nothing at boot: no failure there; through Debian 12's
    link it does, and the task fails naming the link."""
    root = _host(tmp_path, link)
    result = run_module(sysctl_settings, {"root": root, "values": {"vm.swappiness": 10},
                                          "at_least": []})
    overridden = [(o["key"], o["file"]) for o in result["overridden_at_boot"]]
    assert overridden == ([("vm.swappiness", "/etc/sysctl.d/99-sysctl.conf")] if link else [])
    assert bool(result.get("failed")) is link
    files = _systemd_order(root)
    assert ("/etc/sysctl.d/99-sysctl.conf" in files) is link
    assert "/etc/sysctl.conf" not in files
