"""Issue 36, the third hostile round: driver_stage's writes and reads under a hostile tree or
tenant, for the whole class, each case with a decoy in the test's own tmp_path that must stay
byte-identical while nothing outside the root changes.

- Temporary, keep and cache files (items 1, 7): a link planted at a temporary name (the
  DKMS keep's ``<kernel>.tmp`` folder, the ``.run.tmp``, a ``.tmp`` in driver/debs and in
  apt's cache, a ``.part`` in a container's keep folder) is never followed, truncated or
  removed through: every such file is made by hostfs.create_temp under a fresh name.
- Source files (item 7): a cached ``.deb`` that is a link (to a 0600 file) or a FIFO is
  skipped with a warning naming it, within seconds (a 10 s alarm fails a case that blocks).
- A tenant's figure (item 8): ``Installed-Size: 1099511627776`` in a container's dpkg status
  caps its pull at DEB_CAP_CEILING and the host's free space, never at 2 PiB.
- A capture (item 14): a GNU long name, long link or pax header claiming 700 MiB in a 3 MB
  ``.tar.gz`` is refused clearly under a 600 MB address-space limit.

The real tool here is dpkg-query (through tests/doubles/pct, as on a Proxmox host): the
2 PiB case runs on both suites (the ``suite`` fixture, tests/platforms.py: Debian 13's
dpkg-query inside its test image). dkms, apt-get and the NVIDIA installer are not run
(their writes are not what is judged).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib

import pytest
from digest import changed, digest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import (
    driver_stage_files,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage import (
    Stager,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage_files import (  # noqa: E501
    StageError,
)

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
DOUBLES = os.path.join(TESTS, "doubles")
LINKS = os.path.join(TESTS, "output", "pathlink")
KEEP = "var/lib/gpuhost-tuning/driver"
ARCHIVES = "var/cache/apt/archives"
OLD, NEW = "580.95.05", "590.48.01"
KERNEL = "6.8.12-9-pve"
DEB = "libcuda1_%s-1_amd64.deb" % OLD
DECOY_TEXT = b"the operator's own file: never written, never removed\n"


@pytest.fixture(autouse=True)
def never_hang():
    """A case that blocks (a FIFO read without O_NONBLOCK) fails in 10 s, never hangs."""
    def boom(_sig, _frame):
        raise AssertionError("blocked: the call did not return in 10 s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


class Tree(object):
    """``<tmp>/host`` (the root) and ``<tmp>/decoy`` (a folder with files and a 0600 file):
    ``outside()`` is what changed outside the root since the tree was made."""

    def __init__(self, tmp_path):
        self.top = str(tmp_path)
        self.root = os.path.join(self.top, "host")
        self.decoy = os.path.join(self.top, "decoy")
        os.makedirs(os.path.join(self.decoy, "sub"))
        for rel, mode in (("a.ko", 0o644), ("sub/b.conf", 0o644), ("secret", 0o600)):
            path = os.path.join(self.decoy, rel)
            with open(path, "wb") as handle:
                handle.write(DECOY_TEXT)
            os.chmod(path, mode)
        os.makedirs(self.root)
        self.before = None

    def path(self, rel):
        return os.path.join(self.root, rel)

    def write(self, rel, data=b"", mode=0o644):
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(data)
        os.chmod(full, mode)
        return full

    def link(self, rel, target):
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)
        return full

    def _outside(self):
        out = {}
        for name in sorted(os.listdir(self.top)):
            if name != "host":
                out.update(("%s/%s" % (name, rel), entry)
                           for rel, entry in digest(os.path.join(self.top, name)).items())
        return out

    def seal(self):
        """The digest of everything beside the root (the root's own FIFOs are not opened),
        to compare with after the case."""
        self.before = self._outside()
        return self

    def outside(self):
        return changed(self.before, self._outside())


@pytest.fixture
def tree(tmp_path):
    return Tree(tmp_path)


class Runner(object):
    """What platform.runner.Runner.run returns, from a real child process; the NVIDIA installer
    (``installer``) answers 0 without running (its own writes are not judged here)."""

    def __init__(self):
        self.calls = []

    def run(self, args, check=True, timeout=None):
        self.calls.append(list(args))
        if args[0] == "installer":
            return 0, "", ""
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout or 60,
                              check=False)
        return proc.returncode, proc.stdout, proc.stderr


def _state(method="run", version=OLD):
    return {"host": {"installed": {"method": method, "version": version},
                     "kernels": {"running": KERNEL, "next": KERNEL}}, "containers": []}


def _makeself(version):
    """The head of NVIDIA's .run as its makeself header starts (label line: makeself 2.1.5
    as NVIDIA-Linux-x86_64-<version>.run carries it), then payload bytes."""
    return ('#!/bin/sh\n# This script was generated using Makeself 2.1.5\nCRCsum="1"\n'
            'label="NVIDIA Accelerated Graphics Driver for Linux-x86_64 %s"\n'
            'script="./nvidia-installer"\n' % version).encode() + b"\x00payload" * 1000


# ---------------------------------------------------------------------------------------
# item 1: temporary names planted as links


def test_a_dkms_keep_tmp_folder_linked_to_a_folder_is_never_emptied(tree):
    """Staging 580.95.05 -> 590.48.01 keeps 580's DKMS build first; its temporary folder's
    old name ``<kernel>.tmp`` linked to a folder outside: that folder keeps every file."""
    built = "var/lib/dkms/nvidia/%s/%s/x86_64/module" % (OLD, KERNEL)
    tree.write(built + "/nvidia.ko", b"\x7fELF nvidia 580")
    tree.write("usr/src/nvidia-%s/dkms.conf" % OLD, b'PACKAGE_NAME="nvidia"\n')
    planted = tree.link("%s/dkms/nvidia/%s/%s.tmp" % (KEEP, OLD, KERNEL), tree.decoy)
    tree.seal()
    stager = Stager(Runner(), tree.root, NEW, "run", _state(), {})
    stager.result["host"]["previous"] = OLD      # as plan_host sets it from the state
    stager._keep_previous()
    assert tree.outside() == []
    assert os.path.islink(planted) and os.readlink(planted) == tree.decoy
    kept = tree.path("%s/dkms/nvidia/%s/%s/x86_64/module/nvidia.ko" % (KEEP, OLD, KERNEL))
    with open(kept, "rb") as handle:
        assert handle.read() == b"\x7fELF nvidia 580"
    assert stager.result["host"]["kept_build"]["kernels"] == [KERNEL]
    # the source was kept too, and no temporary folder is left behind
    assert sorted(os.listdir(tree.path("%s/dkms/nvidia/%s" % (KEEP, OLD)))) == [
        KERNEL, KERNEL + ".tmp", "source"]


def test_a_run_tmp_linked_to_a_file_is_never_overwritten(tree):
    """The ``.run`` kept for a back-out: its old temporary name ``<name>.run.tmp`` linked to
    a file outside; that file keeps its bytes and mode, the kept .run is the new one."""
    run_file = "/root/NVIDIA-Linux-x86_64-%s.run" % NEW
    data = _makeself(NEW)
    tree.write(run_file.lstrip("/"), data, 0o755)
    kept = "%s/NVIDIA-Linux-x86_64-%s.run" % (KEEP, NEW)
    planted = tree.link(kept + ".tmp", os.path.join(tree.decoy, "a.ko"))
    tree.seal()
    stager = Stager(Runner(), tree.root, NEW, "run", _state(), {"installer": "installer"},
                    run_file=run_file)
    stager.run_info = driver_stage_files.run_header(tree.root, run_file, NEW)
    stager._stage_host_run()
    assert tree.outside() == []
    assert os.path.islink(planted)
    with open(tree.path(kept), "rb") as handle:
        assert handle.read() == data
    assert os.stat(tree.path(kept)).st_mode & 0o777 == 0o700


@pytest.mark.parametrize("where", ["keep", "cache"])
def test_a_tmp_link_in_the_debs_keep_or_apt_cache_is_never_written(tree, where):
    """keep_debs (apt's cache -> driver/debs) and unkeep_debs (driver/debs -> the cache):
    the destination's old temporary name and hostfs' old ``.<name>.<pid>.<n>.tmp`` names
    planted as links to files outside."""
    source, dest = (ARCHIVES, KEEP + "/debs") if where == "keep" else (KEEP + "/debs", ARCHIVES)
    tree.write("%s/%s" % (source, DEB), b"!<arch>\nlibcuda1 580")
    os.makedirs(tree.path(dest), exist_ok=True)
    for name in (DEB + ".tmp", ".%s.%d.0.tmp" % (DEB, os.getpid())):
        tree.link("%s/%s" % (dest, name), os.path.join(tree.decoy, "a.ko"))
    tree.seal()
    warnings = []
    if where == "keep":
        done = driver_stage_files.keep_debs(tree.root, {"libcuda1": OLD + "-1"}, warnings=warnings)
    else:
        done = driver_stage_files.unkeep_debs(tree.root, {"libcuda1": OLD + "-1"}, warnings=warnings)  # noqa: E501
    assert tree.outside() == [] and warnings == []
    assert done == [DEB]
    with open(tree.path("%s/%s" % (dest, DEB)), "rb") as handle:
        assert handle.read() == b"!<arch>\nlibcuda1 580"


@pytest.fixture
def container(tree, monkeypatch):
    """Container 129 behind tests/doubles/pct: its root folder beside the host's, its dpkg
    status (the stanza format of dpkg's own /var/lib/dpkg/status) listing libcuda1 at OLD
    with ``Installed-Size`` given by the case, its cache holding that .deb."""
    ct = tree.path("rpool/data/subvol-129-disk-0")

    def make(installed_size="48213"):
        os.makedirs(os.path.join(ct, "var/lib/dpkg/info"))
        with open(os.path.join(ct, "var/lib/dpkg/status"), "w") as handle:
            handle.write("Package: libcuda1\nStatus: install ok installed\nPriority: optional\n"
                         "Section: libs\nInstalled-Size: %s\nMaintainer: NVIDIA "
                         "<nvidia@example.invalid>\nArchitecture: amd64\nVersion: %s-1\n"
                         "Description: stand-in\n\n" % (installed_size, OLD))
        os.makedirs(os.path.join(ct, ARCHIVES))
        with open(os.path.join(ct, ARCHIVES, DEB), "wb") as handle:
            handle.write(b"!<arch>\ndebian-binary   cached")
        tree.write("etc/pve/lxc/129.conf", b"hostname: vllm\nrootfs: /ct\n")
        tree.write("var/lib/gpuhost-doubles/pct.json", json.dumps({
            "apt_repo": os.path.join(tree.top, "repo"),
            "containers": {"129": {"rootfs": ct, "status": "running"}}}).encode())
        monkeypatch.setenv("GPUHOST_DOUBLES_ROOT", tree.root)
        monkeypatch.setenv("GPUHOST_DOUBLES_LOG", tree.path("var/log/doubles.jsonl"))
        runner = Runner()
        stager = Stager(runner, tree.root, NEW, "apt", {},
                        {"pct": os.path.join(DOUBLES, "pct"), "prlimit": shutil.which("prlimit")})
        plan = {"row": {"vmid": "129", "from": OLD}, "previous": {"libcuda1": OLD + "-1"}}
        return stager, runner, plan

    return make


APT = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y"]


def test_a_part_link_in_the_container_keep_folder_is_never_written(tree, container):
    stager, _runner, plan = container()
    keep = "%s/containers/129/debs" % KEEP
    planted = tree.link("%s/.%s.part" % (keep, DEB), os.path.join(tree.decoy, "a.ko"))
    tree.seal()
    stager._keep_ct_debs(plan, APT)
    assert tree.outside() == []
    assert plan["row"]["kept_debs"] == [DEB] and stager.warnings == []
    assert os.path.islink(planted)
    assert sorted(os.listdir(tree.path(keep))) == [".%s.part" % DEB, DEB]


def _pushes(runner):
    return [c for c in runner.calls if len(c) > 2 and c[1] == "push"]


def test_a_kept_deb_or_run_linked_to_a_0600_file_is_never_pushed_to_a_tenant(tree, container):
    """pct push opens the host's file following links: a kept .deb or .run planted as a link
    to the operator's 0600 file must not land in a container (a tenant's) apt cache."""
    stager, runner, plan = container()
    secret = os.path.join(tree.decoy, "secret")
    new_deb = "libcuda1_%s-1_amd64.deb" % NEW
    tree.link("%s/containers/129/debs/%s" % (KEEP, new_deb), secret)
    tree.seal()
    plan["packages"] = {"libcuda1": NEW + "-1"}
    with pytest.raises(StageError, match="apt-get install of %s failed" % NEW):
        stager._stage_deb(plan)  # apt has no 590 here: the install fails (not judged)
    assert [c for c in _pushes(runner) if new_deb in " ".join(c)] == []
    assert any(w.startswith("129: ") and "a symbolic link to %s" % secret in w
               and "not pushed into its apt cache" in w for w in stager.warnings)
    assert not os.path.lexists(tree.path("rpool/data/subvol-129-disk-0/%s/%s"
                                         % (ARCHIVES, new_deb)))
    # the kept .run a link to the same file: the run_file (a regular file) is pushed instead
    run_file = "/root/NVIDIA-Linux-x86_64-%s.run" % NEW
    tree.write(run_file.lstrip("/"), b"#!/bin/sh\nexit 0\n", 0o755)
    tree.link("%s/NVIDIA-Linux-x86_64-%s.run" % (KEEP, NEW), secret)
    stager.run_file, stager.run_info = run_file, {"arch": "x86_64", "size": 18}
    runner.calls[:] = []
    stager._stage_run({"row": {"vmid": "129", "from": None}})
    (push,) = _pushes(runner)
    assert push[3] == tree.path(run_file.lstrip("/"))
    assert tree.outside() == []


def test_the_run_lock_and_atomic_write_never_open_a_planted_temporary_name(tree):
    """The same helper behind every other writer: the run lock's old ``<lock>.<pid>.tmp``
    and atomic_write's old ``.<name>.<pid>.<n>.tmp`` planted as links to files outside."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock
    from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs

    lock = tree.path(run_lock.RUN_LOCK_PATH.lstrip("/"))
    tree.link(run_lock.RUN_LOCK_PATH.lstrip("/") + ".%d.tmp" % os.getppid(),
              os.path.join(tree.decoy, "a.ko"))
    tree.link(run_lock.RUN_LOCK_PATH.lstrip("/") + ".%d.tmp" % os.getpid(),
              os.path.join(tree.decoy, "a.ko"))
    conf = tree.write("etc/modprobe.d/gpuhost.conf", b"old\n")
    for attempt in range(3):
        tree.link("etc/modprobe.d/.gpuhost.conf.%d.%d.tmp" % (os.getpid(), attempt),
                  os.path.join(tree.decoy, "sub/b.conf"))
    tree.seal()
    held = run_lock.acquire(tree.root, {"purpose": "hostile"})
    assert held["held"] is True
    with open(lock) as handle:
        assert json.load(handle)["purpose"] == "hostile"
    hostfs.atomic_write(conf, "new\n", chmod=False, root=tree.root)
    with open(conf) as handle:
        assert handle.read() == "new\n"
    assert tree.outside() == []


# ---------------------------------------------------------------------------------------
# item 7: source files that are no regular files


def test_a_cached_deb_linked_to_a_0600_file_is_not_kept(tree):
    """A link to a 0600 file outside the root, and one to a 0600 file inside it: neither is
    read nor kept as 0644; the warning names the cached file."""
    tree.link("%s/%s" % (ARCHIVES, DEB), os.path.join(tree.decoy, "secret"))
    inside = tree.write("root/secret.deb", b"!<arch>\nroot's own", 0o600)
    other = "nvidia-smi_%s-1_amd64.deb" % OLD
    tree.link("%s/%s" % (ARCHIVES, other), "/root/secret.deb")
    tree.seal()
    packages = {"libcuda1": OLD + "-1", "nvidia-smi": OLD + "-1"}
    for check_mode in (True, False):
        warnings = []
        done = driver_stage_files.keep_debs(tree.root, packages, check_mode=check_mode, warnings=warnings)  # noqa: E501
        assert done == []
        assert len(warnings) == 2
        assert warnings[0].startswith("%s: a symbolic link to %s, not a regular file: not "
                                      "kept" % (tree.path("%s/%s" % (ARCHIVES, DEB)),
                                                os.path.join(tree.decoy, "secret")))
        assert warnings[1].startswith(tree.path("%s/%s" % (ARCHIVES, other)))
    assert tree.outside() == []
    assert not os.path.exists(tree.path(KEEP + "/debs/" + DEB))
    assert not os.path.exists(tree.path(KEEP + "/debs/" + other))
    assert os.stat(inside).st_mode & 0o777 == 0o600


def test_a_cached_deb_that_is_a_fifo_is_skipped_in_seconds(tree):
    fifo = tree.path("%s/%s" % (ARCHIVES, DEB))
    os.makedirs(os.path.dirname(fifo))
    os.mkfifo(fifo)
    # and a FIFO in a DKMS build being kept: left out of the copy, named
    built = "var/lib/dkms/nvidia/%s/%s" % (OLD, KERNEL)
    tree.write(built + "/module/nvidia.ko", b"ko")
    os.mkfifo(tree.path(built + "/make.log"))
    tree.seal()
    started = time.time()
    warnings = []
    assert driver_stage_files.keep_debs(tree.root, {"libcuda1": OLD + "-1"}, warnings=warnings) == []  # noqa: E501
    assert warnings and warnings[0].startswith("%s: a FIFO, not a regular file: not kept" % fifo)
    assert driver_stage_files.keep_build(tree.root, "nvidia", OLD, [KERNEL], warnings=warnings) == [KERNEL]  # noqa: E501
    assert warnings[1].startswith("%s: a FIFO, not a regular file: not copied"
                                  % tree.path(built + "/make.log"))
    assert os.path.isfile(tree.path("%s/dkms/nvidia/%s/%s/module/nvidia.ko"
                                    % (KEEP, OLD, KERNEL)))
    assert time.time() - started < 5
    assert tree.outside() == []


# ---------------------------------------------------------------------------------------
# item 8: a tenant's size figure


def _fsize(runner):
    pulls = [c for c in runner.calls if "pull" in c]
    assert pulls
    return [int(c[1].split("=", 1)[1]) for c in pulls]


def test_a_2_pib_installed_size_caps_the_pull_at_the_ceiling_and_the_host_free_space(
        tree, container, suite):
    """On Debian 12 here and Debian 13 in its test image (the ``suite`` fixture): each
    suite's real dpkg-query prints the tenant's ``Installed-Size`` as stored."""
    stager, runner, plan = container(installed_size="1099511627776")
    query = [c for c in runner.calls if "dpkg-query" in c]
    tree.seal()
    stager._keep_ct_debs(plan, APT)
    assert tree.outside() == []
    assert not query and [c for c in runner.calls if "dpkg-query" in c]
    free = driver_stage_files.free_bytes(tree.path(KEEP))
    for cap in _fsize(runner):
        assert cap <= driver_stage_files.DEB_CAP_CEILING == 512 << 20
        assert cap <= free - driver_stage_files.HOST_FREE_MARGIN
    assert plan["row"]["kept_debs"] == [DEB]


def test_a_host_without_room_pulls_nothing_and_says_so(tree, container, monkeypatch):
    stager, runner, plan = container(installed_size="1099511627776")
    monkeypatch.setattr(driver_stage_files, "free_bytes", lambda folder: driver_stage_files.HOST_FREE_MARGIN + 100)  # noqa: E501
    stager._keep_ct_debs(plan, APT)
    # 100 bytes of room: each pull stops there (from the cache, then after apt's fetch)
    assert set(_fsize(runner)) == {100}
    assert plan["row"]["kept_debs"] == []
    monkeypatch.setattr(driver_stage_files, "free_bytes", lambda folder: 5)
    runner.calls[:] = []
    stager.warnings[:] = []
    stager._keep_ct_debs(dict(plan, row={"vmid": "129", "from": OLD}), APT)
    assert not [c for c in runner.calls if "pull" in c]
    assert any("has less than 1024 MiB free" in w and DEB in w for w in stager.warnings)


# ---------------------------------------------------------------------------------------
# item 14: a capture's tar header claiming 700 MiB


def _tar_header(name, size, typeflag):
    """One ustar/GNU header block (POSIX.1-1988 layout: name 0-99, mode, uid, gid, size
    124-135 octal, mtime, checksum 148-155, type flag 156, magic 257), by hand."""
    block = bytearray(512)
    block[0:len(name)] = name
    block[100:108] = b"0000644\x00"
    block[108:116] = b"0000000\x00"
    block[116:124] = b"0000000\x00"
    block[124:136] = b"%011o\x00" % size
    block[136:148] = b"00000000000\x00"
    block[148:156] = b" " * 8
    block[156:157] = typeflag
    block[257:265] = b"ustar  \x00"  # GNU tar's magic and version
    block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block)


CLAIM = 700 << 20


@pytest.fixture(scope="module")
def zeros_gz(tmp_path_factory):
    """700 MiB of zeros as one gzip member (level 1: 3.2 MB, as the issue's capture)."""
    path = str(tmp_path_factory.mktemp("bomb") / "zeros.gz")
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    with open(path, "wb") as handle:
        for _count in range(CLAIM >> 20):
            handle.write(packer.compress(chunk))
        handle.write(packer.flush())
    return path


UNPACK = """
import json, resource, sys, time
sys.path[:0] = %r
resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import capture_unpack
started = time.time()
try:
    capture_unpack.unpack(sys.argv[1], sys.argv[2])
    out = {"error": None}
except BaseException as exc:
    out = {"error": "%%s: %%s" %% (type(exc).__name__, exc)}
out["seconds"] = round(time.time() - started, 2)
print(json.dumps(out))
"""


@pytest.mark.parametrize("typeflag,kind", [(b"L", "a GNU long name"),
                                           (b"K", "a GNU long link name"),
                                           (b"x", "a pax extended header"),
                                           (b"g", "a pax global header")])
def test_a_capture_header_claiming_700_mib_is_refused_under_600_mb(
        tmp_path, zeros_gz, typeflag, kind):
    signal.alarm(120)
    capture = str(tmp_path / "capture.tar.gz")
    with open(capture, "wb") as out, open(zeros_gz, "rb") as body:
        # gzip members back to back are one stream (RFC 1952 2.2): the header, then the zeros
        packer = zlib.compressobj(1, zlib.DEFLATED, 31)
        out.write(packer.compress(_tar_header(b"././@LongLink", CLAIM, typeflag)) +
                  packer.flush())
        shutil.copyfileobj(body, out)
    assert os.path.getsize(capture) < 4 << 20
    proc = subprocess.run([sys.executable, "-c", UNPACK % ([LINKS, TESTS],), capture,
                           str(tmp_path / "dest")], capture_output=True, text=True,
                          timeout=100, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["error"].startswith("UnpackError: capture %s: %s at byte 0 of the tar stream "
                                      "claims %d bytes, over the 1024 KiB" % (
                                          capture, kind, CLAIM)), result
    assert "nothing was written" in result["error"]
    assert not os.path.exists(str(tmp_path / "dest"))
    assert result["seconds"] < 10
