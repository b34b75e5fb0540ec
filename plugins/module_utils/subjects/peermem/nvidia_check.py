# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Column NVIDIA: nvidia_uvm's HMM setting, nvidia_peermem."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import sysinfo
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.findings import (
    PLAYBOOK_REBOOT,
    check,
    column,
    found,
    limit,
)


def _applies(facts, wanted):
    nv = facts.get("nvidia") or {}
    nv_dkms = [e for e in facts.get("dkms") or [] if e["name"].startswith("nvidia")]
    if not facts.get("gpus") and not nv.get("modules_loaded") and not nv_dkms:
        return "no NVIDIA driver"
    return None


COLUMN = column("nvidia", "NVIDIA", position=100, applies=_applies)


def _uvm_hmm_remedy(kern, host, modprobe_file):
    """uvm_disable_hmm is read when nvidia_uvm loads, and the initramfs carries its own copy
    of /etc/modprobe.d: the fix is the option file, a refreshed initramfs for every kernel
    that may boot (the next one included), then a reboot. Role tune does not do this; role
    boot_config (run by the reboot_verify playbook) does."""
    targets = kernels.initramfs_kernels(kern.get("installed"), kern.get("running"),
                                        kern.get("next_boot"))
    refresh = " && ".join("update-initramfs -u -k %s" % k for k in targets) or \
        "update-initramfs -u -k all"
    return ("echo 'options nvidia_uvm uvm_disable_hmm=1' > %s && %s, then reboot (the option "
            "is read only when nvidia_uvm loads); or ansible-playbook %s%s (role boot_config "
            "writes the option and refreshes the initramfs of %s; add "
            "-e gpuhost_reboot_verify_reboot=true to reboot)" % (
                modprobe_file, refresh, PLAYBOOK_REBOOT, limit(host),
                ", ".join(targets) or "the installed kernels"))


@check("nvidia_uvm_hmm", COLUMN, severity="medium", order=120)
def nvidia_uvm_hmm(facts, wanted):
    """nvidia_uvm loaded without uvm_disable_hmm=1, or not loaded and not configured."""
    if not wanted.get("nvidia_uvm_disable_hmm"):
        return
    nv = facts.get("nvidia") or {}
    loaded = nv.get("modules_loaded") or []
    remedy = _uvm_hmm_remedy(
        facts.get("kernel") or {}, wanted.get("host"),
        wanted.get("nvidia_uvm_modprobe_file") or sysinfo.UVM_MODPROBE_FILE)
    if "nvidia_uvm" in loaded and nv.get("uvm_disable_hmm") is not True:
        yield found(
            "nvidia_uvm", "uvm_disable_hmm=%s" % (nv.get("uvm_disable_hmm_raw") or "unset"),
            "uvm_disable_hmm=1 (CUDA init can fail with error 3 on HMM kernels)",
            remedy, reboot_required=True)
    elif "nvidia_uvm" not in loaded and nv.get("uvm_disable_hmm_configured") is not True:
        yield found(
            "modprobe.d", "no options nvidia_uvm uvm_disable_hmm=1",
            "uvm_disable_hmm=1 set in /etc/modprobe.d", remedy, reboot_required=True)


def _ib_core(facts):
    return (facts.get("nvidia") or {}).get("ib_core") or {}


@check("nvidia_peermem_not_loaded", COLUMN, severity="low", order=170)
def nvidia_peermem_not_loaded(facts, wanted):
    ib = _ib_core(facts)
    peer = (facts.get("nvidia") or {}).get("nvidia_peermem") or {}
    if (ib.get("loaded") or ib.get("available")) and not peer.get("loaded"):
        yield found(
            "nvidia_peermem",
            "not loaded (ib_core %s)" % ("loaded" if ib.get("loaded") else "available"),
            "loaded, for GPUDirect RDMA over InfiniBand/RoCE",
            "modprobe nvidia_peermem && echo nvidia_peermem > /etc/modules-load.d/"
            "nvidia-peermem.conf")


@check("nvidia_peermem_unavailable", COLUMN, severity="info", order=180)
def nvidia_peermem_unavailable(facts, wanted):
    """Not a problem on a PCIe-only host: peermem needs ib_core."""
    ib = _ib_core(facts)
    if not ib.get("loaded") and not ib.get("available"):
        yield found(
            "nvidia_peermem", "not loaded; ib_core absent",
            "nothing: GPUDirect RDMA needs InfiniBand",
            "none needed: without an InfiniBand stack (ib_core) nvidia_peermem cannot load "
            "and does not apply")
