"""The host platforms the real-tool tests run on, and how a test runs on one that is not
this machine.

    bookworm  Debian 12, the userland of Proxmox VE 8 (dkms 3.0.10, systemd 252, Python 3.11)
    trixie    Debian 13, the userland of Proxmox VE 9 (dkms 3.2.x, systemd 257, Python 3.13)

A test that takes the ``suite`` fixture (tests/integration/conftest.py) runs once per suite.
On the suite this machine runs, it runs here as any test does. On the other suite, its
fixtures are not set up here at all: pytest runs the very same test id inside that suite's
test image (scripts/build-test-image.sh <suite>; python3-pytest is in it), with this
checkout mounted read-only at the same path, so the same assertions meet that suite's real
tools. The container has no network, no privileges, and its own /etc, /var and /lib/modules.
"""

import functools
import os
import shutil
import subprocess

import pytest

SUITES = ("bookworm", "trixie")
TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
CONTAINERS_CONF = os.path.join(REPO, "molecule/shared/containers.conf")
# the suite's tools the tests meet there, for the test ids' readers
TOOLS = {
    "bookworm": "dkms 3.0.10, systemd 252, initramfs-tools 0.142, procps 4.0.2, Python 3.11",
    "trixie": "dkms 3.2.2, systemd 257, initramfs-tools 0.148.4, procps 4.0.4, Python 3.13",
}


def native_suite(os_release="/etc/os-release"):
    """The Debian suite this machine (or container) runs: VERSION_CODENAME, else None."""
    try:
        with open(os_release) as handle:
            for line in handle:
                if line.startswith("VERSION_CODENAME="):
                    return line.split("=", 1)[1].strip().strip('"') or None
    except OSError:
        pass
    return None


def image(suite):
    """The suite's test image (scripts/build-test-image.sh names it the same way)."""
    return "%s:%s" % (os.environ.get("GPUHOST_TEST_IMAGE_REPO", "localhost/gpuhost-test"), suite)


def podman(*args, timeout=120, check=False):
    env = dict(os.environ, CONTAINERS_CONF=CONTAINERS_CONF)
    return subprocess.run(["podman"] + list(args), capture_output=True, text=True, env=env,
                          timeout=timeout, check=check)


def require_image(suite):
    """Fail (under make test, GPUHOST_TEST_STRICT) or skip when podman or the image is
    missing: the Makefile installs podman and builds both images before the tier."""
    missing = pytest.fail if os.environ.get("GPUHOST_TEST_STRICT") else pytest.skip
    if shutil.which("podman") is None:
        missing("podman not installed (make integration installs it)")
    # podman waits for its storage lock while another `podman import` (an image build of
    # another checkout) holds it: minutes on a loaded machine
    if podman("image", "exists", image(suite), timeout=900).returncode != 0:
        missing("test image %s not built (scripts/build-test-image.sh %s)" % (image(suite), suite))


def _ansible_package():
    """The folder holding this venv's ``ansible`` package (its module_utils are what the
    modules run with on a host: mounted into the container, which has no ansible-core) and
    ``yaml`` (the fixtures read YAML)."""
    import ansible
    return os.path.dirname(os.path.dirname(os.path.realpath(ansible.__file__)))


def run_inside(nodeid, suite, timeout=900):
    """Run pytest test ``nodeid`` (or several, space-separated) inside ``suite``'s image;
    returns (rc, output)."""
    require_image(suite)
    site = _ansible_package()
    proc = podman(
        "run", "--rm", "--network=none", "--ulimit", "nofile=1024:1024",
        "--ulimit", "nproc=1024:1024", "-v", "%s:%s:ro" % (REPO, REPO), "-w", REPO,
        "-v", "%s/ansible:/opt/gpuhost-ansible/ansible:ro" % site,
        # PyYAML for the test fixtures (pure Python there: its C part is built for 3.11)
        "-v", "%s/yaml:/opt/gpuhost-ansible/yaml:ro" % site,
        "-e", "PYTHONPATH=/opt/gpuhost-ansible",
        "-e", "GPUHOST_TEST_STRICT=%s" % os.environ.get("GPUHOST_TEST_STRICT", ""),
        "-e", "PYTEST_DEBUG_TEMPROOT=/tmp", "-e", "PYTHONDONTWRITEBYTECODE=1",
        "-e", "LC_ALL=C.UTF-8",
        image(suite), "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
        "--rootdir", REPO, "-c", os.path.join(REPO, "pytest.ini"), *nodeid.split(),
        timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


# ------------------------------------------------------------------------- the switch
# (tests/conftest.py imports the fixture and the hook from here)
#
# A test that takes the ``suite`` fixture runs once per Debian suite; the run for the suite
# this machine is not runs the same test id inside that suite's test image instead of here.
# A test file that sets ``IN_IMAGE = True`` runs inside the image on every suite, this
# machine's too: it acts on the root it runs in (/boot, /etc/modprobe.d), which here would
# be this machine's. A test file that sets ``DRIVES_IMAGE = True`` runs here on every
# suite: its ``suite`` names the image it starts a container of and drives from here (a
# playbook over the podman connection).

NATIVE = native_suite()
# podman writes this file into every container it runs
INSIDE = os.path.exists("/run/.containerenv")


@pytest.fixture(params=SUITES)
def suite(request):
    return request.param


def _inside(item, suite):
    # pytest-xdist's --dist loadgroup names a grouped test "<id>@<group>": not an id the
    # pytest inside the image knows
    nodeid = item.nodeid.split("@", 1)[0]
    rc, output = run_inside(nodeid, suite)
    lines = output.strip().splitlines()
    summary = lines[-1] if lines else ""
    if rc == 0 and "skipped" in summary and "passed" not in summary:
        pytest.skip("inside %s: %s" % (image(suite), output[-1000:]))
    if rc != 0 or "1 passed" not in summary:
        pytest.fail("%s inside %s (%s) exited %s:\n%s" % (
            item.nodeid, image(suite), TOOLS.get(suite, "?"), rc,
            output[-8000:]), pytrace=False)
    print(output[-3000:])


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        suite = params.get("suite")
        if suite is None or getattr(item.module, "DRIVES_IMAGE", False):
            continue
        if suite == NATIVE and (INSIDE or not getattr(item.module, "IN_IMAGE", False)):
            continue
        # no fixture of this test is set up here: the container sets them up for itself
        item.setup = lambda: None
        item.runtest = functools.partial(_inside, item, suite)
