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


# role_argument_errors: the playbooks' one-step check of a role's variables for every host.
class HostVars(dict):
    """Like the play's hostvars: host name -> that host's variables."""


def test_good_values_of_every_host_pass_and_role_defaults_are_good():
    import yaml

    with open(os.path.join(REPO, "roles", "tune", "defaults", "main.yml")) as handle:
        defaults = {k: v for k, v in yaml.safe_load(handle).items() if k.startswith("gpuhost_")}
    hostvars = HostVars(gpu1=dict(defaults), gpu2={"gpuhost_mrrs_size": 4096, "unrelated": 1})
    assert uv.role_argument_errors(["gpu1", "gpu2"], "tune", hostvars) == []
    for role in ("audit", "tune", "reboot_verify", "driver_upgrade", "gpu_recover"):
        assert uv.role_argument_errors(["gpu2"], role, hostvars) == [], role


def test_each_error_names_its_host_and_variable_in_host_order():
    hostvars = HostVars(gpu1={"gpuhost_mrrs_size": "huge"}, gpu2={},
                        gpu3={"gpuhost_tune_mrrs_method": "poke", "gpuhost_tune_pcie": "maybe"})
    errors = uv.role_argument_errors(["gpu3", "gpu1", "gpu2"], "tune", hostvars)
    # gpu1's value is neither an int nor one of the choices: two errors, as ansible-core says
    assert [e.split(":")[0] for e in errors] == ["gpu3", "gpu3", "gpu1", "gpu1"]
    assert any("gpuhost_tune_mrrs_method" in e and "poke" in e for e in errors)
    assert any("gpuhost_tune_pcie" in e for e in errors)
    assert "gpuhost_mrrs_size" in errors[2]


def test_the_same_errors_as_ansible_cores_own_role_check():
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    spec = uv.role_spec("tune")
    values = {"gpuhost_mrrs_size": "huge", "gpuhost_tune_mrrs_method": "poke"}
    want = ArgumentSpecValidator(spec).validate(values).error_messages
    got = uv.role_argument_errors(["h"], "tune", HostVars(h=values))
    assert got == ["h: " + message for message in want] and len(got) == 3


def test_a_value_that_cannot_be_read_is_an_error_of_that_host():
    class Broken(dict):
        def __getitem__(self, key):
            raise ValueError("'nope' is undefined")

    errors = uv.role_argument_errors(["h"], "tune", HostVars(h=Broken(gpuhost_root="x")))
    assert errors == ["h: gpuhost_root: 'nope' is undefined"]


@pytest.mark.parametrize("role, entry", [("nosuch", "main"), ("../tune", "main"),
                                         ("tune", "nosuch")])
def test_an_unknown_role_or_entry_point_is_refused(role, entry):
    with pytest.raises(AnsibleFilterError):
        uv.role_argument_errors(["h"], role, HostVars(h={}), entry_point=entry)
    with pytest.raises(AnsibleFilterError):
        uv.role_argument_errors("h", "tune", HostVars(h={}))
