"""driver_stage_ct's keep of a container's previous packages, against tests/doubles/pct and
tests/doubles/apt-get over a container root folder, with the real dpkg-query on a dpkg
status file written here (its stanza format: dpkg's own /var/lib/dpkg/status). The whole
staging, with real .debs installed by the real dpkg, is tests/integration's
test_driver_upgrade.py."""

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage import (
    Stager,
)

DOUBLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "doubles")
DOUBLES = os.path.abspath(DOUBLES)
OLD = "580.95.05-1"
KEEP = "var/lib/gpuhost-tuning/driver/containers/129/debs"
ARCHIVES = "var/cache/apt/archives"


class Runner(object):
    """What platform.runner.Runner.run returns, from a real child process."""

    def __init__(self):
        self.calls = []

    def run(self, args, check=True, timeout=None):
        self.calls.append(list(args))
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout or 60,
                              check=False)
        return proc.returncode, proc.stdout, proc.stderr


def _deb(path, text="pkg"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"!<arch>\ndebian-binary   " + text.encode())


@pytest.fixture
def host(tmp_path, monkeypatch):
    root, ct, repo = tmp_path / "root", tmp_path / "ct", tmp_path / "repo"
    (root / "etc/pve/lxc").mkdir(parents=True)
    (root / "etc/pve/lxc/129.conf").write_text("hostname: vllm\nrootfs: /ct\n")
    state = root / "var/lib/gpuhost-doubles"
    state.mkdir(parents=True)
    (state / "pct.json").write_text(json.dumps({"apt_repo": str(repo), "containers": {
        "129": {"rootfs": str(ct), "status": "running"}}}))
    (ct / "var/lib/dpkg/info").mkdir(parents=True)
    (ct / "var/lib/dpkg/status").write_text("".join(
        "Package: %s\nStatus: install ok installed\nPriority: optional\nSection: libs\n"
        "Installed-Size: 4\nMaintainer: NVIDIA <nvidia@example.invalid>\nArchitecture: %s\n"
        "Version: %s\nDescription: stand-in\n\n" % (name, arch, OLD)
        for name, arch in (("libcuda1", "amd64"), ("nvidia-smi", "amd64"))))
    # libcuda1's .deb is in the container's cache; nvidia-smi's only in the repository
    _deb(str(ct / ARCHIVES / ("libcuda1_%s_amd64.deb" % OLD)), "cached")
    _deb(str(repo / ("nvidia-smi_%s_amd64.deb" % OLD)), "fetched")
    for key, value in (("GPUHOST_DOUBLES_ROOT", str(root)),
                       ("GPUHOST_DOUBLES_LOG", str(tmp_path / "calls.jsonl"))):
        monkeypatch.setenv(key, value)
    runner = Runner()
    stager = Stager(runner, str(root), "590.48.01", "apt", {},
                    {"pct": DOUBLES + "/pct", "prlimit": shutil.which("prlimit")})
    return {"root": root, "ct": ct, "repo": repo, "runner": runner, "stager": stager}


def _plan(previous=None):
    row = {"vmid": "129", "from": "580.95.05"}
    return {"row": row, "previous": previous or {"libcuda1": OLD, "nvidia-smi": OLD}}


APT = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y"]


def test_previous_debs_pulled_from_the_cache_or_fetched_into_it_first(host):
    plan = _plan()
    host["stager"]._keep_ct_debs(plan, APT)
    names = ["libcuda1_%s_amd64.deb" % OLD, "nvidia-smi_%s_amd64.deb" % OLD]
    assert plan["row"]["kept_debs"] == names
    keep = host["root"] / KEEP
    assert sorted(os.listdir(str(keep))) == names          # no .part left behind
    assert (keep / names[0]).read_bytes().endswith(b"cached")
    assert (keep / names[1]).read_bytes().endswith(b"fetched")
    fetch = [c for c in host["runner"].calls if "--download-only" in c]
    assert len(fetch) == 1 and "--reinstall" in fetch[0]
    assert host["stager"].warnings == []
    # kept already: a second pass pulls nothing and fetches nothing
    host["runner"].calls[:] = []
    again = _plan()
    host["stager"]._keep_ct_debs(again, APT)
    assert again["row"]["kept_debs"] == []
    assert [c[1] for c in host["runner"].calls if c[0].endswith("/pct")] == ["exec"]


def test_one_apt_cannot_fetch_is_a_warning_and_nothing_half_kept(host):
    os.unlink(str(host["repo"] / ("nvidia-smi_%s_amd64.deb" % OLD)))
    plan = _plan()
    host["stager"]._keep_ct_debs(plan, APT)
    assert plan["row"]["kept_debs"] == ["libcuda1_%s_amd64.deb" % OLD]
    assert sorted(os.listdir(str(host["root"] / KEEP))) == ["libcuda1_%s_amd64.deb" % OLD]
    (warning,) = host["stager"].warnings
    assert warning.startswith("129: the previous user space's nvidia-smi_%s_amd64.deb could "
                              "not be kept" % OLD)
    assert "a repository that still has 580.95.05" in warning


def test_a_link_planted_where_a_pull_once_landed_is_never_followed(host, tmp_path):
    keep = host["root"] / KEEP
    keep.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_text("mine\n")
    os.symlink(str(outside), str(keep / (".libcuda1_%s_amd64.deb.part" % OLD)))
    host["stager"]._keep_ct_debs(_plan({"libcuda1": OLD}), APT)
    assert outside.read_text() == "mine\n"
    assert (keep / ("libcuda1_%s_amd64.deb" % OLD)).read_bytes().endswith(b"cached")
    # the pull went into a new private folder, removed after: the planted name left alone
    assert sorted(os.listdir(str(keep))) == [".libcuda1_%s_amd64.deb.part" % OLD,
                                             "libcuda1_%s_amd64.deb" % OLD]


def test_a_pull_stops_at_twice_the_installed_size_and_a_mib(host):
    # a container's cache file far past its package's Installed-Size (4 KiB): the pull
    # stops at 1 MiB + 8 KiB (prlimit --fsize), nothing of it is kept on the host
    big = host["ct"] / ARCHIVES / ("libcuda1_%s_amd64.deb" % OLD)
    with open(str(big), "wb") as handle:
        handle.write(b"!<arch>\n")
        handle.truncate(8 * 1024 * 1024)
    plan = _plan({"libcuda1": OLD})
    host["stager"]._keep_ct_debs(plan, APT)
    assert plan["row"]["kept_debs"] == []
    assert os.listdir(str(host["root"] / KEEP)) == []
    pulls = [c for c in host["runner"].calls if "pull" in c]
    assert pulls and all(c[1] == "--fsize=%d" % (1024 * 1024 + 8 * 1024) for c in pulls)
    (warning,) = host["stager"].warnings
    assert "larger than its installed size allows" in warning
