"""zipload: a module run from AnsiballZ's zip compiles each collection file and each of
ansible's module_utils once, and the modules it imports look exactly as zipimport makes them
(__file__, __path__, spec); a name under those packages that the zip lacks (six.moves'
kind) is still served by the finder that owns it.

Each case runs a fresh Python on a zip laid out as AnsiballZ lays it out (source only,
PYTHONDONTWRITEBYTECODE) and counts the interpreter's own ``compile`` audit events per file
(sys.addaudithook), so the count is CPython's, not the finder's idea of it. Without
``install()`` the same zip compiles every file twice (the zipimport behaviour the finder
works around): that case is here too, so a finder that stopped answering fails the test.
"""

import json
import os
import subprocess
import sys
import zipfile


PKG = "ansible_collections/gpuhost/tuning/plugins/module_utils"
DOTTED = PKG.replace("/", ".")

PROBE = r"""
import collections, json, sys
counts = collections.Counter()

def hook(event, args):
    if event == "compile" and isinstance(args[1], str) and ".zip/" in args[1]:
        counts[args[1].split(".zip/", 1)[1]] += 1

sys.addaudithook(hook)


class Virtual:  # like six's meta path importer: serves a module no file holds

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != "ansible.module_utils.virtual":
            return None
        import importlib.machinery
        return importlib.machinery.ModuleSpec(fullname, Virtual)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        module.VALUE = "virtual"


sys.meta_path.append(Virtual)
from ansible_collections.gpuhost.tuning.plugins.module_utils.core import zipload
installed = zipload.install() if sys.argv[1] == "on" else False
again = zipload.install() if sys.argv[1] == "on" else False
from ansible_collections.gpuhost.tuning.plugins.module_utils import leaf_a
from ansible_collections.gpuhost.tuning.plugins.module_utils.sub import leaf_b
import ansible_collections.gpuhost.tuning.plugins.module_utils.sub as sub
from ansible.module_utils import leaf_c
from ansible.module_utils import virtual
names = [n for n in sys.modules if n.startswith(("ansible_collections.gpuhost.tuning.plugins.",
                                                 "ansible.module_utils."))]
attrs = {}
for name in sorted(names):
    mod = sys.modules[name]
    spec = mod.__spec__
    attrs[name] = {
        "file": getattr(mod, "__file__", None), "path": list(getattr(mod, "__path__", []) or []),
        "origin": spec.origin, "locations": spec.submodule_search_locations and
        list(spec.submodule_search_locations), "loader": type(spec.loader).__name__,
        "package": mod.__package__, "has_location": spec.has_location}
print(json.dumps({"counts": counts, "installed": installed, "again": again, "attrs": attrs,
                  "values": [leaf_a.VALUE, leaf_b.VALUE, sub.VALUE, leaf_c.VALUE,
                             virtual.VALUE]}))
"""


def _zipload_source():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload

    return zipload.__file__


def make_zip(path):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for part in ("ansible_collections", "ansible_collections/gpuhost",
                     "ansible_collections/gpuhost/tuning",
                     "ansible_collections/gpuhost/tuning/plugins", PKG):
            zf.writestr(part + "/__init__.py", "")
        zf.writestr(PKG + "/core/__init__.py", "")
        zf.write(_zipload_source(), PKG + "/core/zipload.py")
        zf.writestr(PKG + "/leaf_a.py", "VALUE = 'a'\n")
        zf.writestr(PKG + "/sub/__init__.py", "VALUE = 'sub'\n")
        zf.writestr(PKG + "/sub/leaf_b.py",
                    "from %s import leaf_a\nVALUE = leaf_a.VALUE + 'b'\n" % DOTTED)
        for part in ("ansible", "ansible/module_utils"):      # AnsiballZ ships these too
            zf.writestr(part + "/__init__.py", "")
        zf.writestr("ansible/module_utils/leaf_c.py", "VALUE = 'c'\n")
    return path


def probe(tmp_path, mode):
    archive = make_zip(str(tmp_path / "payload.zip"))
    env = dict(os.environ, PYTHONPATH=archive, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         env=env, timeout=60, check=True, cwd=str(tmp_path))
    return json.loads(out.stdout)


def test_without_the_finder_zipimport_compiles_each_file_twice(tmp_path):
    result = probe(tmp_path, "off")
    assert result["counts"][PKG + "/leaf_a.py"] == 2
    assert result["counts"][PKG + "/sub/leaf_b.py"] == 2
    assert result["counts"][PKG + "/sub/__init__.py"] == 2
    assert result["counts"]["ansible/module_utils/leaf_c.py"] == 2


def test_installed_each_file_after_it_compiles_once(tmp_path):
    result = probe(tmp_path, "on")
    assert result["installed"] is True
    assert result["again"] is False         # one finder, however often install() is called
    assert result["counts"][PKG + "/leaf_a.py"] == 1
    assert result["counts"][PKG + "/sub/leaf_b.py"] == 1
    assert result["counts"][PKG + "/sub/__init__.py"] == 1
    assert result["counts"]["ansible/module_utils/leaf_c.py"] == 1
    assert result["values"] == ["a", "ab", "sub", "c", "virtual"]


def test_modules_look_as_zipimport_makes_them(tmp_path):
    plain = probe(tmp_path, "off")["attrs"]
    once = probe(tmp_path, "on")["attrs"]
    assert set(once) == set(plain)
    for name in plain:
        assert once[name] == plain[name], name
    assert once[DOTTED + ".sub"]["path"] == [
        str(tmp_path / "payload.zip") + "/" + PKG + "/sub"]
    assert once[DOTTED + ".leaf_a"]["loader"] == "zipimporter"
    assert once["ansible.module_utils.leaf_c"]["loader"] == "zipimporter"
    assert once["ansible.module_utils.virtual"]["loader"] == "type"   # its own finder's


def test_not_from_a_zip_it_installs_nothing():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload

    before = list(sys.meta_path)
    assert zipload.from_zip() is False
    assert zipload.install() is False
    assert sys.meta_path == before
