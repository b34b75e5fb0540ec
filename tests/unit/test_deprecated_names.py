"""No remedy, doc or playbook names a deprecated variable, option or return key.

The deprecated names are read from where they are declared: each role's rename map
(``__gpuhost_<role>_renamed`` in ``roles/<role>/vars/main.yml``, where the role maps an old
name onto its new one), module_utils/platform/deprecated.py (option aliases, return keys) and the
per-key options of the modules taking ``wanted`` (host_audit.PER_KEY, tune.PER_KEY,
post_boot_verify.PER_KEY). The changelog (it says what was renamed) and the files that do the
mapping are the only places left to name them.

Before 4fd0dca the XID and memory remedies told the operator to pass ``-e
gpuhost_reboot=true``: ``test_the_old_remedies_are_caught`` runs the scan on those lines, and
the scan of the checks fails on them (``git show 4fd0dca``).
"""

import glob
import os
import re

import pytest
import yaml
from conftest import REPO

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import deprecated
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import tune
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit, post_boot_verify

PER_KEY = {"host_audit": host_audit.PER_KEY, "host_tune": tune.PER_KEY,
           "post_boot_verify": post_boot_verify.PER_KEY}


def _yaml(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def renamed_variables():
    """Old role variable name -> new name, from every role's rename map."""
    out = {}
    for path in sorted(glob.glob(os.path.join(REPO, "roles/*/vars/main.yml"))):
        role = path.split(os.sep)[-3]
        out.update((_yaml(path) or {}).get("__gpuhost_%s_renamed" % role) or {})
    return out


def named(text, names):
    """The deprecated ``names`` that ``text`` names (whole words: gpuhost_reboot is not in
    gpuhost_reboot_verify_reboot)."""
    return sorted(n for n in names if re.search(r"(?<![\w.])%s(?!\w)" % re.escape(n), text))


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _docs():
    """Every file a user reads: remedies, docs, READMEs, role argument specs, module docs,
    playbooks, and the roles' defaults (their comments are the variables' documentation)."""
    patterns = ["plugins/module_utils/checks/*.py", "docs/*.md", "README.md",
                "roles/*/README.md", "roles/*/meta/argument_specs.yml", "roles/*/defaults/*.yml",
                "plugins/modules/*.py", "playbooks/*.yml", "extensions/**/*.yml"]
    files = []
    for pattern in patterns:
        files.extend(glob.glob(os.path.join(REPO, pattern), recursive=True))
    return sorted(set(files))


def test_the_declarations_are_found():
    old = renamed_variables()
    assert old["gpuhost_reboot"] == "gpuhost_reboot_verify_reboot"
    assert old["gpuhost_audit_lxc_config_dir"] == "gpuhost_lxc_config_dir"
    assert deprecated.RETURN_KEYS["sysctl_settings"] == {"values": "settings"}
    assert len(_docs()) > 40


def test_no_remedy_doc_or_playbook_names_a_renamed_variable():
    old = renamed_variables()
    found = {}
    for path in _docs():
        hits = named(_read(path), old)
        if hits:
            found[os.path.relpath(path, REPO)] = hits
    assert not found, "deprecated variables named (use the new names: %s): %s" % (
        dict((n, old[n]) for hits in found.values() for n in hits), found)


def test_the_old_remedies_are_caught():
    """The remedy lines of subjects/health/gpu_xid_check.py and gpu_memory.py before 4fd0dca."""
    before = ('"reboot: plan a maintenance window, then '
              'ansible-playbook gpuhost.tuning.reboot_verify -l %s -e gpuhost_reboot=true"')
    assert named(before, renamed_variables()) == ["gpuhost_reboot"]
    assert named("-e gpuhost_reboot_verify_reboot=true", renamed_variables()) == []


def _module_tasks(path):
    data = _yaml(path) or []
    if "/playbooks/" in path:
        data = [t for play in data if isinstance(play, dict)
                for key in ("pre_tasks", "tasks", "post_tasks") for t in play.get(key) or []]
    stack = list(data)
    while stack:
        task = stack.pop()
        if not isinstance(task, dict):
            continue
        for key in ("block", "rescue", "always"):
            stack.extend(task.get(key) or [])
        for key, args in task.items():
            if key.startswith("gpuhost.tuning.") and isinstance(args, dict):
                yield key.split(".")[-1], args


def _examples(module):
    from importlib import import_module

    mod = import_module("ansible_collections.gpuhost.tuning.plugins.modules." + module)
    return [(module, args) for task in yaml.safe_load(mod.EXAMPLES) or []
            for key, args in task.items()
            if key == "gpuhost.tuning." + module and isinstance(args, dict)]


def _old_options(module):
    out = set(PER_KEY.get(module, ()))
    out.update(deprecated.OPTION_ALIASES.get(module, {}))
    return out


@pytest.mark.parametrize("module", sorted(set(PER_KEY) | set(deprecated.OPTION_ALIASES)))
def test_no_task_or_example_passes_a_deprecated_option(module):
    calls = _examples(module)
    for path in glob.glob(os.path.join(REPO, "roles/*/tasks/*.yml")) + \
            glob.glob(os.path.join(REPO, "playbooks/*.yml")):
        calls.extend((m, args) for m, args in _module_tasks(path) if m == module)
    for _m, args in calls:
        assert not _old_options(module) & set(args), (module, _old_options(module) & set(args))


def test_no_doc_or_task_reads_a_deprecated_return_key():
    keys = set(k for per in deprecated.RETURN_KEYS.values() for k in per)
    files = _docs() + glob.glob(os.path.join(REPO, "roles/*/tasks/*.yml"))
    for path in files:
        text = _read(path)
        for key in keys:
            assert not re.search(r"\[['\"]%s['\"]\]" % key, text), (path, key)
