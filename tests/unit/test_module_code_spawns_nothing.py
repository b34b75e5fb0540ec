"""ansible-core 2.21's sanity (pylint ``ansible-bad-function``) refuses a process started in
module code other than through ``AnsibleModule.run_command``; 2.19's does not check it. The
same rule here, so the 2.19 lane fails on it too: no call of ``subprocess.*``, ``os.system``,
``os.popen``, ``os.spawn*``, ``os.posix_spawn*`` or ``os.exec*`` anywhere in plugins/modules
or plugins/module_utils, and ``subprocess`` imported only in a host program's
``if __name__ == "__main__":`` block, which hands it to the runner (runner.Runner(processes=))."""

import ast
import os

import pytest

PLUGINS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "plugins")
OS_SPAWNERS = ("system", "popen", "spawn", "posix_spawn", "exec", "fork")


def _files():
    for sub in ("modules", "module_utils"):
        for folder, _dirs, names in os.walk(os.path.join(PLUGINS, sub)):
            for name in sorted(names):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)


def _main_block_lines(tree):
    lines = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and \
                "__main__" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if hasattr(sub, "lineno"):
                    lines.add(sub.lineno)
    return lines


def problems(path):
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    allowed = _main_block_lines(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""]
            if any(n.split(".")[0] == "subprocess" for n in names) and \
                    node.lineno not in allowed:
                found.append("%d: imports subprocess outside __main__" % node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name):
            owner, attr = node.func.value.id, node.func.attr
            if owner == "subprocess" or (owner == "os" and attr.startswith(OS_SPAWNERS)):
                found.append("%d: calls %s.%s (use the runner)" % (node.lineno, owner, attr))
    return found


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: os.path.relpath(p, PLUGINS))
def test_module_code_starts_no_process_itself(path):
    assert problems(path) == []


def test_the_guard_sees_what_ansible_test_refuses(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nimport subprocess\n\n\ndef f():\n    subprocess.run(['true'])\n"
                   "    os.system('true')\n\n\nif __name__ == '__main__':\n"
                   "    import subprocess as ok\n")
    assert problems(str(bad)) == ["2: imports subprocess outside __main__",
                                  "6: calls subprocess.run (use the runner)",
                                  "7: calls os.system (use the runner)"]
