"""Role common's shared options are validated by the roles that depend on it, once per host.

ansible-core adds one argument check per host for every role of a play that has a spec for
its entry point, dependencies included. Common's options therefore live under the entry point
``shared`` (no check of their own) and scripts/role-specs.py copies them into every entry
point of each dependent role.
"""

import os
import shutil
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


def test_the_part_switches_are_the_registry_s():
    """Each tune part's switch in role tune (spec, default, vars) is written from the part."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry

    options = _spec("tune")["main"]["options"]
    with open(os.path.join(REPO, "roles", "tune", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(REPO, "roles", "tune", "vars", "main.yml")) as handle:
        switches = yaml.safe_load(handle)["__gpuhost_tune_switches"]
    assert list(switches) == list(tune_registry.PARTS)
    for name, default_on, doc in tune_registry.switches():
        assert options[tune_registry.switch(name)] == {
            "type": "bool", "default": default_on,
            "description": [doc] if isinstance(doc, str) else list(doc)}, name
        assert defaults[tune_registry.switch(name)] is default_on
        assert switches[name] == "{{ %s }}" % tune_registry.switch(name)


ADD_A_PART = '''

class HugepagesPart(object):
    """A throwaway part (the worked example of docs/architecture.md)."""

    name = "hugepages"
    owns = ()
    steps = ("hugepages",)
    stage = "tune"
    options = {}
    default_on = False
    files = ("/etc/sysctl.d/98-gpuhost-hugepages.conf",)
    role_doc = "Opt-in (tag C(tune_hugepages)). Reserve huge pages."

    def run(self, ctx):
        return {}

    def not_run(self, ctx, status):
        return {}


TUNE_PART = HugepagesPart()
'''


def _tree(top):
    out = {}
    for folder in ("plugins", "roles", "scripts"):
        for base, _dirs, names in os.walk(os.path.join(top, folder)):
            for name in names:
                if not name.endswith(".pyc"):
                    with open(os.path.join(base, name), "rb") as handle:
                        out[os.path.relpath(os.path.join(base, name), top)] = handle.read()
    return out


def test_adding_a_part_touches_the_files_architecture_md_says(tmp_path):
    """The worked example: a part is one object in its subject's file and one registry line;
    scripts/role-specs.py writes host_tune's DOCUMENTATION (``parts``, the part's options),
    tuning_snapshot's (the default of ``files``: the part writes a file) and its switch into
    role tune's three files: 7 files."""
    copy = tmp_path / "ansible_collections" / "gpuhost" / "tuning"
    for folder in ("plugins", "roles", "scripts"):
        shutil.copytree(os.path.join(REPO, folder), str(copy / folder),
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = _tree(str(copy))
    with open(str(copy / "plugins/module_utils/subjects/peermem/peermem_part.py"), "a") as handle:
        handle.write(ADD_A_PART.replace("TUNE_PART =", "HUGEPAGES_PART ="))
    reg = copy / "plugins/module_utils/engines/tune/tune_registry.py"
    text = reg.read_text()
    assert text.count("    placement_write.TUNE_PART,\n") == 1
    reg.write_text(text.replace(
        "    placement_write.TUNE_PART,\n",
        "    placement_write.TUNE_PART,\n    peermem_part.HUGEPAGES_PART,\n"))
    proc = subprocess.run([sys.executable, str(copy / "scripts" / "role-specs.py")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    after = _tree(str(copy))
    touched = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert touched == ["plugins/module_utils/engines/tune/tune_registry.py",
                       "plugins/module_utils/subjects/peermem/peermem_part.py",
                       "plugins/modules/host_tune.py",
                       "plugins/modules/tuning_snapshot.py",  # its files default
                       "roles/tune/defaults/main.yml", "roles/tune/meta/argument_specs.yml",
                       "roles/tune/vars/main.yml"]
    doc = after["plugins/modules/host_tune.py"].decode().split('DOCUMENTATION = r"""', 1)[1]
    doc = yaml.safe_load(doc.split('"""')[0])
    assert "hugepages" in doc["options"]["parts"]["choices"]
    assert "hugepages" not in doc["options"]["parts"]["default"]  # default_on False
    switches = yaml.safe_load(after["roles/tune/vars/main.yml"])["__gpuhost_tune_switches"]
    assert switches["hugepages"] == "{{ gpuhost_tune_hugepages }}"
    snap = after["plugins/modules/tuning_snapshot.py"].decode().split('DOCUMENTATION = r"""', 1)
    snap = yaml.safe_load(snap[1].split('"""')[0])
    assert "/etc/sysctl.d/98-gpuhost-hugepages.conf" in snap["options"]["files"]["default"]
    with open(os.path.join(REPO, "docs", "architecture.md")) as handle:
        assert "Adding a part touches %d files" % len(touched) in handle.read()


def test_host_tune_documents_each_part_option_as_the_part_does():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry

    with open(os.path.join(REPO, "plugins", "modules", "host_tune.py")) as handle:
        doc = yaml.safe_load(handle.read().split('DOCUMENTATION = r"""', 1)[1].split('"""')[0])
    for name, spec, description in tune_registry.options():
        assert doc["options"][name]["description"] == description, name
        assert doc["options"][name].get("default") == spec.get("default"), name
    assert doc["options"]["parts"]["choices"] == list(tune_registry.PARTS)
