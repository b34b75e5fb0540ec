"""Hostile cases: bad option values, hostile trees, paths that leave the root."""

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from digest import changed, digest  # noqa: E402
from fixtures import hosts  # noqa: E402


@pytest.fixture
def seed(tmp_path):
    """A seed host tree of the test's own, to change."""
    root = tmp_path / "host"
    root.mkdir()
    hosts.seed_host(str(root))
    return str(root)


class _Shared(object):
    """One seed host tree for the cases that must leave it as it is (refusals): built once,
    checked against its first digest after every case and rebuilt when a case changed it
    (that case fails on its own digest assertion; the next one still gets a clean tree)."""

    def __init__(self, folder):
        self.root = os.path.join(folder, "host")
        self._build()

    def _build(self):
        if os.path.exists(self.root):
            shutil.rmtree(self.root)
        os.mkdir(self.root)
        hosts.seed_host(self.root)
        self.pristine = digest(os.path.dirname(self.root))

    def check(self):
        if changed(self.pristine, digest(os.path.dirname(self.root))):
            self._build()


@pytest.fixture(scope="session")
def _shared(tmp_path_factory):
    return _Shared(str(tmp_path_factory.mktemp("shared-seed")))


@pytest.fixture
def shared_seed(_shared):
    """The seed host tree shared by the cases that only read it (a refused option must
    change nothing: ``refused`` asserts that on the folder around it)."""
    yield _shared.root
    _shared.check()
