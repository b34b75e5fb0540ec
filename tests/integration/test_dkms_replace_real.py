"""dkms_write.ensure(replace=True)'s ``--force`` path against REAL dkms and REAL Debian
headers in a test root (tests/doubles/dkms-in-root: dkms's trees moved into the root, no
depmod), on both platforms (the ``suite`` fixture, tests/platforms.py): Debian 12's dkms
3.0.10 here, Debian 13's dkms 3.2.2 inside the trixie test image.

The stand-in ``nvidia`` module (tests/assets/driver/nvidia-dkms, tests/driverstandin.py)
at 590.48.01 is installed for the kernel; then 580.95.05, the back-out of a driver
upgrade, must replace it. What the real programs do:
- without ``--force`` dkms 3.0.10 keeps the newer ``.ko`` in place and yet records the
  older version as installed (``dkms status``: ``WARNING! Diff between built and
  installed module!``); ensure() without ``replace`` reports that as a failure;
- ``ensure(replace=True)`` installs with ``--force``: the target's ``.ko`` is the one under
  /lib/modules/<kernel>/updates/dkms, dkms status lists the target installed and no
  warning, and a second call changes nothing.
Nothing touches this machine's /var/lib/dkms, /usr/src or /lib/modules (the headers are
copied into the root). Needs root, dkms, build-essential and linux-headers-amd64.
"""

import glob
import os
import shutil
import subprocess

import pytest
from driverstandin import DOUBLES, NEW, OLD, copy_headers, headers_kernel, host_root, \
    module_source

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import runner
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms_build

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dkms_replace_real")]

WRAPPER = os.path.join(DOUBLES, "dkms-in-root")
# what each suite's dkms leaves when an older version is installed over a newer one
# without --force (None: it refuses, leaving the newer one recorded)
KEEPS_NEWER_WARNING = {"bookworm": "WARNING! Diff between built and installed module!",
                       "trixie": None}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    if os.geteuid() != 0 or not shutil.which("dkms"):
        pytest.skip("needs root and dkms (scripts/apt-ensure.sh dkms linux-headers-amd64 "
                    "build-essential)")
    release = headers_kernel()
    if release is None:
        (pytest.fail if os.environ.get("GPUHOST_TEST_STRICT") else pytest.skip)(
            "no kernel headers under /lib/modules/*/build (install linux-headers-amd64)")
    root = str(tmp_path / "root")
    headers = copy_headers(root, release)
    host_root(root, [release], [release], headers)
    for version in (OLD, NEW):
        module_source(os.path.join(root, "usr/src/nvidia-%s" % version), version)
    monkeypatch.setenv("GPUHOST_DKMS_ROOT", root)
    run = runner.Runner(processes=subprocess)
    for version in (OLD, NEW):
        dkms_build.add(run, root, "nvidia", version, dkms=WRAPPER)
    done = dkms_build.ensure(run, root, "nvidia", NEW, release, dkms=WRAPPER)
    assert done["state_after"] == "installed", done
    assert _ko_version(root, release) == NEW
    return run, root, release


def _ko_version(root, release):
    found = glob.glob(os.path.join(root, "lib/modules", release, "updates/dkms/nvidia.ko*"))
    assert len(found) == 1, found
    return subprocess.run(["modinfo", "-F", "version", found[0]], capture_output=True,
                          text=True, check=True, timeout=60).stdout.strip()


def _status(run, release):
    return [(e["version"], e["state"], e["warning"] or None)
            for e in dkms.status(run, "nvidia", dkms=WRAPPER) if e["kernel"] == release]


def test_replace_installs_the_older_version_with_force(suite, tree):
    run, root, release = tree
    done = dkms_build.ensure(run, root, "nvidia", OLD, release, dkms=WRAPPER, replace=True)
    assert done["changed"] is True
    assert done["commands"][-1] == [WRAPPER, "install", "-m", "nvidia", "-v", OLD,
                                    "-k", release, "--force"]
    assert _ko_version(root, release) == OLD
    assert (OLD, "installed", None) in _status(run, release)
    again = dkms_build.ensure(run, root, "nvidia", OLD, release, dkms=WRAPPER, replace=True)
    assert again["changed"] is False and again["commands"] == []
    assert _ko_version(root, release) == OLD


def test_without_replace_the_newer_ko_stays_and_ensure_says_so(suite, tree):
    run, root, release = tree
    with pytest.raises(dkms_build.DkmsError) as err:
        dkms_build.ensure(run, root, "nvidia", OLD, release, dkms=WRAPPER)
    assert _ko_version(root, release) == NEW
    warning = KEEPS_NEWER_WARNING[suite]
    rows = dict((v, (state, w)) for v, state, w in _status(run, release))
    if warning:
        # recorded as installed with the warning (once per module), the newer one "built"
        assert "left another build's .ko in place" in str(err.value)
        assert rows[OLD][0] == "installed" and warning in rows[OLD][1], rows
        assert rows[NEW] == ("built", None), rows
    else:
        assert rows[NEW] == ("installed", None), (rows, str(err.value))
