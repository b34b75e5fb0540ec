"""The integration tier's platform switch (see tests/platforms.py): a test that takes the
``suite`` fixture runs once per Debian suite; the run for the suite this machine is not
runs the same test id inside that suite's test image instead of here."""

import functools

import pytest

import platforms

NATIVE = platforms.native_suite()


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
        if suite is None or suite == NATIVE:
            continue
        # no fixture of this test is set up here: the container sets them up for itself
        item.setup = lambda: None
        item.runtest = functools.partial(_inside, item, suite)
