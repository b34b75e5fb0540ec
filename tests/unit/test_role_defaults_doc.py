"""ansible-doc -t role shows what the roles really do: each option's default as the role's
defaults/main.yml (role common's for the shared options) sets it, and no renamed old name
as if it were current (they live in the roles' renamed-variable maps only)."""

import glob
import json
import os
import subprocess

import yaml
from conftest import LINKS, REPO


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def _specs():
    for path in sorted(glob.glob(os.path.join(REPO, "roles/*/meta/argument_specs.yml"))):
        role = path.split(os.sep)[-3]
        for entry, spec in _load(path)["argument_specs"].items():
            yield role, entry, (spec or {}).get("options") or {}


def test_every_literal_default_is_the_spec_s_default():
    common = _load(os.path.join(REPO, "roles/common/defaults/main.yml"))
    wrong = []
    for role, entry, options in _specs():
        defaults = dict(common)
        path = os.path.join(REPO, "roles", role, "defaults", "main.yml")
        if role != "common" and os.path.exists(path):
            defaults.update(_load(path))
        for name, option in options.items():
            if name not in defaults or option.get("required"):
                continue  # a required option has no default to show
            value = defaults[name]
            if isinstance(value, str) and "{{" in value:
                continue  # templated: the description says what it comes to
            if option.get("default") != value and not (value is None and "default" not in option):
                wrong.append("%s %s %s: spec %r, defaults %r" % (
                    role, entry, name, option.get("default"), value))
    assert wrong == []


def test_no_renamed_name_is_documented_as_an_option():
    old = set()
    for path in glob.glob(os.path.join(REPO, "roles/*/vars/main.yml")):
        for key, value in _load(path).items():
            if key.endswith("_renamed") and isinstance(value, dict):
                old.update(value)
    assert old
    listed = [(role, entry, name) for role, entry, options in _specs() for name in options
              if name in old]
    assert listed == []


def test_ansible_doc_shows_the_sysctl_and_boot_parameter_defaults():
    # a checkout laid out as ansible_collections/gpuhost/tuning (the controller lane's copy)
    # is its own collection path: ansible-doc 2.22 lists no role of a collection reached
    # through the test's symlink (LINKS), 2.19 does
    parent = os.path.dirname(os.path.dirname(REPO))
    path = (os.path.dirname(parent) if os.path.basename(parent) == "ansible_collections"
            else LINKS)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=path,
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run([os.path.join(REPO, ".venv/bin/ansible-doc"), "--json", "-t", "role",
                           "gpuhost.tuning.tune"], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    options = json.loads(proc.stdout)["gpuhost.tuning.tune"]["entry_points"]["main"]["options"]
    assert len(options["gpuhost_sysctl"]["default"]) == 9
    assert options["gpuhost_sysctl"]["default"]["kernel.numa_balancing"] == "0"
    assert options["gpuhost_boot_params"]["default"] == {
        "amd_pstate": "active", "processor.max_cstate": "1", "nmi_watchdog": "0"}
    assert options["gpuhost_allow_guest"]["default"] is False
