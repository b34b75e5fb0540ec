"""subjects/driver/driver_kernel.py: each known-bad row refuses its pair, names the fix and the
source,
and lets the first fixed version and the older kernel series through."""

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_kernel


@pytest.mark.parametrize("driver,kernel,fixed_in", [
    ("580.119.02", "7.0.2-6-pve", "580.142"),          # Frogging-Family/nvidia-all #379
    ("580.126.18", "7.0.9-1-pve", "580.142"),          # void-linux #60171
    ("580.95.05", "7.1.0-1-pve", "580.142"),           # older than the 7.0 fix, 7.1 too
    ("580.142", "7.1.0-1-pve", "580.159.04"),          # void-linux #61087
    ("595.71.05", "7.0.2-6-pve", "595.91.07"),         # open-gpu-kernel-modules #1168
    ("610.43.02", "7.0.2-6-pve", "610.57.04"),         # the same PR: 610.57.04 has the fixes
])
def test_each_row_refuses_its_pair_with_the_fix_and_the_source(driver, kernel, fixed_in):
    row = driver_kernel.known_bad(driver, kernel)
    assert row is not None and row["fixed"] == fixed_in
    text = driver_kernel.refusals(driver, [kernel])
    assert len(text) == 1 and driver in text[0] and kernel in text[0]
    assert fixed_in in text[0] and "https://github.com/" in text[0]


@pytest.mark.parametrize("driver,kernel", [
    ("580.142", "7.0.2-6-pve"),        # the 7.0 fix itself
    ("580.159.04", "7.1.0-1-pve"),     # the 7.1 fix
    ("580.126.18", "6.17.13-2-pve"),   # an older series is not this row's
    ("595.91.07", "7.0.2-6-pve"),
    ("610.57.04", "7.2.0-1-pve"),
    ("590.48.01", "7.0.2-6-pve"),      # no row for 590: the DKMS build decides
    ("not-a-version", "7.0.2-6-pve"),
    ("580.119.02", "garbage"),
])
def test_what_no_source_lists_passes(driver, kernel):
    assert driver_kernel.known_bad(driver, kernel) is None
    assert driver_kernel.refusals(driver, [kernel]) == []


def test_every_row_names_a_source_and_a_fix_newer_than_its_range():
    for row in driver_kernel.KNOWN_BAD:
        assert row["source"].startswith("https://")
        assert driver_kernel.driver_key(row["first"]) < driver_kernel.driver_key(row["fixed"])
        assert row["fixed"] in row["fix"]
