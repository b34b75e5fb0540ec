"""Role common's shared options are validated by the roles that depend on it, once per host.

ansible-core adds one argument check per host for every role of a play that has a spec for
its entry point, dependencies included. Common's options therefore live under the entry point
``shared`` (no check of their own) and scripts/role-specs.py copies them into every entry
point of each dependent role.
"""

import os
import subprocess
import sys

import yaml
from conftest import REPO

DEPENDENTS = ("audit", "boot_config", "kernel_upgrade", "reboot_verify", "tune")


def _spec(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]


def test_the_copies_are_up_to_date():
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "role-specs.py"),
                           "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_common_adds_no_check_and_every_entry_point_validates_the_shared_options():
    common = _spec("common")
    assert "main" not in common  # a main spec would be a second check on every host
    shared = common["shared"]["options"]
    for role in DEPENDENTS:
        for entry, spec in _spec(role).items():
            options = spec.get("options") or {}
            for name, definition in shared.items():
                assert options.get(name) == definition, (role, entry, name)
