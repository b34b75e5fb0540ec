"""plugins/filter/unknown_variables.py: misspelled gpuhost_* variables, each named with the
nearest known one; the known names are the roles' argument specs and renamed-variable maps."""

import os

import pytest
from ansible.errors import AnsibleFilterError
from conftest import REPO

from ansible_collections.gpuhost.tuning.plugins.filter import unknown_variables as uv


def test_misspellings_from_the_first_hour_name_the_variable_meant():
    out = uv.unknown_variables(["gpuhost_tune_pcei", "gpuhost_audit_fail_onn",
                                "gpuhost_root", "ansible_host", "gpuhost_mrrs_size"])
    assert out == [
        {"name": "gpuhost_audit_fail_onn", "nearest": "gpuhost_audit_fail_on"},
        {"name": "gpuhost_tune_pcei", "nearest": "gpuhost_tune_pcie"}]


def test_every_name_the_collection_sets_or_reads_is_known():
    known = uv.known_names()
    # role options, common's shared ones, the part switches, the playbooks' own variables
    # and the facts the roles set (common's entry point play), the renamed old names
    for name in ("gpuhost_root", "gpuhost_allow_guest", "gpuhost_tune_pcie", "gpuhost_hosts",
                 "gpuhost_serial", "gpuhost_reboot_required", "gpuhost_driver_before",
                 "gpuhost_audit_lxc_config_dir", "gpuhost_reboot_timeout",
                 "gpuhost_reboot_verify_reboot"):
        assert name in known, name


def test_the_example_inventories_use_known_names_only():
    import yaml
    names = set()
    for folder, _dirs, files in os.walk(os.path.join(REPO, "inventories")):
        for name in files:
            with open(os.path.join(folder, name)) as handle:
                data = yaml.safe_load(handle) or {}
            if "hosts" in name or "plugin" in data:
                continue
            names.update(data)
    assert [n for n in names if n.startswith("gpuhost_")]
    assert uv.unknown_variables(sorted(names)) == []


def test_a_name_far_from_any_has_no_nearest():
    assert uv.unknown_variables(["gpuhost_zzzzzzzzzzzzzzzzzzzzzz"]) == [
        {"name": "gpuhost_zzzzzzzzzzzzzzzzzzzzzz", "nearest": None}]


def test_a_string_is_refused():
    with pytest.raises(AnsibleFilterError, match="a list of variable names"):
        uv.unknown_variables("gpuhost_root")


def test_known_names_come_from_the_specs_only(tmp_path):
    meta = tmp_path / "r1" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      gpuhost_alpha: {type: str}\n")
    variables = tmp_path / "r1" / "vars"
    variables.mkdir()
    (variables / "main.yml").write_text("__gpuhost_r1_renamed:\n  gpuhost_old: gpuhost_alpha\n")
    assert uv.known_names(str(tmp_path)) == {"gpuhost_alpha", "gpuhost_old"}
    assert uv.unknown_variables(["gpuhost_alpah", "gpuhost_old"], roles=str(tmp_path)) == [
        {"name": "gpuhost_alpah", "nearest": "gpuhost_alpha"}]
