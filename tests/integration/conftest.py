"""The integration tier's platform switch (see tests/platforms.py): a test that takes the
``suite`` fixture runs once per Debian suite; the run for the suite this machine is not
runs the same test id inside that suite's test image instead of here. A test file that sets
``IN_IMAGE = True`` runs inside the image on every suite, this machine's too: it acts on the
root it runs in (/boot, /etc/modprobe.d), which here would be this machine's."""

import os

import functools

import pytest

import platforms

NATIVE = platforms.native_suite()
# podman writes this file into every container it runs
INSIDE = os.path.exists("/run/.containerenv")


@pytest.fixture(params=platforms.SUITES)
def suite(request):
    return request.param


def _inside(item, suite):
    rc, output = platforms.run_inside(item.nodeid, suite)
    lines = output.strip().splitlines()
    summary = lines[-1] if lines else ""
    if rc == 0 and "skipped" in summary and "passed" not in summary:
        pytest.skip("inside %s: %s" % (platforms.image(suite), output[-1000:]))
    if rc != 0 or "1 passed" not in summary:
        pytest.fail("%s inside %s (%s) exited %s:\n%s" % (
            item.nodeid, platforms.image(suite), platforms.TOOLS.get(suite, "?"), rc,
            output[-8000:]), pytrace=False)
    print(output[-3000:])


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        suite = params.get("suite")
        if suite is None:
            continue
        if suite == NATIVE and (INSIDE or not getattr(item.module, "IN_IMAGE", False)):
            continue
        # no fixture of this test is set up here: the container sets them up for itself
        item.setup = lambda: None
        item.runtest = functools.partial(_inside, item, suite)
