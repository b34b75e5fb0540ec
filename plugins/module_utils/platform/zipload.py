# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each collection and ansible module_utils file compiled once, not twice, when a module runs
from AnsiballZ's zip.

AnsiballZ ships source only, and CPython's ``zipimport`` (3.8 to 3.13) compiles a file
twice on import: ``find_spec`` builds the spec through ``spec_from_loader``, which asks the
importer's ``get_filename`` for the origin, and ``get_filename`` compiles the code to find
it; ``exec_module`` then compiles it again. On host_audit's zip that second pass is about
0.12 s of CPU per host (74 files, 600 kB of source), more than the audit itself.

:func:`install` puts a finder in front of ``sys.meta_path`` that answers for the
collection's own files and ansible's ``module_utils`` inside the zip (``PREFIXES``; a
module calls it before its other imports; ansible-core 2.19's AnsiballZ loader has imported
``ansible.module_utils.basic`` and about 55 files under it before any module runs, ping's
too, and those are compiled by ``zipimport`` as usual): the
same spec ``zipimport`` would build (same loader, origin, package path), with the origin
named from the zip's listing
(``is_package`` reads the listing, it compiles nothing), so the code is compiled once, by
the loader. Anything else (another package, a name not in the zip, a namespace folder) is
left to the usual machinery, and so is everything when the module does not run from a zip
(the tests, the audit timer's and the boot service's copies on disk, which have bytecode).

The loader the finder names is a ``zipimport.zipimporter`` whose ``get_code`` first asks the
host's bytecode cache (``codecache.Store``, folder from ``codecache.folder_from_env``), so a
host compiles a file once per version of it, not once per module call; without a usable
cache folder it compiles as ``zipimport`` does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import _imp
import importlib.util
import sys
import zipimport

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import codecache

# Whose files the finder answers for: the collection's, and ansible's module_utils (the rest
# of ``ansible`` is never in a module's zip). A name under them that is not in the zip
# (``ansible.module_utils.six.moves``, served by six's own finder) is left to the others.
PREFIXES = ("ansible_collections.gpuhost.tuning.", "ansible.module_utils.")


class _CachedZip(zipimport.zipimporter):
    """``zipimport``'s importer for one folder of the zip, its code kept in ``store``."""

    def __init__(self, path, store):
        zipimport.zipimporter.__init__(self, path)
        self.store = store

    def get_code(self, fullname):
        tail = fullname.rpartition(".")[2]
        inner = self.prefix + tail + ("/__init__.py" if self.is_package(fullname) else ".py")
        origin = self.archive + "/" + inner
        try:
            source = self.get_data(origin)
        except OSError:
            return zipimport.zipimporter.get_code(self, fullname)
        code = self.store.load(inner, source)
        if code is None:
            # as zipimport compiles it (universal newlines, no inherited future flags)
            code = compile(source.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), origin,
                           "exec", dont_inherit=True)
            self.store.save(inner, source, code)
        elif code.co_filename != origin:
            # an earlier call's zip path: tracebacks name this call's file
            _imp._fix_co_filename(code, origin)
        return code


class _CompileOnce:
    """A meta path finder for ``PREFIXES`` names inside a zip (see the module's text)."""

    def __init__(self, store=None):
        self.store = store
        self.importers = {}

    def find_spec(self, fullname, path=None, target=None):
        if path is None or not fullname.startswith(PREFIXES):
            return None
        for entry in path:
            importer = self._importer(entry)
            if importer is None:
                return None
            try:
                package = importer.is_package(fullname)
            except zipimport.ZipImportError:
                continue
            tail = fullname.rpartition(".")[2]
            inner = importer.prefix + tail + ("/__init__.py" if package else ".py")
            return importlib.util.spec_from_file_location(
                fullname, importer.archive + "/" + inner, loader=importer,
                submodule_search_locations=[] if package else None)
        return None

    def _importer(self, entry):
        """The zip importer for one ``path`` entry, or None when the entry is not in a zip."""
        if entry in self.importers:
            return self.importers[entry]
        importer = sys.path_importer_cache.get(entry)
        try:
            if importer is None or (self.store and isinstance(importer, zipimport.zipimporter)):
                importer = (_CachedZip(entry, self.store) if self.store
                            else zipimport.zipimporter(entry))
        except (zipimport.ZipImportError, OSError, TypeError, ValueError):
            importer = None
        if not isinstance(importer, zipimport.zipimporter):
            importer = None
        self.importers[entry] = importer
        return importer


def from_zip(module_name=__name__):
    """Whether ``module_name`` (already imported) was loaded by ``zipimport``."""
    module = sys.modules.get(module_name)
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), zipimport.zipimporter)


def install(environ=None):
    """Put the finder first on ``sys.meta_path`` when this file came from a zip (once), with
    the host's bytecode cache that ``environ`` (default ``os.environ``) names."""
    if not from_zip() or any(isinstance(f, _CompileOnce) for f in sys.meta_path):
        return False
    folder = codecache.folder_from_env(environ)
    sys.meta_path.insert(0, _CompileOnce(codecache.Store(folder) if folder else None))
    return True
