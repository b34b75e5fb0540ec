"""driver_stage across NVIDIA's package renames at 590, and its rewrite of versioned bind
mounts.

Formats: ``apt-cache madison`` lines as apt 2.6/2.7 prints them (`` name | version |
repository Packages``), with the names and versions NVIDIA's Ubuntu 24.04 repository serves
(``nvidia-open | 590.48.01-0ubuntu1 | .../compute/cuda/repos/ubuntu2404/...``; the rename
table of NVIDIA's driver installation guide, "Ubuntu 590 and later packages"); the package
names driver_state lists from dpkg's status (tests/unit/.../readers/test_driver_nvidia590.py
says where those stanzas come from); a Proxmox container config with versioned
``lxc.mount.entry`` binds as users write them. apt-get itself is a recording stand-in here:
what it is asked to install is the point.
"""

import os

import pytest
from fixtures import driver

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_stage_ct
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import (
    driver_stage_files,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage import (
    StageError,
    Stager,
)

OLD, NEW = driver.OLD, driver.NEW
REPO = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages"
NAMES_580 = ("libnvidia-compute-580", "nvidia-utils-580", "nvidia-dkms-580-open")
NAMES_590 = ("libnvidia-compute", "nvidia-utils", "nvidia-dkms-open")


def madison(rows):
    return "".join(" %s | %s | %s\n" % (name, version, REPO) for name, version in rows)


# What NVIDIA's repository lists: the 580 names at 580 only, the unbranched ones from 590.
NVIDIA_REPO = madison([(n, OLD + "-0ubuntu1") for n in NAMES_580]
                      + [(n, v) for n in NAMES_590
                         for v in ("595.71.05-0ubuntu1", NEW + "-0ubuntu1")])


class Runner(object):
    """Answers apt-cache madison with ``listing`` (only the names asked for, as apt does)
    and records every command."""

    def __init__(self, listing):
        self.listing = listing
        self.calls = []

    def run(self, args, check=True, timeout=None):
        self.calls.append(list(args))
        if "madison" in args:
            asked = set(args[args.index("madison") + 1:])
            return 0, "".join(ln + "\n" for ln in self.listing.splitlines()
                              if ln.split("|")[0].strip() in asked), ""
        return 0, "", ""


def test_pick_schemes_takes_the_name_the_repository_has_the_target_under():
    found = driver_stage_files.parse_madison(NVIDIA_REPO)
    names = dict((n, files_names(n, NEW)) for n in NAMES_580)
    chosen, renamed, missing = driver_stage_files.pick_schemes(found, names, NEW)
    assert chosen == dict((n, NEW + "-0ubuntu1") for n in NAMES_590)
    assert renamed == dict(zip(NAMES_580, NAMES_590, strict=True))
    assert missing == []
    # never the old name at the new version
    assert not [n for n in chosen if n.endswith("-580") or "-580-" in n]
    # the back-out: the unbranched names find the 580 ones again
    back = dict((n, files_names(n, OLD)) for n in NAMES_590)
    chosen, renamed, missing = driver_stage_files.pick_schemes(found, back, OLD)
    assert chosen == dict((n, OLD + "-0ubuntu1") for n in NAMES_580) and not missing
    assert driver_stage_files.removed(renamed) == ["libnvidia-compute-", "nvidia-dkms-open-",
                                                   "nvidia-utils-"]


def files_names(name, version):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import (
        driver_records,
    )
    return driver_records.scheme_names(name, version)


def test_a_version_no_scheme_has_names_every_name_tried():
    found = driver_stage_files.parse_madison(NVIDIA_REPO)
    chosen, renamed, missing = driver_stage_files.pick_schemes(
        found, {"libnvidia-compute-580": files_names("libnvidia-compute-580", "610.43.02")},
        "610.43.02")
    assert (chosen, renamed) == ({}, {})
    assert missing == ["libnvidia-compute-580 610.43.02 (apt knows 580.95.05; nor "
                       "libnvidia-compute-610 or libnvidia-compute at it)"]


def _host_state(names, version):
    return {"host": {"installed": {"method": "nvidia-repo", "version": version.split("-")[0],
                                   "packages": [{"name": n, "version": version}
                                                for n in names]},
                     "kernels": {"running": driver.RUNNING, "next": driver.NEXT}},
            "containers": []}


@pytest.mark.parametrize("have,version,target,want,gone", [
    (NAMES_580, OLD + "-0ubuntu1", NEW, NAMES_590, NAMES_580),       # 580 -> 590
    (NAMES_590, NEW + "-0ubuntu1", OLD, NAMES_580, NAMES_590),       # the back-out
    (NAMES_580, OLD + "-0ubuntu1", "580.105.08", NAMES_580, ()),     # within 580
])
def test_the_host_install_pins_names_of_the_target_scheme(tmp_path, have, version, target,
                                                          want, gone):
    root = driver.host_base(tmp_path, loaded=None)
    listing = NVIDIA_REPO + madison([(n, "580.105.08-0ubuntu1") for n in NAMES_580])
    runner = Runner(listing)
    stager = Stager(runner, root, target, "apt", _host_state(have, version),
                    {"apt_cache": "apt-cache", "apt_get": "apt-get"})
    stager.plan_host()
    stager._stage_host_apt()
    (install,) = [c for c in runner.calls if c[0] == "apt-get"]
    debver = [v for n, v in driver_stage_files.parse_madison(listing).items() if n == want[0]][0]
    debver = [v for v in debver if v.startswith(target)][0]
    assert sorted(a for a in install if "=" in a and not a.startswith("Dpkg")) == sorted(
        "%s=%s" % (n, debver) for n in want)
    assert sorted(a for a in install if a.endswith("-") and not a.startswith("-")) == sorted(
        "%s-" % n for n in gone)
    rows = stager.result["host"]["packages"]
    if gone:
        assert {r["replaces"] for r in rows} == set(have)
        assert {r["from"] for r in rows} == {version}


def test_a_container_plan_asks_its_apt_for_both_names(tmp_path):
    root = driver.host_base(tmp_path, loaded=None)
    runner = Runner(NVIDIA_REPO)
    stager = Stager(runner, root, NEW, "apt", {"host": {}, "containers": []},
                    {"pct": "pct"})
    chosen, renamed = stager._apt_plan("129", list(NAMES_580[:2]))
    assert chosen == {"libnvidia-compute": NEW + "-0ubuntu1",
                      "nvidia-utils": NEW + "-0ubuntu1"}
    assert renamed == {"libnvidia-compute-580": "libnvidia-compute",
                       "nvidia-utils-580": "nvidia-utils"}
    (query,) = runner.calls
    assert query[:5] == ["pct", "exec", "129", "--", "apt-cache"]
    assert query[6:] == ["libnvidia-compute-580", "libnvidia-compute-590", "libnvidia-compute",
                         "nvidia-utils-580", "nvidia-utils-590", "nvidia-utils"]


def test_a_version_apt_has_under_no_name_is_refused_before_anything_changes(tmp_path):
    root = driver.host_base(tmp_path, loaded=None)
    runner = Runner(NVIDIA_REPO)
    stager = Stager(runner, root, "610.43.02", "apt",
                    _host_state(NAMES_580, OLD + "-0ubuntu1"),
                    {"apt_cache": "apt-cache", "apt_get": "apt-get"})
    with pytest.raises(StageError) as err:
        stager.plan_host()
    assert "nor libnvidia-compute-610 or libnvidia-compute at it" in str(err.value)
    assert "(nothing changed)" in str(err.value)
    assert [c[0] for c in runner.calls] == ["apt-cache"]


# --------------------------------------------------------------------------- bind mounts

LIBDIR = "/usr/lib/x86_64-linux-gnu"
CONF = ("arch: amd64\r\nhostname: comfy\r\n"
        "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\r\n"
        "lxc.mount.entry: {d}/libcuda.so.{v} usr/lib/x86_64-linux-gnu/libcuda.so.{v} none "
        "bind,optional,create=file\r\n"
        "lxc.mount.entry:  {d}/libnvidia-ml.so.{v}   usr/lib/x86_64-linux-gnu/"
        "libnvidia-ml.so.{v} none bind,ro,optional,create=file # old\r\n"
        "lxc.mount.entry: /usr/bin/nvidia-smi usr/bin/nvidia-smi none bind,optional,"
        "create=file\r\n"
        "rootfs: local-zfs:subvol-131-disk-0,size=8G\r\n\r\n"
        "[before-590]\r\n"
        "lxc.mount.entry: {d}/libcuda.so.{v} usr/lib/x86_64-linux-gnu/libcuda.so.{v} none "
        "bind,optional,create=file")


def _conf(version, target_version=None):
    """The config at ``version`` (its sources), the in-container paths at
    ``target_version`` (default: the same), the snapshot section as it was."""
    text = CONF.format(d=LIBDIR, v=OLD)
    live, sep, snap = text.partition("[before-590]")
    live = live.replace("%s/libcuda.so.%s" % (LIBDIR, OLD), "%s/libcuda.so.%s" % (LIBDIR, version))
    live = live.replace("%s/libnvidia-ml.so.%s" % (LIBDIR, OLD),
                        "%s/libnvidia-ml.so.%s" % (LIBDIR, version))
    return (live + sep + snap).encode()


@pytest.fixture
def bound(tmp_path):
    root = driver.host_base(tmp_path / "host", loaded=None)
    driver.libs(root, NEW)
    path = os.path.join(root, "etc/pve/lxc/131.conf")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(_conf(OLD))
    state = {"host": {}, "containers": [{"vmid": "131", "name": "comfy", "readable": True,
                                         "userspace": {"method": "bind-mount",
                                                       "version": OLD}}]}

    def stager(version=NEW, check_mode=False, rewrite=True):
        st = Stager(Runner(""), root, version, "apt", state, {}, check_mode=check_mode,
                    rewrite_bind_mounts=rewrite)
        st.ct_plans = []
        st.plan_containers()
        st.rewrite_binds()
        return st

    def read():
        with open(path, "rb") as handle:
            return handle.read()
    return {"root": root, "path": path, "stager": stager, "read": read}


def test_versioned_sources_are_rewritten_every_other_byte_kept(bound):
    st = bound["stager"]()
    assert bound["read"]() == _conf(NEW)
    (row,) = st.result["containers"]
    assert row["action"] == "rewrote bind mounts" and st.result["changed"] is True
    assert row["bind_mounts"] == [
        {"from": "%s/libcuda.so.%s" % (LIBDIR, OLD), "to": "%s/libcuda.so.%s" % (LIBDIR, NEW)},
        {"from": "%s/libnvidia-ml.so.%s" % (LIBDIR, OLD),
         "to": "%s/libnvidia-ml.so.%s" % (LIBDIR, NEW)}]
    # the config as it was is kept, and the snapshot section is left as it was
    kept = os.path.join(bound["root"], driver_stage_ct.kept_conf("131", OLD).lstrip("/"))
    with open(kept, "rb") as handle:
        assert handle.read() == _conf(OLD)
    assert bound["read"]().endswith(CONF.format(d=LIBDIR, v=OLD).split("\r\n\r\n")[1].encode())
    # idempotent: a second run finds nothing to rewrite
    again = bound["stager"]()
    assert again.result["changed"] is False and bound["read"]() == _conf(NEW)
    assert "bind_mounts" not in again.result["containers"][0]


def test_check_mode_and_the_option_off_write_nothing(bound):
    st = bound["stager"](check_mode=True)
    assert st.result["containers"][0]["action"] == "would rewrite bind mounts"
    off = bound["stager"](rewrite=False)
    assert bound["read"]() == _conf(OLD)
    assert not os.path.exists(os.path.join(bound["root"], "var/lib/gpuhost-tuning"))
    (warning,) = off.warnings
    assert warning.startswith("131: lxc.mount.entry binds %s/libcuda.so.%s" % (LIBDIR, OLD))
    assert "rewrite_bind_mounts: true" in warning


def test_no_rewrite_to_a_file_the_host_lacks(bound):
    st = bound["stager"](version="595.71.05")
    assert bound["read"]() == _conf(OLD)
    (warning,) = st.warnings
    assert "the host has no such file" in warning and st.result["changed"] is False


def test_the_back_out_rewrites_them_back(bound):
    bound["stager"]()
    driver.libs(bound["root"], OLD)   # the back-out's packages put 580's files back
    st = bound["stager"](version=OLD)
    assert bound["read"]() == _conf(OLD) and st.result["changed"] is True
    # the first kept copy of the 580 config stays; the 590 one is kept beside it
    assert os.path.isfile(os.path.join(bound["root"], driver_stage_ct.kept_conf("131", NEW).lstrip("/")))  # noqa: E501


def test_a_linked_config_leading_out_of_the_root_is_never_written_through(bound, tmp_path):
    decoy = tmp_path / "decoy.conf"      # outside the host's root (tmp_path/host)
    decoy.write_bytes(_conf(OLD))
    os.unlink(bound["path"])
    os.symlink(str(decoy), bound["path"])
    try:
        bound["stager"]()
    except StageError as exc:
        assert "131" in str(exc)
    assert decoy.read_bytes() == _conf(OLD)
    assert os.path.islink(bound["path"])
