"""bootservice: what module boot_service installs (the shipped library files read from the
collection itself, the boot config validated at install time, the unit with its
``ExecStart=`` words quoted as systemd.service(5) and systemd.syntax(7) read them) and
its ordering after pve-cluster when the host has it. The install and removal on trees:
tests/unit/plugins/modules/test_boot_service.py and test_bootapply.py."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import boot_service


def test_make_config_normalizes_and_turns_parts_off():
    config = boot_service.make_config(mrrs_size=4096, vendor="0x10DE", classes=["0x0300", "0302"],
                                      cpuidle_deeper_than="C1")
    assert config == {"mrrs": {"size": 4096, "vendor": "10de", "classes": ["0300", "0302"],
                               "include_upstream": True},
                      "cpuidle": {"deeper_than": "C1"}}
    assert boot_service.make_config(mrrs_size=None, cpuidle_deeper_than=None) == {"mrrs": None,
                                                                                  "cpuidle": None}
    assert json.loads(boot_service.render_config(config)) == config


def test_a_bad_size_fails_at_install_time_not_at_boot():
    with pytest.raises(ValueError, match="128, 256, 512, 1024, 2048 or 4096"):
        boot_service.make_config(mrrs_size=3000)


@pytest.mark.parametrize("word,want", [
    ("/usr/bin/python3", "/usr/bin/python3"),
    ("/opt/my python/bin/python3", '"/opt/my python/bin/python3"'),
    ("/opt/100%/py", '"/opt/100%%/py"'),      # a specifier doubled, then quoted
    ("/opt/$HOME/py", '"/opt/$$HOME/py"'),    # a variable doubled, then quoted
    ('/opt/a"b\\c', '"/opt/a\\"b\\\\c"'),
])
def test_exec_word(word, want):
    assert boot_service.exec_word(word) == want


def test_render_unit_orders_the_service_and_runs_the_program():
    text = boot_service.render_unit(wants=("pve-cluster.service",), after=("pve-cluster.service",))
    lines = text.splitlines()
    assert "Wants=pve-cluster.service" in lines and "After=pve-cluster.service" in lines
    assert "Before=pve-guests.service" in lines
    assert "ConditionPathExists=%s" % boot_service.CONFIG_PATH in lines
    assert "Environment=PYTHONPATH=%s" % boot_service.LIB_DIR in lines
    assert "ExecStart=%s" % boot_service.exec_start() in lines
    assert boot_service.exec_start().startswith("/usr/bin/python3 -m ")
    assert text.endswith("\n")
    assert "WantedBy=multi-user.target" in lines


def test_cluster_units_when_pve_cluster_is_installed(tmp_path):
    root = str(tmp_path)
    assert boot_service.cluster_units(root) == []
    path = os.path.join(root, "lib/systemd/system", boot_service.PVE_CLUSTER)
    os.makedirs(os.path.dirname(path))
    open(path, "w").close()
    assert boot_service.cluster_units(root) == [boot_service.PVE_CLUSTER]


def test_desired_files_hold_unit_config_and_library():
    files = boot_service.desired_files(boot_service.make_config(), boot_service.render_unit())
    assert files[boot_service.UNIT_PATH].startswith(b"# Installed by gpuhost.tuning")
    assert json.loads(files[boot_service.CONFIG_PATH].decode()) == boot_service.make_config()
    assert len([p for p in files if p.startswith(boot_service.LIB_DIR + "/")]) == len(boot_service.library_files())  # noqa: E501
