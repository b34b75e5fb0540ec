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
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload
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
store = [f.store for f in sys.meta_path if type(f).__name__ == "_CompileOnce"]
print(json.dumps({"counts": counts, "installed": installed, "again": again, "attrs": attrs,
                  "values": [leaf_a.VALUE, leaf_b.VALUE, sub.VALUE, leaf_c.VALUE,
                             virtual.VALUE],
                  "where": leaf_a.where(), "loader_is_zip": isinstance(
                      leaf_a.__loader__, __import__("zipimport").zipimporter),
                  "hits": store[0].hits if store and store[0] else None,
                  "writes": store[0].writes if store and store[0] else None}))
"""


def _platform_source(name):
    from ansible_collections.gpuhost.tuning.plugins.module_utils import platform

    return os.path.join(os.path.dirname(platform.__file__), name)


LEAF_A = "import sys\nVALUE = %r\n\n\ndef where():\n    return sys._getframe().f_code.co_filename\n"


def make_zip(path, leaf_a="a"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for part in ("ansible_collections", "ansible_collections/gpuhost",
                     "ansible_collections/gpuhost/tuning",
                     "ansible_collections/gpuhost/tuning/plugins", PKG):
            zf.writestr(part + "/__init__.py", "")
        zf.writestr(PKG + "/platform/__init__.py", "")
        for name in ("zipload.py", "codecache.py"):
            zf.write(_platform_source(name), PKG + "/platform/" + name)
        zf.writestr(PKG + "/leaf_a.py", LEAF_A % leaf_a)
        zf.writestr(PKG + "/sub/__init__.py", "VALUE = 'sub'\n")
        zf.writestr(PKG + "/sub/leaf_b.py",
                    "from %s import leaf_a\nVALUE = leaf_a.VALUE + 'b'\n" % DOTTED)
        for part in ("ansible", "ansible/module_utils"):      # AnsiballZ ships these too
            zf.writestr(part + "/__init__.py", "")
        zf.writestr("ansible/module_utils/leaf_c.py", "VALUE = 'c'\n")
    return path


def probe(tmp_path, mode, cache="off", leaf_a="a", zip_name="payload.zip"):
    """One module-like run from a fresh zip; ``cache``: GPUHOST_TUNING_CODE_CACHE's value."""
    archive = make_zip(str(tmp_path / zip_name), leaf_a)
    env = dict(os.environ, PYTHONPATH=archive, PYTHONDONTWRITEBYTECODE="1",
               GPUHOST_TUNING_CODE_CACHE=str(cache))
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
    cached = probe(tmp_path, "on", cache=tmp_path / "cache")
    cached_attrs = cached["attrs"]
    for name in plain:   # with the host's bytecode cache: the same modules, a zip importer
        want, got = dict(plain[name]), dict(cached_attrs[name])
        if want["loader"] == "zipimporter":   # the packages imported before install() keep it
            assert got.pop("loader") in ("zipimporter", "_CachedZip"), name
            want.pop("loader")
        assert got == want, name
    assert cached_attrs[DOTTED + ".leaf_a"]["loader"] == "_CachedZip"
    assert cached["loader_is_zip"] is True
    assert once["ansible.module_utils.virtual"]["loader"] == "type"   # its own finder's


def test_not_from_a_zip_it_installs_nothing():
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload

    before = list(sys.meta_path)
    assert zipload.from_zip() is False
    assert zipload.install() is False
    assert sys.meta_path == before


# The host's bytecode cache (platform/codecache.py): what a host sees over module calls.
OURS = [PKG + "/leaf_a.py", PKG + "/sub/leaf_b.py", PKG + "/sub/__init__.py",
        "ansible/module_utils/leaf_c.py"]


def test_the_second_call_on_a_host_compiles_nothing_and_names_its_own_zip(tmp_path):
    cache = tmp_path / "cache"
    first = probe(tmp_path, "on", cache=cache, zip_name="call1.zip")
    assert [first["counts"].get(name, 0) for name in OURS] == [1, 1, 1, 1]
    assert first["writes"] >= 4 and first["hits"] == 0
    assert oct(os.stat(str(cache)).st_mode & 0o777) == "0o700"
    second = probe(tmp_path, "on", cache=cache, zip_name="call2.zip")
    assert [second["counts"].get(name, 0) for name in OURS] == [0, 0, 0, 0]
    assert second["writes"] == 0 and second["hits"] >= 4
    assert second["values"] == ["a", "ab", "sub", "c", "virtual"]
    # a traceback of the second call names the second call's file, not the first's
    assert second["where"] == str(tmp_path / "call2.zip") + "/" + PKG + "/leaf_a.py"


def test_a_changed_file_is_compiled_again_and_runs_its_new_code(tmp_path):
    cache = tmp_path / "cache"
    probe(tmp_path, "on", cache=cache, zip_name="old.zip")
    new = probe(tmp_path, "on", cache=cache, leaf_a="a2", zip_name="new.zip")
    assert new["values"][:2] == ["a2", "a2b"]
    assert new["counts"].get(PKG + "/leaf_a.py", 0) == 1          # the changed file only
    assert new["counts"].get(PKG + "/sub/leaf_b.py", 0) == 0
    back = probe(tmp_path, "on", cache=cache, zip_name="old-again.zip")
    assert back["values"][:2] == ["a", "ab"] and back["counts"].get(PKG + "/leaf_a.py", 0) == 0


def test_a_tampered_entry_is_compiled_from_the_zip(tmp_path):
    cache = tmp_path / "cache"
    probe(tmp_path, "on", cache=cache, zip_name="call1.zip")
    for entry in os.listdir(str(cache)):        # another file's code under every name
        with open(str(cache / entry), "r+b") as handle:
            data = bytearray(handle.read())
            data[-8:] = b"\xff" * 8
            handle.seek(0)
            handle.write(bytes(data))
    again = probe(tmp_path, "on", cache=cache, zip_name="call2.zip")
    assert again["values"] == ["a", "ab", "sub", "c", "virtual"]


def test_cache_off_compiles_every_call_and_writes_nothing(tmp_path):
    for name in ("call1.zip", "call2.zip"):
        run = probe(tmp_path, "on", cache="off", zip_name=name)
        assert [run["counts"].get(n, 0) for n in OURS] == [1, 1, 1, 1]
        assert run["hits"] is None
    assert sorted(os.listdir(str(tmp_path))) == ["call1.zip", "call2.zip"]


def test_every_module_installs_the_loader_before_its_other_imports():
    """Each module file's first import (after ``__future__``) is zipload and its next
    statement ``zipload.install()``: every module a host runs finds its code in the host's
    cache (a module that imported first would compile those files on every call)."""
    import ast

    from conftest import REPO

    folder = os.path.join(REPO, "plugins", "modules")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".py") and n != "__init__.py")
    assert len(names) > 20
    for name in names:
        with open(os.path.join(folder, name)) as handle:
            body = ast.parse(handle.read()).body
        imports = [i for i, node in enumerate(body)
                   if isinstance(node, (ast.Import, ast.ImportFrom))
                   and getattr(node, "module", None) != "__future__"]
        first = body[imports[0]]
        assert isinstance(first, ast.ImportFrom) and first.module.endswith(
            "module_utils.platform") and [a.name for a in first.names] == ["zipload"], name
        call = body[imports[0] + 1]
        assert ast.unparse(call) == "zipload.install()", name
