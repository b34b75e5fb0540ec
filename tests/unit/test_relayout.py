"""scripts/relayout.py: the module_utils layout it holds is the one in the tree, it refuses a
flat file it does not place, and its rewrite of an old reference is the new one (and a
second pass changes nothing)."""

import importlib.util
import os

from conftest import REPO

_SPEC = importlib.util.spec_from_file_location(
    "relayout", os.path.join(REPO, "scripts", "relayout.py"))
relayout = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(relayout)

PKG = "ansible_collections.gpuhost.tuning.plugins.module_utils"


def test_every_module_utils_file_is_placed_and_none_is_left_to_move():
    assert relayout.unplaced() == []
    planned, problems = relayout.moves()
    assert planned == [] and problems == []
    for new in relayout.MAPPING.values():
        assert os.path.isfile(os.path.join(REPO, relayout.UTILS, new)), new


def test_a_flat_file_it_does_not_place_fails_with_exit_2(tmp_path, monkeypatch, capsys):
    utils = tmp_path / relayout.UTILS
    utils.mkdir(parents=True)
    (utils / "__init__.py").write_text("")
    (utils / "brand_new.py").write_text("")
    (utils / "stray").mkdir()
    monkeypatch.setattr(relayout, "REPO", str(tmp_path))
    assert relayout.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert "brand_new.py: not placed by MAPPING" in err and "stray/" in err


def test_imports_are_split_per_package_under_their_old_names():
    text = ("from %s import checks, kernlog, pci_write as pw  # noqa: F401\n"
            "    from %s.bootcfg import BootConfigError\n"
            "x = mock.patch('%s.hostfs.read_text')\n" % (PKG, PKG, PKG))
    out = relayout.rewrite(text, "plugins/modules/example.py")
    assert out == (
        "from %s import checks  # noqa: F401\n"
        "from %s.onhost import setpci_maxreadreq as pw  # noqa: F401\n"
        "from %s.readers import kernel_log as kernlog  # noqa: F401\n"
        "    from %s.readers.kernel_cmdline import (\n"
        "        BootConfigError,\n"
        "    )\n"      # longer than 100 columns now: wrapped
        "x = mock.patch('%s.onhost.hostfs.read_text')\n" % ((PKG,) * 5))
    assert relayout.rewrite(out, "plugins/modules/example.py") == out


def test_onhost_files_import_each_other_relatively():
    text = ("from %s import hostfs\nfrom %s.pci import (\n    read_config,\n)\n"
            "from %s import runner\n" % (PKG, PKG, PKG))
    out = relayout.rewrite(text, "plugins/module_utils/onhost/example.py")
    assert out == ("from . import hostfs\nfrom .pci import (\n    read_config,\n)\n"
                   "from %s.core import runner\n" % PKG)


def test_paths_and_test_files_follow_the_mapping():
    text = ('see plugins/module_utils/kernlog.py and kernelstate.py, not facts.py;\n'
            'tests/unit/plugins/module_utils/test_bootloader.py\n')
    assert relayout.rewrite(text, "docs/x.md") == (
        'see plugins/module_utils/readers/kernel_log.py and readers/kernel_state.py, not '
        'facts.py;\ntests/unit/plugins/module_utils/readers/test_boot_entries.py\n')
    assert relayout.rewrite('OVERSIZE = {"cuda.py": 1}\n', "tests/unit/t.py") == \
        'OVERSIZE = {"readers/cuda.py": 1}\n'
