"""drift (the container side of driver drift): Proxmox's ``storage.cfg`` (a SectionConfig,
pve-storage ``PVE/Storage/Plugin.pm``; the text of tests/fixtures/passthrough.py), where a
container's ``rootfs`` volume lies on the host, and the NVIDIA user-space version its
``libcuda.so.1`` link names. Container trees from tests/fixtures/driver.py. (The fleet
check of the same name is subjects/driver/driver_drift.py.)"""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import container_driver
from fixtures import driver as drv
from fixtures import passthrough as ptfix

CONFIGS = "/etc/pve/lxc"


def _storage(root, extra=""):
    path = os.path.join(root, container_driver.STORAGE_CFG.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(ptfix.STORAGE + extra)


def test_storages_read_each_section(tmp_path):
    root = str(tmp_path)
    _storage(root, "\n# a comment\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n")
    stores = container_driver.storages(root)
    assert stores["local"] == {"type": "dir", "path": "/var/lib/vz",
                               "content": "iso,vztmpl,backup,snippets"}
    assert stores["local-zfs"]["type"] == "zfspool" and stores["local-zfs"]["pool"] == \
        "rpool/data"
    assert stores["local-lvm"]["type"] == "lvmthin"
    assert container_driver.storages(str(tmp_path / "none")) == {}


@pytest.mark.parametrize("rootfs,want", [
    ("local-zfs:subvol-129-disk-0,size=100G", ("/rpool/data/subvol-129-disk-0", None)),
    ("local:129/subvol-129-disk-0.subvol,size=0T",
     ("/var/lib/vz/images/129/subvol-129-disk-0.subvol", None)),
    ("/srv/ct129", ("/srv/ct129", None)),
    ("local-lvm:vm-129-disk-0,size=32G",
     (None, "rootfs on lvmthin storage local-lvm is not readable from the host while "
            "stopped")),
    ("gone:subvol-1", (None, "storage gone not in /etc/pve/storage.cfg")),
    ("garbage", (None, "rootfs 'garbage' not understood")),
    (None, (None, "rootfs None not understood")),
])
def test_rootfs_path(rootfs, want):
    stores = {"local-zfs": {"type": "zfspool", "pool": "rpool/data"},
              "local": {"type": "dir", "path": "/var/lib/vz"},
              "local-lvm": {"type": "lvmthin"}}
    assert container_driver.rootfs_path(rootfs, stores) == want


def test_a_zfs_mountpoint_wins_over_the_pool_name():
    stores = {"tank": {"type": "zfspool", "pool": "tank/ct", "mountpoint": "/mnt/ct/"}}
    assert container_driver.rootfs_path("tank:subvol-1-disk-0", stores) == ("/mnt/ct/subvol-1-disk-0",  # noqa: E501
                                                                 None)


def test_container_facts_of_the_gpu_containers_only(tmp_path):
    root = str(tmp_path)
    _storage(root, "\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n")
    drv.ct_installed_deb(root, 129, version="580.95.05")
    drv.ct_none(root, 130)
    drv.ct_lvm(root, 131)
    drv.ct_installed_deb(root, 140, version="590.48.01")
    facts = dict((f["vmid"], f) for f in container_driver.container_facts(root, CONFIGS, [129, 130, 131]))  # noqa: E501
    assert sorted(facts) == [129, 130, 131]
    assert facts[129]["version"] == "580.95.05" and facts[129]["note"] is None
    assert facts[129]["library"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    assert facts[130]["version"] is None
    assert facts[130]["note"].startswith("no libcuda.so.1 under")
    assert facts[131]["path"] is None and "lvmthin" in facts[131]["note"]


def test_a_root_not_mounted_on_the_host_is_named(tmp_path):
    root = str(tmp_path)
    _storage(root)
    drv.container_config(root, 129, "local-zfs:subvol-129-disk-0,size=100G")
    (fact,) = container_driver.container_facts(root, CONFIGS, [129])
    assert fact["note"] == "/rpool/data/subvol-129-disk-0 not mounted on the host"
