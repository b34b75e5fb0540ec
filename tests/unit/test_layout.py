"""Tests mirror the code (issue 23 item 5): every plugins/module_utils file, at any depth,
has ``tests/unit/plugins/module_utils/<same folders>/test_<file>.py`` and every module
``plugins/modules/<m>.py`` has ``tests/unit/plugins/modules/test_<m>.py``.

The expected path is derived from the plugin's path, so the rule stays right when files move
into other sub-packages. ``MISSING`` lists today's gaps (plugin paths below ``plugins/``); it
only shrinks: a listed file that now has its test fails too, so the entry is taken off the
list when the test lands. A file that is neither tested nor listed fails, naming the test file
it needs.
"""

import os

from conftest import REPO

PLUGINS = os.path.join(REPO, "plugins")
UNIT = os.path.join(REPO, "tests", "unit", "plugins")
MIRRORED = ("module_utils", "modules")

# plugin files without their mirror test yet (the flat module_utils files and the modules:
# branch mirror-b writes them); emptied by mirror-b and the lead, never grown.
MISSING = frozenset()


def plugin_files():
    """Every plugin file that needs a mirror test, as its path below ``plugins/``."""
    out = []
    for layer in MIRRORED:
        for folder, dirs, names in os.walk(os.path.join(PLUGINS, layer)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py") and name != "__init__.py":
                    out.append(os.path.relpath(os.path.join(folder, name), PLUGINS))
    return out


def mirror(plugin):
    """The test file (below ``tests/unit/plugins/``) that ``plugin`` must have."""
    folder, name = os.path.split(plugin)
    return os.path.join(folder, "test_" + name)


def has_mirror(plugin):
    return os.path.isfile(os.path.join(UNIT, mirror(plugin)))


def test_mirror_path_is_derived_from_the_plugin_path():
    assert mirror("module_utils/subjects/health/gpu_xid_check.py") == (
        "module_utils/subjects/health/test_gpu_xid_check.py")
    assert mirror("module_utils/a/b/c.py") == "module_utils/a/b/test_c.py"
    assert mirror("modules/host_audit.py") == "modules/test_host_audit.py"
    found = plugin_files()
    assert "module_utils/platform/findings.py" in found and "modules/host_audit.py" in found
    assert not [p for p in found if p.endswith("__init__.py")]


def test_every_plugin_file_has_its_mirror_test():
    lacking = [p for p in plugin_files() if p not in MISSING and not has_mirror(p)]
    assert not lacking, "plugin files without their mirror test (write these):\n" + "\n".join(
        "  plugins/%s -> tests/unit/plugins/%s" % (p, mirror(p)) for p in lacking)


def test_missing_lists_only_files_that_exist_and_still_lack_their_test():
    present = set(plugin_files())
    gone = sorted(MISSING - present)
    assert not gone, "MISSING names files that no longer exist (take them off): %s" % gone
    tested = sorted(p for p in MISSING if has_mirror(p))
    assert not tested, "MISSING names files that now have their test (take them off): %s" % (
        tested)


def test_every_mirror_test_folder_is_a_package():
    """Mirror tests in different folders share base names (checks/test_cuda.py and the flat
    test_cuda.py); pytest's default import mode tells them apart only when each sub-folder
    is a package (``__init__.py``), else it stops with 'import file mismatch'."""
    lacking = []
    for layer in MIRRORED:
        for folder, dirs, _names in os.walk(os.path.join(UNIT, layer)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if folder != os.path.join(UNIT, "module_utils") and \
                    not os.path.isfile(os.path.join(folder, "__init__.py")):
                lacking.append(os.path.relpath(folder, REPO))
    assert not lacking, "test folders without __init__.py: %s" % lacking
