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
    """{dotted name relative to module_utils: file}, plus each file's bare name where one file
    has it (``kernel_log``); a bare name that is a folder and a file (``audit``, ``cuda``) is
    the file, since a package's ``__init__.py`` is a docstring only."""
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
        files = [p for p in paths if not p.endswith("__init__.py")] or paths
        if len(files) == 1 and name not in found:
            found[name] = files[0]
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
    if os.path.isfile(os.path.join(REPO, name)):
        return True
    for top in FILE_TOPS:
        for _base, _dirs, files in os.walk(os.path.join(REPO, top)):
            if name in files:
                return True
    return False


# The module_utils packages of the layout before platform/subjects/engines/programs.
OLD_PACKAGES = ("core", "readers", "writers", "checks", "parts", "output", "onhost", "fleet")
# Dotted names the page may cite that are no file of the collection: the standard library,
# ansible, FQCNs, and the variables a part or an action plugin is handed.
OUTSIDE = ("os", "sys", "ansible", "gpuhost", "zipimporter", "ctx", "hostvars")


def _old_package(span, modules):
    """True for ``readers/x.py``, ``plugins/module_utils/core/``, ``checks.run``: a path or
    dotted name in a module_utils package of the old layout (``engines/fleet/`` is new)."""
    rel = span.replace("plugins/module_utils/", "")
    if span.startswith(ROOTS) and rel == span:
        return False
    head = re.split(r"[/.]", rel, maxsplit=1)[0]
    if head not in OLD_PACKAGES or not ("/" in rel or DOTTED.match(rel)):
        return False
    # a dotted name whose head is today's file of that name (none today) is no old package
    return "/" in rel or head not in modules or modules[head].endswith("__init__.py")


def _class_defines(modules, names):
    """True when some module_utils file defines class ``names[0]`` with ``names[1:]``."""
    return any(_defined(path, names) for path in set(modules.values()))


def _check_path(span, modules):
    """A repository path, or one relative to plugins/module_utils; with a placeholder
    (``subjects/<subject>/<column>_check.py``) the folder before it must exist."""
    path = span.split("<", 1)[0]
    if "<" in span:
        path = path.rsplit("/", 1)[0] if "/" in path else ""
        if not path:
            return None
    path = path.rstrip("/")
    if span.startswith(ROOTS):
        if not os.path.exists(os.path.join(REPO, path)):
            return "%s: no such path" % span
    elif span.split("/", 1)[0] in set(m.split(".")[0] for m in modules):
        full = os.path.join(MODULE_UTILS, path)
        if not (os.path.exists(full) or os.path.exists(full + ".py")):
            return "%s: no such path under plugins/module_utils" % span
    return None


def _check_dotted(span, modules):
    """``module.name`` (or ``folder.module.name``): the module is a module_utils file and
    the name is defined in it, not imported under an alias; a head that is no file of the
    collection fails (``bootcfg.parse``) unless it is a class of one (``FleetCheck.forget``)
    or outside the collection (``os.system``)."""
    parts = span.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in modules:
            if not _defined(modules[head], parts[cut:]):
                return "%s: %s defines no %s" % (
                    span, os.path.relpath(modules[head], REPO), ".".join(parts[cut:]))
            return None
    if parts[0] in OUTSIDE:
        return None
    if parts[0][:1].isupper() and _class_defines(modules, parts):
        return None
    return "%s: no module_utils file %s" % (span, parts[0])


def problems():
    modules = _modules()
    out = []
    for span in _spans():
        call = re.match(r"^([A-Za-z_][A-Za-z0-9_.]*)\(", span)
        if call and DOTTED.match(call.group(1)):
            span = call.group(1)  # a call: the callee must exist (``facts.collect(root)``)
        if " " in span or "(" in span or "=" in span:
            continue  # a command or a call with arguments: what it names is checked elsewhere
        if _old_package(span, modules):
            out.append("%s: a package of the old layout (platform, subjects, engines, "
                       "programs now)" % span)
            continue
        if "*" in span:
            continue  # a glob
        if "::" in span:  # a test id: its file and the test's name in it
            path, _sep, test = span.partition("::")
            full = os.path.join(REPO, path)
            if not os.path.exists(full) or not _defined(full, test.split("::")):
                out.append("%s: no such test" % span)
            continue
        if "/" in span and not span.startswith("/"):
            problem = _check_path(span, modules)
            if problem:
                out.append(problem)
            continue
        if "<" in span:
            continue
        if re.match(r"^[A-Za-z0-9_.-]+\.(py|yml|yaml|md|cfg)$", span):
            if not _files_named(span):
                out.append("%s: no file of that name" % span)
            continue
        if DOTTED.match(span):
            problem = _check_dotted(span, modules)
            if problem:
                out.append(problem)
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


def _subject_table():
    """{folder: (declarations, readers, checks, writes)} from the page's "Subject folders"
    table."""
    with open(DOC) as handle:
        text = handle.read()
    block = text.split("## Subject folders", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`subjects/"):
            rows[cells[0].strip("`")] = tuple(
                set(SPAN.findall(c)) for c in cells[1:])
    return rows


def test_the_subject_table_lists_every_file_of_every_subject_folder():
    base = os.path.join(MODULE_UTILS, "subjects")
    tree = dict(("subjects/%s/" % name, set(
        f for f in os.listdir(os.path.join(base, name))
        if f.endswith(".py") and f != "__init__.py"))
        for name in os.listdir(base) if os.path.isdir(os.path.join(base, name))
        and name != "__pycache__")
    table = _subject_table()
    assert sorted(table) == sorted(tree)
    for folder, (declared, readers, checks, writes) in table.items():
        assert declared | readers | checks | writes == tree[folder], folder
        assert not (readers & checks or readers & writes or checks & writes), folder
        assert checks == set(f for f in tree[folder] if f.endswith("_check.py")), folder
        assert declared == set(f for f in tree[folder] if f.startswith("audit_")), folder


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
    ("audit_peermem.host_path", True),   # imported under its own name: a name of the file
    # (a) a path or file name that does not exist
    ("subjects/pcie/no_such.py", False),
    ("engines/tune/tune_registry.py", True),
    ("subjects/no_such/<column>_check.py", False),   # the folder before a placeholder
    ("subjects/<subject>/<column>_check.py", True),
    ("README.md", True),
    ("NO_SUCH.md", False),
    # (b) a dotted name whose module or attribute does not exist, aliases not followed
    ("bootcfg.parse", False),            # no module_utils file of that name
    ("hostlog.read", False),
    ("gpuuse.count_facts", False),
    ("cpu_write.IdlePart", False),
    ("cpuidle_state.IdlePart", True),
    ("registry.PARTS", False),
    ("tune_registry.PARTS", True),
    ("audit.CHECKS", True),              # engines/audit/audit.py, not the package
    ("audit.no_such", False),
    ("FleetCheck.forget", True),         # a class of some module_utils file
    ("FleetCheck.no_such", False),
    ("os.system", True),                 # outside the collection
    ("facts.collect(root, wanted)", True),
    ("capture.capture(root, wanted)", False),  # a call's callee is checked too
    ("kernel_check.kernels", True),      # imported under its own name
    # (c) a package of the old layout
    ("core/", False),
    ("fleet/<id>.py", False),
    ("checks/*", False),
    ("onhost.pci.read_config", False),
    ("output/files.py", False),
    ("engines/fleet/", True),
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
