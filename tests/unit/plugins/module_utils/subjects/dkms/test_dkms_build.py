"""dkms_write: the dkms commands that take a module from its state to the wanted one
(``build`` then ``install``, ``--force`` over another installed version), and the message
for missing headers naming the dangling ``build`` link and the package to install, on the
kernel trees of tests/fixtures/dkms.py (Proxmox ships the link with the kernel, so it
dangles until proxmox-headers-<k> is installed). The dkms runs themselves:
tests/unit/plugins/modules/test_dkms_build.py and tests/integration/test_dkms_real.py."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms_build
from fixtures import dkms as dkmsfix

K = dkmsfix.SEED_NEW
TARGET = ["-m", "nvidia", "-v", "590.48.01", "-k", K]


@pytest.mark.parametrize("before,state,force,want", [
    (None, "installed", False, [["dkms", "build"] + TARGET, ["dkms", "install"] + TARGET]),
    ("added", "built", False, [["dkms", "build"] + TARGET]),
    ("built", "installed", False, [["dkms", "install"] + TARGET]),
    ("installed", "installed", False, []),
    ("installed", "installed", True, [["dkms", "install"] + TARGET + ["--force"]]),
    ("built", "built", False, []),
])
def test_plan(before, state, force, want):
    assert dkms_build.plan(before, "nvidia", "590.48.01", K, state, force=force) == want


def test_plan_with_an_arch_and_another_dkms():
    assert dkms_build.plan(None, "nvidia", "590.48.01", K, "built", dkms="/opt/dkms",
                           arch="x86_64") == [
        ["/opt/dkms", "build", "-m", "nvidia", "-v", "590.48.01", "-k", K + "/x86_64"]]


def test_headers_error_names_the_dangling_link_and_the_package(tmp_path):
    root = str(tmp_path)
    dkmsfix.kernel_tree(root, K, headers=False)
    assert dkms_build.headers_error(root, K) == (
        "headers for kernel %s not found at /lib/modules/%s/build (dangling link to "
        "/usr/src/linux-headers-%s): install proxmox-headers-%s" % (K, K, K, K))
    dkmsfix.kernel_tree(root, dkmsfix.SEED_RUNNING, headers=True)
    assert dkms_build.headers_error(root, dkmsfix.SEED_RUNNING) is None


def test_headers_error_without_any_build_link(tmp_path):
    root = str(tmp_path)
    dkmsfix.kernel_tree(root, "6.1.0-56-amd64", headers=False)
    assert dkms_build.headers_error(root, "6.1.0-56-amd64") == (
        "headers for kernel 6.1.0-56-amd64 not found at /lib/modules/6.1.0-56-amd64/build: "
        "install linux-headers-6.1.0-56-amd64")
