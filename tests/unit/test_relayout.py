"""scripts/relayout.py: the layout it holds is the one in the tree (nothing left to move), it
refuses a file of an old package it does not place, and its rewrite of an old reference is
the new one under the file's own name (and a second pass changes nothing)."""

import importlib.util
import os

from conftest import REPO

_SPEC = importlib.util.spec_from_file_location(
    "relayout", os.path.join(REPO, "scripts", "relayout.py"))
relayout = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(relayout)

PKG = "ansible_collections.gpuhost.tuning.plugins.module_utils"


def test_every_file_is_placed_and_none_is_left_to_move():
    assert relayout.unplaced() == []
    planned, problems = relayout.moves()
    assert planned == [] and problems == []
    for new in relayout.MAPPING.values():
        assert os.path.isfile(os.path.join(REPO, relayout.UTILS, new)), new
    for pkg in relayout.LAYOUT:
        assert os.path.isfile(os.path.join(REPO, relayout.UTILS, pkg, "__init__.py")), pkg
    for top in (relayout.UTILS, relayout.TESTS):
        assert [pkg for pkg in relayout.OLD_PACKAGES
                if os.path.isdir(os.path.join(REPO, top, pkg))] == [], top


def test_the_mapping_is_one_to_one_and_keeps_file_names_unique():
    news = list(relayout.MAPPING.values())
    assert len(set(news)) == len(news)
    names = [os.path.basename(n) for n in news if not n.endswith("__init__.py")]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_a_file_of_an_old_package_it_does_not_place_fails_with_exit_2(tmp_path, monkeypatch,
                                                                      capsys):
    old = tmp_path / relayout.UTILS / "readers"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("")
    (old / "brand_new.py").write_text("")
    monkeypatch.setattr(relayout, "REPO", str(tmp_path))
    assert relayout.main(["--check"]) == 2
    err = capsys.readouterr()
    assert "readers/brand_new.py: not placed by MAPPING" in err.err
    assert err.out == "" and (old / "brand_new.py").exists()  # nothing done


def test_an_import_moves_and_binds_the_file_under_its_own_name():
    text = ("from %s.readers import kernels as kernel_mod\n"
            "from %s.checks import base\n"
            "from %s.core.runner import Runner\n\n\n"
            "def f(kernel_mod_x=1):\n"
            "    return kernel_mod.running_kernel('/'), base.SEVERITIES, Runner, kernel_mod_x\n"
            % (PKG, PKG, PKG))
    out, kept = relayout.rewrite(text, "plugins/modules/example.py")
    assert kept == []
    assert out == ("from %s.subjects.boot import kernels\n"
                   "from %s.platform import findings\n"
                   "from %s.platform.runner import Runner\n\n\n"
                   "def f(kernel_mod_x=1):\n"
                   "    return kernels.running_kernel('/'), findings.SEVERITIES, Runner, "
                   "kernel_mod_x\n" % (PKG, PKG, PKG))
    assert relayout.rewrite(out, "plugins/modules/example.py") == (out, [])


def test_a_name_the_file_already_uses_keeps_the_alias_and_is_reported():
    text = ("from %s.readers import dkms as dkms_mod\n\n"
            "dkms = dkms_mod.tree_status('/')\n" % PKG)
    out, kept = relayout.rewrite(text, "plugins/modules/example.py")
    assert kept == [("dkms_mod", "dkms")]
    assert out.startswith("from %s.subjects.dkms import dkms as dkms_mod\n" % PKG)
    assert "dkms = dkms_mod.tree_status('/')" in out


def test_a_keyword_argument_and_an_attribute_of_the_old_name_stay():
    text = ("from %s.readers import kernels as kernel_mod\n\n"
            "x = g(kernel_mod=1, y=obj.kernel_mod, z=kernel_mod.X)\n" % PKG)
    out, _kept = relayout.rewrite(text, "plugins/modules/example.py")
    assert out.endswith("x = g(kernel_mod=1, y=obj.kernel_mod, z=kernels.X)\n")


def test_dotted_names_paths_and_mirror_tests_follow_the_mapping():
    text = ("mock.patch('%s.onhost.hostfs.read_text')\n"
            "see plugins/module_utils/readers/kernel_log.py and onhost/pci.py, "
            "checks.run.audit;\n"
            "tests/unit/plugins/module_utils/readers/test_boot_entries.py\n" % PKG)
    out, _kept = relayout.rewrite(text, "docs/x.md")
    assert out == ("mock.patch('%s.platform.hostfs.read_text')\n"
                   "see plugins/module_utils/subjects/health/kernel_log.py and "
                   "subjects/pcie/pci.py, engines.audit.audit.audit;\n"
                   "tests/unit/plugins/module_utils/subjects/boot/test_boot_entries.py\n" % PKG)
    assert relayout.rewrite(out, "docs/x.md") == (out, [])


def test_relative_imports_of_a_moved_file_are_resolved_at_its_old_place():
    text = "from . import hostfs\nfrom .pci import read_config\n"
    out, _kept = relayout.rewrite(text, "plugins/module_utils/subjects/cpu/cpu.py")
    assert out == ("from %s.platform import hostfs\n"
                   "from %s.subjects.pcie.pci import read_config\n" % (PKG, PKG))
