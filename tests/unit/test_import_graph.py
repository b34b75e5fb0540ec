"""The import graph of the collection's Python, read from the source (``ast``, nothing
imported): no circle, and no module_utils file over 500 lines.

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
    package = (name or "").split(".")
    if not path.endswith("__init__.py"):
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
    # top level (report imports metrics), lazy (facts imports bootloader inside a function)
    assert "module_utils.engines.report.metrics" in edges["module_utils.engines.report.report"]
    assert "module_utils.subjects.boot.boot_entries" in edges["module_utils.engines.audit.facts"]
    assert "module_utils.engines.report.report" in edges["action.report_merge"]
    assert "module_utils.platform.findings" in edges["module_utils.engines.audit.check_registry"]


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
