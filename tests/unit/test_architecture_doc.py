"""docs/architecture.md names real things: every path, file and ``module.name`` it cites in
backticks exists in this checkout, so the page cannot drift from the code unseen (it once
named ``facts.DEFAULT_WANTED`` and ``snapshot.PARTS`` long after both were gone).

Checked: spans that look like repository paths (``plugins/...``, ``tests/...``, a
module_utils sub-package path such as ``engines/tune/tune_registry.py``), bare ``<name>.py`` file
names
(some file of that name under plugins/ or tests/), and dotted names whose head is a
module_utils module (``engines.fleet.fleet_run.judge``, ``runner.QUERY_TIMEOUT_S``,
``hostfs.RootLock``):
the last part must be defined at the top level of that file, or in a class it names. A name
a file only imports under an alias does not count (an alias kept dead names alive: ``bootcfg``,
``hostlog``, ``gpuuse``), and a path or dotted name in a package of the old layout (``core/``,
``readers/``, ``checks.run``, ...) fails. Spans with placeholders (``<column>``), commands and
call signatures are left alone.
"""

import ast
import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "architecture.md")
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
ROOTS = ("plugins/", "tests/", "roles/", "playbooks/", "scripts/", "docs/", "bench/", "lab/",
         "molecule/", "changelogs/")
FILE_TOPS = ("plugins", "tests", "scripts", "bench", "lab", "roles", "playbooks", "molecule")
SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def _spans():
    with open(DOC) as handle:
        text = handle.read()
    # fenced blocks hold diffs and code: their names are checked by what they show, not here
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return sorted(set(SPAN.findall(text)))


def _modules():
    """{dotted name relative to module_utils: file}, plus each file's bare name when unique."""
    found, bare = {}, {}
    for base, _dirs, files in os.walk(MODULE_UTILS):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, MODULE_UTILS)[:-3].replace(os.sep, ".")
            if rel.endswith(".__init__"):
                rel = rel[:-len(".__init__")]
            found[rel] = path
            bare.setdefault(rel.rsplit(".", 1)[-1], []).append(path)
    for name, paths in bare.items():
        if len(paths) == 1 and name not in found:
            found[name] = paths[0]
    return found


def _defined(path, names):
    """True when ``names`` (e.g. ["judge"] or ["RootLock", "acquire"]) is defined in path."""
    with open(path) as handle:
        tree = ast.parse(handle.read())
    scope, owner = tree.body, None
    for index, name in enumerate(names):
        hit = None
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                hit = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    elts = target.elts if isinstance(target, ast.Tuple) else [target]
                    if any(isinstance(e, ast.Name) and e.id == name for e in elts):
                        hit = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                # imported under its own name only: an alias is no name of that file
                if any(a.asname is None and a.name.split(".")[-1] == name
                       for a in node.names):
                    hit = node
        if hit is None and index and isinstance(owner, ast.ClassDef):
            # an instance attribute: ``self.<name> = ...`` in one of the class's methods
            hit = next((n for n in ast.walk(owner) if isinstance(n, ast.Attribute)
                        and isinstance(n.ctx, ast.Store) and n.attr == name
                        and isinstance(n.value, ast.Name) and n.value.id == "self"), None)
        if hit is None:
            return False
        if index < len(names) - 1:
            if not isinstance(hit, ast.ClassDef):
                return False
            scope, owner = hit.body, hit
    return True


def _files_named(name):
    for top in FILE_TOPS:
        for _base, _dirs, files in os.walk(os.path.join(REPO, top)):
            if name in files:
                return True
    return False


# The module_utils packages of the layout before platform/subjects/engines/programs.
OLD_PACKAGES = ("core", "readers", "writers", "checks", "parts", "output", "onhost", "fleet")


def problems():
    modules = _modules()
    out = []
    for span in _spans():
        if "<" in span or " " in span or "(" in span or "*" in span:
            continue
        head = re.split(r"[/.]", span.replace("plugins/module_utils/", ""), maxsplit=1)[0]
        if head in OLD_PACKAGES and ("/" in span or DOTTED.match(span)) and \
                not span.startswith(ROOTS[1:]) and head not in modules:
            out.append("%s: a package of the old layout (platform, subjects, engines, "
                       "programs now)" % span)
            continue
        if "::" in span:  # a test id: its file and the test's name in it
            path, _sep, test = span.partition("::")
            full = os.path.join(REPO, path)
            if not os.path.exists(full) or not _defined(full, test.split("::")):
                out.append("%s: no such test" % span)
            continue
        if "/" in span and not span.startswith("/"):
            path = span.rstrip("/")
            if span.startswith(ROOTS):
                if not os.path.exists(os.path.join(REPO, path)):
                    out.append("%s: no such path" % span)
            elif span.split("/", 1)[0] in set(m.split(".")[0] for m in modules):
                full = os.path.join(MODULE_UTILS, path)
                if not (os.path.exists(full) or os.path.exists(full + ".py")):
                    out.append("%s: no such path under plugins/module_utils" % span)
            continue
        if re.match(r"^[a-z0-9_.-]+\.(py|yml|yaml|md)$", span):
            if not _files_named(span):
                out.append("%s: no file of that name" % span)
            continue
        if DOTTED.match(span):
            parts = span.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                head = ".".join(parts[:cut])
                if head in modules:
                    if not _defined(modules[head], parts[cut:]):
                        out.append("%s: %s defines no %s" % (
                            span, os.path.relpath(modules[head], REPO), ".".join(parts[cut:])))
                    break
    return out


def _facts_listed():
    """The fact names the layer picture lists after "the facts document"."""
    with open(DOC) as handle:
        text = handle.read()
    block = text.split("the facts document (host_audit's RETURN):", 1)[1]
    block = block.split("A missing file", 1)[0]
    return set(w.strip(" ,.") for w in block.split() if w.strip(" ,."))


def test_the_layer_picture_lists_every_fact_collect_returns(tmp_path):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts

    assert _facts_listed() == set(facts.collect(str(tmp_path), None))


def test_every_name_the_page_cites_exists():
    assert problems() == []


@pytest.mark.parametrize("span, ok", [
    ("runner.QUERY_TIMEOUT_S", True),
    ("runner.NO_SUCH_LIMIT", False),
    ("engines.fleet.fleet_run.judge", True),
    ("plugins/module_utils/no_such.py", False),
    ("no_such_file.py", False),
    ("tests/unit/test_architecture_doc.py::test_every_name_the_page_cites_exists", True),
    ("tests/unit/test_architecture_doc.py::test_gone", False),
    ("readers/kernel_log.py", False),
    ("plugins/module_utils/core/runner.py", False),
    ("checks.run.audit", False),
    ("engines.audit.audit.audit", True),
    ("hostfs._stat", False),             # hostfs imports stat as _stat: an alias is no name
    ("facts.host_path", True),
])
def test_the_checker_tells_a_real_name_from_a_stale_one(span, ok, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_spans", lambda: [span])
    assert (problems() == []) is ok


def test_every_module_has_its_readme_row():
    """The modules table of the README has a row for every module ("Adding a module", 6)."""
    with open(os.path.join(REPO, "README.md")) as handle:
        rows = set(re.findall(r"^\| `([a-z_]+)` \|", handle.read(), re.M))
    modules = set(name[:-3] for name in os.listdir(os.path.join(REPO, "plugins", "modules"))
                  if name.endswith(".py") and name != "__init__.py")
    assert sorted(modules - rows) == []
