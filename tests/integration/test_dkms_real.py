"""dkms_build and the offline tree reader against REAL dkms and REAL Debian headers, on
both platforms (the ``suite`` fixture, tests/platforms.py): Debian 12's dkms 3.0.10 on this
machine, Debian 13's dkms 3.2.2 and its ``6.12.107+deb13-amd64`` headers inside the trixie
test image.

Adds tests/integration/dkms-hello (module ``gpuhost-hello``) to the dkms, builds
and installs it with the dkms_build module for the kernel whose headers are installed, and
removes it again (``dkms remove --all``), also deleting the ``modules.*`` files depmod
created in a headers-only ``/lib/modules/<k>``. The module is never loaded.
Needs root, dkms, linux-headers-amd64 and build-essential (INTEGRATION_PKGS).

What differs between the two dkms, as the real programs print it (checked here):
- missing headers: the same message on stderr; exit 1 (3.0.10), 21 (3.2.2);
- ``dkms autoinstall`` for a kernel without headers: exit 11 and the message (3.0.10),
  exit 0 and silence (3.2.2): an exit code says nothing about the modules there;
- status warnings reworded (``Differences between built and installed modules``);
- 3.2.2 installs ``.ko.xz`` for Debian 13's kernels (CONFIG_MODULE_COMPRESS_XZ).
"""

import glob
import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import kernels
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.modules import dkms_build
from modrun import run_module

# One pytest-xdist worker runs this whole file (--dist loadgroup):
# both tests use the machine's one real DKMS tree.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dkms_real")]

NAME, VERSION = "gpuhost-hello", "0.1"
# a kernel with no headers at all, spelt as each suite spells its releases
NO_HEADERS = {"bookworm": "6.1.0-99-amd64", "trixie": "6.12.99+deb13-amd64"}
# what each suite's real dkms says (see the module docstring)
DIFF_WARNING = {"bookworm": "WARNING! Diff between built and installed module!",
                "trixie": "Differences between built and installed modules"}
NO_HEADERS_RC = {"bookworm": 1, "trixie": 21}
AUTOINSTALL_NO_HEADERS_RC = {"bookworm": 11, "trixie": 0}
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dkms-hello")
USRSRC = "/usr/src/%s-%s" % (NAME, VERSION)


def _headers_kernel():
    found = [os.path.basename(os.path.dirname(p)) for p in glob.glob("/lib/modules/*/build")
             if kernels.has_headers("/", os.path.basename(os.path.dirname(p)))]
    return sorted(found, key=kernels.kernel_sort_key)[-1] if found else None


def _dkms(*args, check=True):
    return subprocess.run(["dkms"] + list(args), capture_output=True, text=True, check=check,
                          env=dict(os.environ, LC_ALL="C"))


@pytest.fixture
def hello():
    if os.geteuid() != 0 or not shutil.which("dkms"):
        pytest.skip("needs root and dkms (scripts/apt-ensure.sh dkms linux-headers-amd64 "
                    "build-essential kmod)")
    release = _headers_kernel()
    if release is None:
        (pytest.fail if os.environ.get("GPUHOST_TEST_STRICT") else pytest.skip)(
            "no kernel headers under /lib/modules/*/build (install linux-headers-amd64)")
    libdir = "/lib/modules/%s" % release
    existing = set(os.listdir(libdir))
    _dkms("remove", "-m", NAME, "-v", VERSION, "--all", check=False)
    shutil.rmtree(USRSRC, ignore_errors=True)
    shutil.copytree(SOURCE, USRSRC)
    _dkms("add", "-m", NAME, "-v", VERSION)
    try:
        yield release
    finally:
        _dkms("remove", "-m", NAME, "-v", VERSION, "--all", check=False)
        shutil.rmtree(USRSRC, ignore_errors=True)
        for entry in set(os.listdir(libdir)) - existing:
            path = os.path.join(libdir, entry)
            if entry.startswith("modules.") and os.path.isfile(path):
                os.unlink(path)
            elif entry == "updates" and os.path.isdir(path):
                shutil.rmtree(path)
        assert NAME not in _dkms("status").stdout


def _key(entries):
    return sorted((e["name"], e["version"], e["kernel"], e["arch"], e["state"], e["warning"])
                  for e in entries)


def test_dkms_build_real(suite, hello, snapshot_tree, record_property):
    release = hello
    args = {"name": NAME, "kernel": release}
    # offline reader agrees with dkms while only added
    assert _key(dkms.tree_status("/")) == _key(dkms.parse_status(_dkms("status").stdout))

    before = snapshot_tree("/var/lib/dkms/%s" % NAME)
    planned = run_module(dkms_build, args, check_mode=True)
    assert planned["changed"] and [c[1] for c in planned["commands"]] == ["build", "install"]
    assert snapshot_tree("/var/lib/dkms/%s" % NAME) == before

    start = time.monotonic()
    result = run_module(dkms_build, args)
    first = time.monotonic() - start
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert result["version"] == VERSION and result["state_before"] == "added"
    assert result["state_after"] == "installed"
    # .ko on Debian 12; Debian 13's kernels compress their modules and dkms 3.2 follows
    ko = "/lib/modules/%s/updates/dkms/gpuhost_hello.ko%s" % (
        release, {"bookworm": "", "trixie": ".xz"}[suite])
    assert result["modules"] == [ko] and os.path.isfile(ko)
    status = _dkms("status", "-m", NAME, "-v", VERSION, "-k", release).stdout
    assert status.strip() == "%s/%s, %s, x86_64: installed" % (NAME, VERSION, release)
    # the offline reader must agree with real dkms on the whole tree
    offline = dkms.tree_status("/")
    assert _key(offline) == _key(dkms.parse_status(_dkms("status").stdout))
    assert [e["modules"] for e in offline if e["name"] == NAME] == [[ko]]

    start = time.monotonic()
    again = run_module(dkms_build, args)
    second = time.monotonic() - start
    assert again["changed"] is False and again["commands"] == [] and again["modules"] == [ko]

    # a changed installed copy shows up as dkms' own warning, offline too
    with open(ko, "ab") as handle:
        handle.write(b"\0")
    real = dkms.parse_status(_dkms("status").stdout)
    assert [e["warning"] for e in real if e["name"] == NAME] == [DIFF_WARNING[suite]]
    assert _key(dkms.tree_status("/")) == _key(real)
    record_property("dkms_build_first_s", round(first, 2))
    record_property("dkms_build_second_s", round(second, 2))
    print("dkms_build: build+install %.2f s, idempotent re-run %.2f s" % (first, second))


def test_missing_headers_real_dkms_message(suite, hello):
    # a kernel with no headers at all: the module fails before dkms runs, naming the package
    missing = NO_HEADERS[suite]
    result = run_module(dkms_build, {"name": NAME, "kernel": missing})
    assert result["failed"]
    assert result["msg"] == ("headers for kernel %s not found at /lib/modules/%s/build: "
                             "install linux-headers-%s" % (missing, missing, missing))
    # and real dkms exits with its own message (1 on 3.0.10, 21 on 3.2.2); dkms_write
    # judges it by the message and the tree, never by the code
    proc = _dkms("build", "-m", NAME, "-v", VERSION, "-k", missing, check=False)
    assert proc.returncode == NO_HEADERS_RC[suite]
    assert "Your kernel headers for kernel %s cannot be found" % missing in proc.stderr
    # what a kernel package's hook runs: 3.2.2 says nothing and exits 0 for a kernel
    # without headers, so only the tree tells (the reboot gate reads it, kernel_state)
    proc = _dkms("autoinstall", "-k", missing, check=False)
    assert proc.returncode == AUTOINSTALL_NO_HEADERS_RC[suite], proc.stdout + proc.stderr
    assert ("cannot be found" in proc.stderr) is (suite == "bookworm")
    assert [e["state"] for e in dkms.tree_status("/") if e["name"] == NAME] == ["added"]
    assert dkms.state_for(dkms.parse_status(_dkms("status").stdout), NAME, VERSION,
                          missing) == "added"
