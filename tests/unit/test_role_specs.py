"""Role common's shared options are validated by the roles that depend on it, once per host.

ansible-core adds one argument check per host for every role of a play that has a spec for
its entry point, dependencies included. Common's options therefore live under the entry point
``shared`` (no check of their own) and scripts/role-specs.py copies them into every entry
point of each dependent role.
"""

import json
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


def _host_tune_args():
    with open(os.path.join(REPO, "roles", "tune", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    return [t for t in tasks if "gpuhost.tuning.host_tune" in t][0]["gpuhost.tuning.host_tune"]


def test_the_part_options_are_the_registry_s():
    """Each part option with a role variable: its argument spec entry, default and line in
    the host_tune call are written from the part's declaration; the others the role does
    not pass."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry

    options = _spec("tune")["main"]["options"]
    with open(os.path.join(REPO, "roles", "tune", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    args = _host_tune_args()
    declared = tune_registry.role_options()
    assert declared  # the bandwidth and latency parts' options at least
    for var, name, option, doc in declared:
        assert options[var] == dict(option, description=doc), var
        assert defaults[var] == option.get("default"), var
        assert args[name] == "{{ omit if %s is none else %s }}" % (var, var), name
    assert "cuda_library" not in args  # declared without a role variable


def test_a_part_option_written_by_hand_is_refused(tmp_path):
    copy = tmp_path / "ansible_collections" / "gpuhost" / "tuning"
    for folder in ("plugins", "roles", "scripts"):
        shutil.copytree(os.path.join(REPO, folder), str(copy / folder),
                        ignore=shutil.ignore_patterns("__pycache__"))
    defaults = copy / "roles" / "tune" / "defaults" / "main.yml"
    defaults.write_text(defaults.read_text() + "gpuhost_tune_latency_count: 10\n")
    proc = subprocess.run([sys.executable, str(copy / "scripts" / "role-specs.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "gpuhost_tune_latency_count is written by hand in" in proc.stderr


ADD_A_PART = '''

class HugepagesPart(object):
    """A throwaway part (the worked example of docs/architecture.md)."""

    name = "hugepages"
    owns = ()
    steps = ("hugepages",)
    stage = "tune"
    options = dict(hugepages_count=dict(
        type="int", default=0, role_var="gpuhost_tune_hugepages_count",
        description="Huge pages the C(hugepages) part reserves (0 to 65536)."))
    default_on = False
    files = ("/etc/sysctl.d/98-gpuhost-hugepages.conf",)
    role_doc = "Opt-in (tag C(tune_hugepages)). Reserve gpuhost_tune_hugepages_count huge pages."

    @staticmethod
    def rules(p):
        validate.int_range("hugepages_count", p.get("hugepages_count"), 0, 65536)

    def run(self, ctx):
        return {}

    def not_run(self, ctx, status):
        return {}


HUGEPAGES_PART = HugepagesPart()
'''
IMPORT = "from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate\n"

# What the copy's registry makes of the part (its option, its rule) in a process of its own.
PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate
try:
    tune.check_options({"hugepages_count": -1})
    refused = None
except validate.ValidationError as exc:
    refused = str(exc)
print(json.dumps({"spec": tune.argument_spec()["hugepages_count"], "refused": refused}))
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
    """The worked example: a part with an option is one object (with the option's
    declaration and its rule) in its subject's file and one registry line; everything else
    is derived: host_tune's argument spec and rules at run time, and scripts/role-specs.py
    writes host_tune's DOCUMENTATION (``parts``, the option), tuning_snapshot's (the default
    of ``files``: the part writes a file), and into role tune the switch and the option's
    variable (argument spec, defaults), the switch's line in vars and the option's line in
    the host_tune call: 8 files, 2 by hand."""
    copy = tmp_path / "ansible_collections" / "gpuhost" / "tuning"
    for folder in ("plugins", "roles", "scripts"):
        shutil.copytree(os.path.join(REPO, folder), str(copy / folder),
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = _tree(str(copy))
    subject = copy / "plugins/module_utils/subjects/peermem/peermem_part.py"
    text = subject.read_text()
    assert text.count("\nimport os\n") == 1 and IMPORT not in text
    subject.write_text(text.replace("\nimport os\n", "\nimport os\n\n" + IMPORT, 1) + ADD_A_PART)
    reg = copy / "plugins/module_utils/engines/tune/tune_registry.py"
    text = reg.read_text()
    assert text.count("    placement_write.TUNE_PART,\n") == 1
    reg.write_text(text.replace(
        "    placement_write.TUNE_PART,\n",
        "    placement_write.TUNE_PART,\n    peermem_part.HUGEPAGES_PART,\n"))
    by_hand = _tree(str(copy))
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
                       "roles/tune/tasks/main.yml", "roles/tune/vars/main.yml"]
    assert sorted(p for p in by_hand if before.get(p) != by_hand.get(p)) == touched[:2]
    doc = after["plugins/modules/host_tune.py"].decode().split('DOCUMENTATION = r"""', 1)[1]
    doc = yaml.safe_load(doc.split('"""')[0])
    assert "hugepages" in doc["options"]["parts"]["choices"]
    assert "hugepages" not in doc["options"]["parts"]["default"]  # default_on False
    assert doc["options"]["hugepages_count"] == {
        "type": "int", "default": 0,
        "description": "Huge pages the C(hugepages) part reserves (0 to 65536)."}
    switches = yaml.safe_load(after["roles/tune/vars/main.yml"])["__gpuhost_tune_switches"]
    assert switches["hugepages"] == "{{ gpuhost_tune_hugepages }}"
    defaults = yaml.safe_load(after["roles/tune/defaults/main.yml"])
    assert defaults["gpuhost_tune_hugepages"] is False
    assert defaults["gpuhost_tune_hugepages_count"] == 0
    spec = yaml.safe_load(after["roles/tune/meta/argument_specs.yml"])
    assert spec["argument_specs"]["main"]["options"]["gpuhost_tune_hugepages_count"] == {
        "type": "int", "default": 0,
        "description": "Huge pages the C(hugepages) part reserves (0 to 65536)."}
    tasks = yaml.safe_load(after["roles/tune/tasks/main.yml"])
    call = [t for t in tasks if "gpuhost.tuning.host_tune" in t][0]["gpuhost.tuning.host_tune"]
    assert call["hugepages_count"] == (
        "{{ omit if gpuhost_tune_hugepages_count is none else gpuhost_tune_hugepages_count }}")
    snap = after["plugins/modules/tuning_snapshot.py"].decode().split('DOCUMENTATION = r"""', 1)
    snap = yaml.safe_load(snap[1].split('"""')[0])
    assert "/etc/sysctl.d/98-gpuhost-hugepages.conf" in snap["options"]["files"]["default"]
    # host_tune takes the option and refuses a bad value by the part's rule
    probe = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True,
                           text=True, check=True)
    assert json.loads(probe.stdout) == {
        "spec": {"type": "int", "default": 0},
        "refused": "hugepages_count: -1 is not allowed: an integer from 0 to 65536"}
    proc = subprocess.run([sys.executable, str(copy / "scripts" / "role-specs.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(REPO, "docs", "architecture.md")) as handle:
        assert "Adding a part with an option touches %d files" % len(touched) in handle.read()


def test_host_tune_documents_each_part_option_as_the_part_does():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune_registry

    with open(os.path.join(REPO, "plugins", "modules", "host_tune.py")) as handle:
        doc = yaml.safe_load(handle.read().split('DOCUMENTATION = r"""', 1)[1].split('"""')[0])
    for name, spec, description in tune_registry.options():
        assert doc["options"][name]["description"] == description, name
        assert doc["options"][name].get("default") == spec.get("default"), name
    assert doc["options"]["parts"]["choices"] == list(tune_registry.PARTS)
