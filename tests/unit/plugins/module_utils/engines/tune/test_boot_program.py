"""bootapply: the boot-time re-apply program, against whole fixture hosts."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_program
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_service
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.pcie import setpci_maxreadreq
from fixtures import cpu as cpufix
from fixtures import hosts
from fixtures import pci as pcifix


def write_config(tmp_path, **kwargs):
    path = os.path.join(str(tmp_path), "boot.json")
    with open(path, "w") as handle:
        handle.write(boot_service.render_config(boot_service.make_config(**kwargs)))
    return path


def disable_flags(root, name):
    """{cpu: disable file text} for the state called ``name`` (found by name, not index)."""
    out = {}
    base = os.path.join(str(root), cpufix.CPU)
    for entry in os.listdir(base):
        folder = os.path.join(base, entry, "cpuidle")
        if not entry.startswith("cpu") or not os.path.isdir(folder):
            continue
        for state in os.listdir(folder):
            with open(os.path.join(folder, state, "name")) as handle:
                if handle.read().strip() != name:
                    continue
            with open(os.path.join(folder, state, "disable")) as handle:
                out[int(entry[3:])] = handle.read().strip()
    return out


@pytest.fixture
def seed(tmp_path):
    root = tmp_path / "host"
    built = pcifix.seed_gpus(str(root), mrrs=512)
    cpufix.epyc_cpus(str(root), threads=16, offline=(5,))
    return str(root), built


def test_sets_mrrs_on_gpus_and_root_ports_and_disables_c2(seed, tmp_path, capsys):
    root, built = seed
    config = write_config(tmp_path)
    assert boot_program.main(["--config", config, "--root", root]) == 0
    for addr in built["gpus"] + built["root_ports"]:
        assert pcifix.devctl_of(root, addr) & 0x7000 == 0x5000, addr
    # only bits 14:12 changed: the GPU's other Device Control bits kept
    gpu = built["gpus"][0]
    assert pcifix.devctl_of(root, gpu) & ~0x7000 == pcifix.devctl_value(512, 256, 0x0916) & ~0x7000
    # neither the HD-audio function nor the NVMe root port is touched
    assert pcifix.devctl_of(root, built["audio"][0]) & 0x7000 == 0x2000
    assert pcifix.devctl_of(root, built["nvme_root_port"]) & 0x7000 == 0x2000
    c2 = disable_flags(root, "C2")
    assert sorted(c2) == [c for c in range(16) if c != 5]
    assert set(c2.values()) == {"1"}
    assert set(disable_flags(root, "C1").values()) == {"0"}
    out = capsys.readouterr().out
    assert "gpuhost-tuning: MRRS %s (endpoint 10de:2bb5): 512 -> 4096 bytes" % gpu in out
    assert "C2 disabled now on CPUs 0-4,6-15" in out
    assert out.rstrip().endswith("done: settings applied and read back")
    # a second boot finds everything in place
    assert boot_program.main(["--config", config, "--root", root]) == 0
    out = capsys.readouterr().out
    assert "already 4096 bytes" in out and "already disabled on CPUs 0-4,6-15" in out


def test_device_dropping_the_write_exits_non_zero_naming_it(seed, tmp_path, capsys,
                                                            monkeypatch):
    root, built = seed
    stubborn = built["gpus"][3]
    real = setpci_maxreadreq._write_config

    def drop(path, offset, data):
        if stubborn in path:
            return  # the device ignores the write (QEMU keeps 128, a driver resets it)
        return real(path, offset, data)

    monkeypatch.setattr(setpci_maxreadreq, "_write_config", drop)
    status = boot_program.main(["--config", write_config(tmp_path), "--root", root])
    assert status == 1
    captured = capsys.readouterr()
    assert stubborn in captured.err and "FAILED" in captured.err
    assert "MRRS %s (endpoint 10de:2bb5): FAILED" % stubborn in captured.out
    # every other device still set, and the idle states too
    for addr in built["gpus"]:
        want = 0x2000 if addr == stubborn else 0x5000
        assert pcifix.devctl_of(root, addr) & 0x7000 == want
    assert set(disable_flags(root, "C2").values()) == {"1"}


def test_vm_without_cpuidle_is_fine(tmp_path, capsys):
    root = str(tmp_path / "vm")
    built = hosts.vm_host(root)
    status = boot_program.main(["--config", write_config(tmp_path), "--root", root])
    assert status == 0
    out = capsys.readouterr().out
    assert "cpuidle: no idle driver with states (no cpuidle folder): nothing to do" in out
    assert "MRRS %s (endpoint 10de:2335): already 4096 bytes" % built["gpu"] in out


def test_parts_switched_off(seed, tmp_path, capsys, snapshot_tree):
    root, _built = seed
    before = snapshot_tree(root)
    config = write_config(tmp_path, mrrs_size=None, cpuidle_deeper_than=None)
    assert boot_program.main(["--config", config, "--root", root]) == 0
    assert snapshot_tree(root) == before
    out = capsys.readouterr().out
    assert "MRRS: off in the config" in out and "cpuidle: off in the config" in out


def test_bad_or_missing_config_exits_2(tmp_path, capsys):
    assert boot_program.main(["--config", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"mrrs": {"size": 3000}, "cpuidle": None}))
    assert boot_program.main(["--config", str(path)]) == 2
    assert "mrrs.size" in capsys.readouterr().err


def test_make_config_validates_at_install_time():
    with pytest.raises(ValueError):
        boot_service.make_config(mrrs_size=1000)
    with pytest.raises(ValueError):
        boot_service.make_config(classes=["3"])
    conf = boot_service.make_config(vendor="0x10DE", classes=["0302"])
    assert conf["mrrs"] == {"size": 4096, "vendor": "10de", "classes": ["0302"],
                            "include_upstream": True}


def test_unit_has_the_ordering_and_runs_the_shipped_module():
    unit = boot_service.render_unit()
    lines = unit.splitlines()
    for line in ("Type=oneshot", "RemainAfterExit=yes", "After=nvidia-persistenced.service",
                 "Before=pve-guests.service", "WantedBy=multi-user.target",
                 "Environment=PYTHONPATH=/usr/local/lib/gpuhost-tuning",
                 "ExecStart=/usr/bin/python3 -m ansible_collections.gpuhost.tuning.plugins."
                 "module_utils.engines.tune.boot_program --config /etc/gpuhost-tuning/boot.json"):
        assert line in lines
    files = boot_service.library_files()
    prefix = "ansible_collections/gpuhost/tuning/plugins/module_utils/"
    for name in boot_service.shipped():
        here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(boot_program.__file__))), name)  # noqa: E501
        with open(here, "rb") as handle:
            assert files[prefix + name] == handle.read()
    assert prefix + "__init__.py" in files and "ansible_collections/__init__.py" in files


def test_a_deeply_nested_config_is_a_config_error(tmp_path):
    """bounded.json_loads: 100,000 "[" are a clear refusal, not a RecursionError."""
    path = tmp_path / "boot.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(boot_program.ConfigError, match="nested 100000 deep"):
        boot_program.load_config(str(path))
