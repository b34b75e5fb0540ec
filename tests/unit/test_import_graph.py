"""The import graph of the collection's Python, read from the source (``ast``, nothing
imported): the layers hold (platform <- subjects <- engines <- programs <- plugins: no import
points up, no circle between subject folders or engine folders), no import sits inside a
function but the listed lazy ones, no circle, and no module_utils file over 500 lines.

Edges are every ``import`` of a collection file by another, lazy ones inside functions
included (a lazy import closes a circle as surely as a top-level one; it only hides it from
the interpreter). The graph covers plugins/module_utils, modules, action, filter and
plugin_utils.

Two allow-lists say what is still to be done, and both only shrink:

- ``KNOWN_CIRCLES``: circles being removed on another branch (each the set of its files).
  A circle that is not listed fails; a listed one that is gone fails too, so the entry is
  taken off the list when the circle goes.
- ``OVERSIZE``: module_utils files still over the limit, with their line count when they
  were listed. A listed file that grows past its count fails, as does an unlisted file over
  the limit, and an entry whose file is now within the limit (take it off the list).
"""

import ast
import collections
import os

from conftest import REPO

PLUGINS = os.path.join(REPO, "plugins")
LAYERS = ("module_utils", "modules", "action", "filter", "plugin_utils")
PKG = "ansible_collections.gpuhost.tuning.plugins."
MAX_LINES = 500

# snapshot <-> sysctl_write / placement_write: removed by the tune part registry (issue 23
# item 2, branch parts); the lead empties this after merging it.
KNOWN_CIRCLES = ()

# module_utils files still to be split (issue 23 items 2 and 4), lines when listed.
# Paths below module_utils (scripts/relayout.py rewrites them); boot_entries, driver_stage and
# validate grew by their imports, wrapped when the relayout made them longer.
OVERSIZE = {
}


def files():
    """``{dotted name below plugins: path}`` of every Python file of the layers."""
    out = {}
    for layer in LAYERS:
        for folder, _dirs, names in os.walk(os.path.join(PLUGINS, layer)):
            for name in names:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, PLUGINS)[:-3].replace(os.sep, ".")
                if dotted.endswith(".__init__"):
                    dotted = dotted[:-len(".__init__")]
                out[dotted] = path
    return out


def imports(path, known, name=None):
    """The collection files ``path`` imports (names as :func:`files` gives them); relative
    imports (``from . import hostfs``) are resolved against ``name``, the file's own."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    return _imports_of(tree, known, name, path.endswith("__init__.py"))


def _imports_of(tree, known, name, is_package):
    package = (name or "").split(".")
    if not is_package:
        package = package[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package[:len(package) - (node.level - 1)]
                            + ([node.module] if node.module else []))
            for alias in node.names:
                if "%s.%s" % (base, alias.name) in known:
                    out.add("%s.%s" % (base, alias.name))
                elif base in known:
                    out.add(base)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PKG):
            base = node.module[len(PKG):]
            for alias in node.names:
                if "%s.%s" % (base, alias.name) in known:
                    out.add("%s.%s" % (base, alias.name))
                elif base in known:
                    out.add(base)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PKG) and alias.name[len(PKG):] in known:
                    out.add(alias.name[len(PKG):])
    return out


def _lazy_nodes(tree):
    """ids of the import statements inside a function or method of ``tree``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    out.add(id(sub))
    return out


def lazy_imports(path, known, name):
    """The collection files ``path`` imports inside a function (names as :func:`files`)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    lazy = _lazy_nodes(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) not in lazy or not isinstance(node, ast.ImportFrom):
            continue
        module = ast.Module(body=[node], type_ignores=[])
        out |= _imports_of(module, known, name, path.endswith("__init__.py"))
    return out


def graph():
    known = files()
    out = {}
    for name, path in known.items():
        out[name] = imports(path, known, name) - {name}
    return out


def components(edges):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(start):
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    out.append(frozenset(members))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def shortest_circle(edges, members):
    """One shortest circle through the component ``members``, as ``a -> b -> a``."""
    best = None
    for start in sorted(members):
        parent = {start: None}
        queue = collections.deque([start])
        found = None
        while queue and found is None:
            node = queue.popleft()
            for child in sorted(edges[node] & members):
                if child == start:
                    found = node
                    break
                if child not in parent:
                    parent[child] = node
                    queue.append(child)
        if found is None:
            continue
        path = [found]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])
        path = list(reversed(path)) + [start]
        if best is None or len(path) < len(best):
            best = path
    return " -> ".join(best)


def test_the_graph_sees_lazy_and_top_level_imports():
    edges = graph()
    # top level (report imports metrics), lazy (host_audit imports cuda inside a function)
    assert "module_utils.engines.report.metrics" in edges["module_utils.engines.report.report"]
    assert "module_utils.subjects.cuda.cuda" in edges["modules.host_audit"]
    assert "module_utils.engines.report.report" in edges["action.report_merge"]
    known = files()
    assert "module_utils.subjects.cuda.cuda" in lazy_imports(
        known["modules.host_audit"], known, "modules.host_audit")


def test_relative_imports_are_edges_too(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\nfrom .c import x\nfrom .. import d\n")
    known = {"pkg.sub.a", "pkg.sub.b", "pkg.sub.c", "pkg.d"}
    assert imports(str(tmp_path / "a.py"), known, "pkg.sub.a") == {
        "pkg.sub.b", "pkg.sub.c", "pkg.d"}


def test_components_find_a_circle_and_name_it():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"} - {"e"}}
    assert components(edges) == [frozenset("abc")]
    assert shortest_circle(edges, frozenset("abc")) == "a -> b -> c -> a"


def test_no_import_circle():
    edges = graph()
    found = components(edges)
    new = [shortest_circle(edges, c) for c in found if c not in KNOWN_CIRCLES]
    assert not new, "import circle(s): %s" % "; ".join(new)
    gone = [sorted(c) for c in KNOWN_CIRCLES if c not in found]
    assert not gone, "no longer a circle, take it off KNOWN_CIRCLES: %s" % gone


def test_no_module_utils_file_over_the_limit():
    problems = []
    folder = os.path.join(PLUGINS, "module_utils")
    for base, _dirs, names in os.walk(folder):
        for name in names:
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(base, name), folder)
            with open(os.path.join(base, name), encoding="utf-8") as handle:
                count = sum(1 for _line in handle)
            allowed = OVERSIZE.get(rel)
            if allowed is None and count > MAX_LINES:
                problems.append("%s has %d lines (at most %d): split it"
                                % (rel, count, MAX_LINES))
            elif allowed is not None and count > allowed:
                problems.append("%s grew to %d lines (listed at %d, still to be split below "
                                "%d)" % (rel, count, allowed, MAX_LINES))
            elif allowed is not None and count <= MAX_LINES:
                problems.append("%s is within %d lines now (%d): take it off OVERSIZE"
                                % (rel, MAX_LINES, count))
    missing = [rel for rel in OVERSIZE if not os.path.exists(os.path.join(folder, rel))]
    problems += ["%s is listed in OVERSIZE but gone: take it off" % rel for rel in missing]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------
# layers

# The layers of module_utils, lowest first (docs/architecture.md, "Layers"); every other
# plugin file (modules, action, filter, plugin_utils, doc_fragments) is above them all.
LAYER_ORDER = ("module_utils.platform", "module_utils.subjects", "module_utils.engines",
               "module_utils.programs")
# Folders of a layer whose imports between each other must form no circle.
FOLDERED = ("module_utils.subjects", "module_utils.engines")

# The imports inside a function that stay, each with its reason: a module that runs on every
# host of a fleet compiles only what its call runs (AnsiballZ ships the files either way;
# the host compiles a file only when it is imported). Anything else imported inside a
# function dodges a circle or a layer: move it to the top, or move the code to its layer.
LAZY = {
    ("modules.host_audit", "module_utils.platform.capture_unpack"):
        "only an audit of a capture tarball unpacks one",
    ("modules.host_audit", "module_utils.engines.audit.host_capture"):
        "only host_capture's list of the files the audit reads",
    ("modules.host_audit", "module_utils.subjects.cuda.cuda"):
        "only the opt-in CUDA probe",
    ("module_utils.platform.validate", "module_utils.platform.run_lock"):
        "only a changing module takes the run lock; a read-only one compiles less",
}


def layer(name):
    """The index of ``name``'s layer in LAYER_ORDER; len(LAYER_ORDER) for plugin files."""
    for index, prefix in enumerate(LAYER_ORDER):
        if name == prefix or name.startswith(prefix + "."):
            return index
    return len(LAYER_ORDER)


def folder(name):
    """``module_utils.subjects.pcie`` for a file of a foldered layer, else None."""
    for prefix in FOLDERED:
        if name.startswith(prefix + "."):
            rest = name[len(prefix) + 1:].split(".")
            return prefix + "." + rest[0] if len(rest) > 1 else None
    return None


def upward(edges):
    """``[(file, imported)]``: imports of a file of a higher layer."""
    return sorted((a, b) for a, targets in edges.items() for b in targets
                  if layer(b) > layer(a))


def folder_edges(edges):
    out = dict()
    for a, targets in edges.items():
        fa = folder(a)
        if fa is None:
            continue
        out.setdefault(fa, set())
        for b in targets:
            fb = folder(b)
            if fb is not None and fb != fa and layer(fa) == layer(fb):
                out[fa].add(fb)
                out.setdefault(fb, set())
    return out


def test_every_module_utils_file_is_in_a_layer():
    stray = [n for n in files() if n.startswith("module_utils.") and layer(n) == len(LAYER_ORDER)]
    assert not stray, "module_utils files outside the layers %s: %s" % (LAYER_ORDER, stray)


def test_no_import_points_up_a_layer():
    found = upward(graph())
    assert not found, "imports pointing up a layer (move the code down, or the import " \
        "up):\n" + "\n".join("  %s imports %s" % pair for pair in found)


def test_subject_folders_and_engine_folders_form_no_circle():
    edges = folder_edges(graph())
    found = [shortest_circle(edges, c) for c in components(edges)]
    assert not found, "circle(s) between folders: %s" % "; ".join(found)


def test_no_import_inside_a_function_but_the_listed_lazy_ones():
    known = files()
    found = set()
    for name, path in known.items():
        found |= set((name, target) for target in lazy_imports(path, known, name))
    new = sorted(found - set(LAZY))
    assert not new, "imports inside a function (move them to the top; a documented lazy " \
        "one goes in LAZY with its reason): %s" % new
    gone = sorted(set(LAZY) - found)
    assert not gone, "no longer lazy, take it off LAZY: %s" % gone


def test_the_layer_rules_catch_an_import_pointing_up_and_a_folder_circle():
    edges = {
        "module_utils.platform.hostfs": {"module_utils.subjects.pcie.pci"},
        "module_utils.subjects.pcie.pci": {"module_utils.platform.hostfs",
                                           "module_utils.subjects.cpu.cpu"},
        "module_utils.subjects.cpu.cpu": {"module_utils.subjects.pcie.aer"},
        "module_utils.subjects.pcie.aer": set(),
        "modules.host_audit": {"module_utils.programs.audit_program"},
        "module_utils.programs.audit_program": set(),
    }
    assert upward(edges) == [("module_utils.platform.hostfs", "module_utils.subjects.pcie.pci")]
    assert components(folder_edges(edges)) == [frozenset(
        ["module_utils.subjects.pcie", "module_utils.subjects.cpu"])]


def test_a_lazy_import_is_found_inside_a_method(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from %spkg import top\n\nclass A:\n    def f(self):\n"
                    "        from %spkg import inner\n" % (PKG, PKG))
    known = {"pkg.top", "pkg.inner"}
    assert lazy_imports(str(path), known, "x.m") == {"pkg.inner"}
