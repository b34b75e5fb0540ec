"""The driver gate's module reading (subjects/driver/kmod_info.py) against modules REAL dkms built
and installed, on both platforms (the ``suite`` fixture, tests/platforms.py): Debian 12's
dkms 3.0.10 here, Debian 13's dkms 3.2.2 inside the trixie test image (plain ``.ko`` in
the test root, compressed by the real ``xz`` as the kernel's modules_install does, read
by this reader and by the real ``modinfo``).

The stand-in ``nvidia`` module (tests/assets/driver/nvidia-dkms: ``MODULE_VERSION`` is
the DKMS ``PACKAGE_VERSION``) at 590.48.01 and 580.95.05 is built in a test root by real
dkms (tests/doubles/dkms-in-root, no depmod: the files are found by depmod's order,
``updates`` first); 590.48.01 installed, then 580.95.05 installed over it without
``--force``. What the gate must say, whatever the DKMS tree says:
- dkms 3.0.10 records 580.95.05 installed and keeps 590's ``.ko``: a gate for 580.95.05
  refuses naming the file and the 590.48.01 it holds (the tree alone would pass it);
- dkms 3.2.2 refuses and keeps 590.48.01 installed: the gate for 590.48.01 passes.
Each answer agrees with the real ``modinfo -F version`` on the same file. Nothing touches
this machine's /var/lib/dkms, /usr/src or /lib/modules. Needs root, dkms, build-essential,
kmod and linux-headers-amd64.
"""

import glob
import os
import shutil
import subprocess

import pytest
from driverstandin import DOUBLES, NEW, OLD, copy_headers, headers_kernel, host_root, \
    module_source

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import runner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_state
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import kmod_info
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms_build

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("driver_gate_real")]

WRAPPER = os.path.join(DOUBLES, "dkms-in-root")


def _modinfo(path):
    return subprocess.run(["modinfo", "-F", "version", path], capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()


def test_the_gate_reads_the_version_of_the_module_dkms_really_installed(
        suite, tmp_path, monkeypatch):
    if os.geteuid() != 0 or not shutil.which("dkms"):
        pytest.skip("needs root and dkms (scripts/apt-ensure.sh dkms linux-headers-amd64 "
                    "build-essential kmod)")
    release = headers_kernel()
    if release is None:
        (pytest.fail if os.environ.get("GPUHOST_TEST_STRICT") else pytest.skip)(
            "no kernel headers under /lib/modules/*/build (install linux-headers-amd64)")
    root = str(tmp_path / "root")
    host_root(root, [release], [release], copy_headers(root, release))
    for version in (OLD, NEW):
        module_source(os.path.join(root, "usr/src/nvidia-%s" % version), version)
    monkeypatch.setenv("GPUHOST_DKMS_ROOT", root)
    run = runner.Runner(processes=subprocess)
    for version in (OLD, NEW):
        dkms_build.add(run, root, "nvidia", version, dkms=WRAPPER)
    dkms_build.ensure(run, root, "nvidia", NEW, release, dkms=WRAPPER)

    found = glob.glob(os.path.join(root, "lib/modules", release, "updates/dkms/nvidia.ko*"))
    assert len(found) == 1, found
    picked = kmod_info.picked(root, release, ["nvidia", "nvidia-uvm"])
    assert [p["version"] for p in picked] == [NEW, NEW], picked
    assert picked[0]["path"] == "/" + os.path.relpath(found[0], root)
    assert picked[0]["version"] == _modinfo(found[0]) and picked[0]["vermagic"] == release
    assert driver_state.driver_state(root, NEW, next_kernel_release=release)["gate"]["ok"] is True

    with pytest.raises(dkms_build.DkmsError):   # both dkms: the older one is not installed
        dkms_build.ensure(run, root, "nvidia", OLD, release, dkms=WRAPPER)
    state = driver_state.driver_state(root, OLD, next_kernel_release=release)
    installed = [e["version"] for e in state["host"]["dkms"]
                 if e["kernel"] == release and e["state"] == "installed"]
    assert _modinfo(found[0]) == NEW
    refusals = state["gate"]["refusals"]
    assert installed == ([OLD] if suite == "bookworm" else [NEW]), state["host"]["dkms"]
    if suite == "bookworm":
        # dkms 3.0.10: the tree says 580.95.05 installed, the file is 590's
        assert any("loads %s (search order), which holds version %s, not %s" % (
            picked[0]["path"], NEW, OLD) in r for r in refusals), refusals
    else:
        assert driver_state.driver_state(root, NEW, next_kernel_release=release)["gate"]["ok"] is True  # noqa: E501

    # the same real module as the kernel's modules_install compresses it (scripts/
    # Makefile.modinst: xz --check=crc32 --lzma2=dict=1MiB), read as the real modinfo does
    packed = str(tmp_path / "nvidia.ko.xz")
    with open(packed, "wb") as out:
        subprocess.run(["xz", "--check=crc32", "--lzma2=dict=1MiB", "-c", found[0]],
                       stdout=out, check=True, timeout=60)
    assert kmod_info.modinfo(packed)["version"] == [_modinfo(packed)] == [NEW]
