"""Every module's validation rules sit beside its spec and every module runs them.

A module with no rules of its own fails here (it once died with a KeyError on the host,
looking itself up in validate.RULES), and so does one that changes the host (validate.LOCKING)
without running inside ``check_module``'s context manager, which holds and releases the
root's lock (it once released it by patching the module's exit_json).
"""

import ast
import glob
import importlib
import os

import pytest
from conftest import REPO

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate

MODULES = sorted(os.path.basename(p)[:-3]
                 for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py")))


def _source(name):
    with open(os.path.join(REPO, "plugins", "modules", name + ".py")) as handle:
        return handle.read()


def _check_calls(name):
    """``(module name, rules expression, inside a with)`` of each check_module call: the
    call itself in the ``with``, or a name bound to it (``held = check_module(...)``, for
    the ``checked`` values) that the next ``with`` holds."""
    tree = ast.parse(_source(name))
    calls = []
    with_calls = set()
    bound = dict()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound[node.targets[0].id] = id(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                with_calls.add(id(item.context_expr))
                if isinstance(item.context_expr, ast.Name) and item.context_expr.id in bound:
                    with_calls.add(bound[item.context_expr.id])
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_module":
            args = node.args
            calls.append((getattr(args[1], "value", None) if len(args) > 1 else None,
                          ast.unparse(args[2]) if len(args) > 2 else None,
                          id(node) in with_calls))
    return calls


def test_every_module_is_found():
    assert len(MODULES) >= 26 and "host_audit" in MODULES and "rollout_report" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_each_module_has_its_rules_and_runs_them_inside_check_module(name):
    mod = importlib.import_module("ansible_collections.gpuhost.tuning.plugins.modules." + name)
    assert callable(getattr(mod, "rules", None)), "%s has no rules(params) beside its spec" % name
    calls = _check_calls(name)
    assert calls == [(name, "rules", True)], calls


def test_the_locking_modules_exist():
    assert set(validate.LOCKING) <= set(MODULES)


def test_a_module_without_rules_is_refused_before_it_runs():
    with pytest.raises(TypeError, match="no validation rules"):
        validate.check(None, {})


def test_the_lock_is_released_when_the_module_exits(tmp_path):
    """exit_json raises SystemExit inside the with block: the lock goes with it."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
        LockError,
        RootLock,
    )

    class Module(object):
        check_mode = False
        params = {"root": str(tmp_path)}

        def fail_json(self, **kwargs):
            raise AssertionError(kwargs)

        def exit_json(self, **kwargs):
            raise SystemExit(0)

    module = Module()
    with pytest.raises(SystemExit):
        with validate.check_module(module, "sysctl_settings", lambda p: None) as lock:
            assert lock is not None
            other = RootLock(str(tmp_path), "other")
            with pytest.raises(LockError):
                other.acquire()
            module.exit_json(changed=False)
    again = RootLock(str(tmp_path), "again")
    again.acquire()
    again.release()
    # nothing was patched on the module
    assert "exit_json" not in vars(module) and "fail_json" not in vars(module)
