"""audit_host: the host subject's declaration: what the host is (read first), the character
device majors of /proc/devices and the first of each name."""

from auditcase import declared_facts
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import audit_host


def test_the_seed_host_is_a_proxmox_node_with_its_majors(tmp_path):
    hosts.seed_host(tmp_path)
    got, errors = declared_facts(audit_host, tmp_path)
    assert errors == [] and list(got) == ["virt", "char_majors", "char_devices"]
    assert got["virt"]["kind"] == "proxmox_node" and got["virt"]["guest"] is False
    assert got["char_devices"]["drm"] == 226
    # nvidia-caps may hold two majors: the fact keeps both, char_devices the first
    assert got["char_devices"]["nvidia-caps"] == got["char_majors"]["nvidia-caps"][0]


def test_char_devices_keep_the_first_major_and_drop_empty_names():
    assert audit_host.char_device_facts({"nvidia-caps": [237, 238], "none": []}) == {
        "nvidia-caps": 237}


def test_a_root_without_proc_devices_says_so_and_goes_on(tmp_path):
    got, errors = declared_facts(audit_host, tmp_path)
    assert [e["section"] for e in errors] == ["char_devices"]
    assert "proc/devices is missing" in errors[0]["error"]
    assert got["char_majors"] == {} and got["char_devices"] == {}
    assert got["virt"]["guest"] in (None, False)
