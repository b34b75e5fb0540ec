"""Shared pytest set-up.

Makes ``ansible_collections.gpuhost.tuning`` importable from this checkout (a link under
``tests/output``), so unit tests always exercise the live source, and puts ``tests/`` on
``sys.path`` for the fixture builders (``fixtures.*``) and the module runner (``modrun``).
"""

import os
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
LINKS = os.path.join(TESTS, "output", "pathlink")
_link = os.path.join(LINKS, "ansible_collections", "gpuhost", "tuning")
if not os.path.islink(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    try:
        os.symlink(REPO, _link)
    except FileExistsError:
        pass
for _path in (LINKS, TESTS):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def tree_snapshot(root):
    """Every path under ``root`` with its bytes (or link target): for byte-identical checks."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    out[rel] = ("file", handle.read(), os.stat(path).st_mode & 0o7777)
            else:
                out[rel] = ("dir",)
    return out


@pytest.fixture
def snapshot_tree():
    return tree_snapshot


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/unit/golden from the current code (an intended "
                          "change of the audit's output; review the diff)")
