"""audit_peermem: the peermem subject's declaration: the NVIDIA kernel modules of the seed
host (590.48.01 loaded, nvidia_uvm without uvm_disable_hmm, nvidia_peermem available but
not loaded), read with the running kernel the boot subject read before."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import sysinfo
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.peermem import audit_peermem


def test_the_seed_hosts_nvidia_modules(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_peermem, tmp_path,
                                 known={"kernel": {"running": hosts.SEED_RUNNING}})
    nvidia = got["nvidia"]
    assert errors == [] and nvidia["driver_version"] == hosts.SEED_NVIDIA
    assert "nvidia_uvm" in nvidia["modules_loaded"] and nvidia["uvm_disable_hmm"] is False
    assert nvidia["nvidia_peermem"] == {"loaded": False, "available": True}


def test_without_a_running_kernel_module_availability_is_unknown_not_an_error(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_peermem, tmp_path)
    assert errors == [] and got["nvidia"]["driver_version"] == hosts.SEED_NVIDIA
    assert audit_peermem.WANTED["nvidia_uvm_modprobe_file"]["default"] == \
        sysinfo.UVM_MODPROBE_FILE
