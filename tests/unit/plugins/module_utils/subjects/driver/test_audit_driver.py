"""audit_driver: the driver subject's declaration: the user-space driver is looked for
only in the GPU containers (container 129 of the seed host, whose storage the host does not
define), and the driver drift fleet check."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import (
    audit_driver,
    driver_drift,
)


def test_only_gpu_containers_are_looked_into(tmp_path):
    hosts.seed_host(tmp_path)
    lxc = [{"vmid": 129, "gpu": True}, {"vmid": 130, "gpu": False}]
    got, errors = declared_facts(audit_driver, tmp_path, known={"lxc": lxc})
    assert errors == [] and [c["vmid"] for c in got["containers_nvidia"]] == [129]
    assert "not in /etc/pve/storage.cfg" in got["containers_nvidia"][0]["note"]
    assert declared_facts(audit_driver, tmp_path, known={"lxc": lxc[1:]})[0] == {
        "containers_nvidia": []}
    assert audit_driver.FLEET_CHECKS == (driver_drift,)
