"""Issue 26: staging an NVIDIA driver upgrade (driver_stage) and its gates (driver_state)
against REAL dkms building a stand-in ``nvidia`` module against this machine's REAL Debian
headers, stand-in driver packages built with the real ``dpkg-deb`` and installed by the
real ``dpkg --root``, and a stand-in NVIDIA ``.run`` (tests/driverstandin.py); containers
are root folders behind the pct double (``pct exec`` / ``pct push`` into them).

Nothing touches this machine's /lib/modules, /var/lib/dkms or /usr/src: dkms runs with
its trees moved into the test root (tests/doubles/dkms-in-root), the headers are copied
into the root. Needs root, dkms, dpkg-deb, build-essential and linux-headers-amd64
(INTEGRATION_PKGS).
"""

import json
import os
import shutil
import subprocess
import time

import pytest
from digest import changed, digest
from driverstandin import (
    CT_PACKAGES,
    DOUBLES,
    HOST_PACKAGES,
    NEW,
    OLD,
    REVISION,
    build_repo,
    build_run,
    copy_headers,
    dpkg_install,
    dpkg_root,
    headers_kernel,
    host_root,
)
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import driver_stage, driver_state

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("driver_upgrade")]

NEXT = "6.1.0-99-amd64"      # the "next" kernel: its build link leads to the same headers
STORAGE = "zfspool: local-zfs\n\tpool rpool/data\n\tcontent rootdir,images\n\tsparse 1\n"
GPU_LINES = ("lxc.cgroup2.devices.allow: c 195:* rwm\n"
             "lxc.cgroup2.devices.allow: c 508:* rwm\n"
             "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n"
             "lxc.mount.entry: /dev/nvidiactl dev/nvidiactl none bind,optional,create=file\n"
             "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n")
BIND_LINES = "".join(
    "lxc.mount.entry: %s %s none bind,ro,optional,create=file\n" % (p, p.lstrip("/"))
    for p in ("/usr/lib/x86_64-linux-gnu/libcuda.so.1",
              "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/bin/nvidia-smi"))
# vmid: (hostname, how its user space comes, running, python3)
CONTAINERS = {
    "129": ("vllm", "deb", True, True),
    "131": ("comfy", "bind", True, True),
    "133": ("trainer", "run", False, True),
    "135": ("nopython", "deb", True, False),
}


def nvrm(version):
    """/proc/driver/nvidia/version as the open module writes it (format:
    tests/fixtures/driver-h200/proc-version.txt, the lead's H200 capture)."""
    return ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  "
            "(dvs-builder@U22-I3-AF03-09-1)  Tue Nov 18 00:00:00 UTC 2025\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n" % version)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Packages and .run files at both versions, and a base host tree with the headers."""
    if os.geteuid() != 0 or not shutil.which("dkms") or not shutil.which("dpkg-deb"):
        pytest.skip("needs root, dkms and dpkg-deb (scripts/apt-ensure.sh dkms "
                    "linux-headers-amd64 build-essential)")
    release = headers_kernel()
    if release is None:
        (pytest.fail if os.environ.get("GPUHOST_TEST_STRICT") else pytest.skip)(
            "no kernel headers under /lib/modules/*/build (install linux-headers-amd64)")
    top = tmp_path_factory.mktemp("driverlab")
    repo = str(top / "repo")
    debs = {OLD: build_repo(repo, OLD), NEW: build_repo(repo, NEW)}
    runs = {v: build_run(str(top / ("NVIDIA-Linux-x86_64-%s.run" % v)), v) for v in (OLD, NEW)}
    base = str(top / "base")
    headers = copy_headers(base, release)
    out = {"release": release, "repo": repo, "debs": debs, "runs": runs, "base": base,
           "headers": headers}
    # The baseline every deb-installed host starts from, built once (two real DKMS builds
    # and the containers): each test gets its own copy (Host), so the tests stay independent.
    (top / "template").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        built = Host(out, top / "template", patch)
    out["template"] = built.root
    return out


def _dkms(root, *args):
    env = dict(os.environ, GPUHOST_DKMS_ROOT=root, LC_ALL="C")
    return subprocess.run([os.path.join(DOUBLES, "dkms-in-root")] + list(args), env=env,
                          capture_output=True, text=True, check=False)


def _cache(root, debs):
    """The .debs in the root's apt cache, as apt leaves what it installed."""
    for deb in debs:
        shutil.copy(deb, os.path.join(root, "var/cache/apt/archives"))


def _clean_cache(root):
    """``apt-get clean`` in a root: its cached .debs gone."""
    cache = os.path.join(root, "var/cache/apt/archives")
    for name in os.listdir(cache):
        if name.endswith(".deb"):
            os.unlink(os.path.join(cache, name))


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


class Host(object):
    """A host root with the OLD driver installed by packages and DKMS-built for both
    kernels (or ``headers_for`` only), and the containers of CONTAINERS."""

    def __init__(self, lab, tmp_path, monkeypatch, headers_for=None, containers=None,
                 host_method="deb"):
        containers = CONTAINERS if containers is None else containers
        self.lab = lab
        self.root = str(tmp_path / "root")
        release = lab["release"]
        self.kernels = [release, NEXT]
        self.log = os.path.join(str(tmp_path), "calls.jsonl")
        for key, value in dict(GPUHOST_DKMS_ROOT=self.root, GPUHOST_APT_ROOT=self.root,
                               GPUHOST_APT_REPO=lab["repo"], GPUHOST_RUN_ROOT=self.root,
                               GPUHOST_RUN_DKMS=os.path.join(DOUBLES, "dkms-in-root"),
                               GPUHOST_DOUBLES_ROOT=self.root,
                               GPUHOST_DOUBLES_LOG=self.log).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("PATH", DOUBLES + os.pathsep + os.environ["PATH"])
        self.pct_file = os.path.join(self.root, "var/lib/gpuhost-doubles/pct.json")
        if host_method == "deb" and lab.get("template"):
            self._from_template(lab["template"], headers_for, containers)
            return
        # the headers are hard links into the lab's copy: nothing here writes them
        subprocess.run(["cp", "-al", lab["base"], self.root], check=True)
        host_root(self.root, self.kernels, headers_for or self.kernels, lab["headers"])
        _write(os.path.join(self.root, "proc/sys/kernel/osrelease"), release + "\n")
        self.boot(OLD)
        if host_method == "deb":
            dpkg_install(self.root, [lab["debs"][OLD][p] for p in HOST_PACKAGES])
            _cache(self.root, [lab["debs"][OLD][p] for p in HOST_PACKAGES])
        else:
            env = dict(os.environ)
            proc = subprocess.run(["/bin/sh", lab["runs"][OLD], "--silent", "--dkms",
                                   "--kernel-name=%s" % release], env=env,
                                  capture_output=True, text=True, check=False)
            assert proc.returncode == 0, proc.stderr
        for release_ in (headers_for or self.kernels):
            if host_method == "deb":
                _dkms(self.root, "add", "-m", "nvidia", "-v", OLD)
            done = _dkms(self.root, "install", "-m", "nvidia", "-v", OLD, "-k", release_)
            assert done.returncode == 0, done.stderr + done.stdout
        _write(os.path.join(self.root, "etc/pve/storage.cfg"), STORAGE)
        pct = {"containers": {}, "apt_repo": lab["repo"]}
        for vmid, (name, how, running, python3) in containers.items():
            fs = os.path.join(self.root, "rpool/data/subvol-%s-disk-0" % vmid)
            os.makedirs(os.path.join(fs, "etc"), exist_ok=True)
            _write(os.path.join(fs, "etc/hostname"), name + "\n")
            conf = ("arch: amd64\nhostname: %s\nmemory: 65536\nostype: debian\n"
                    "rootfs: local-zfs:subvol-%s-disk-0,size=64G\n%s%s"
                    % (name, vmid, GPU_LINES, BIND_LINES if how == "bind" else ""))
            _write(os.path.join(self.root, "etc/pve/lxc/%s.conf" % vmid), conf)
            if python3:
                _write(os.path.join(fs, "usr/bin/python3"), "")
            dpkg_root(fs)
            if how == "deb":
                dpkg_install(fs, [lab["debs"][OLD][p] for p in CT_PACKAGES])
                _cache(fs, [lab["debs"][OLD][p] for p in CT_PACKAGES])
            elif how == "run":
                env = dict(os.environ, GPUHOST_RUN_ROOT=fs)
                proc = subprocess.run(["/bin/sh", lab["runs"][OLD], "--silent",
                                       "--no-kernel-module"], env=env,
                                      capture_output=True, text=True, check=False)
                assert proc.returncode == 0, proc.stderr
            ct = {"rootfs": fs, "status": "running" if running else "stopped"}
            if not python3:
                ct["python3"] = False
            pct["containers"][vmid] = ct
        _write(self.pct_file, json.dumps(pct))

    def _from_template(self, template, headers_for, containers):
        """This test's own copy of the shared baseline (the lab fixture's Host): the
        headers hard-linked as in the baseline (nothing writes them), everything else
        copied, links and paths into the baseline pointed at this root; then cut to
        ``containers`` and ``headers_for``."""
        base = self.lab["base"]
        shared = set()
        for top, dirs, _files in os.walk(base):
            for name in list(dirs):
                path = os.path.join(top, name)
                if name.startswith("linux-"):
                    shared.add(os.path.relpath(path, base))
                    dirs.remove(name)

        def ignore(folder, names):
            rel = os.path.relpath(folder, template)
            return [n for n in names if os.path.normpath(os.path.join(rel, n)) in shared]

        shutil.copytree(template, self.root, symlinks=True, ignore=ignore)
        for rel in shared:
            subprocess.run(["cp", "-al", os.path.join(base, rel), os.path.join(self.root, rel)],
                           check=True)
        for top, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if os.path.relpath(os.path.join(top, d), self.root)
                       not in shared]
            for name in dirs + files:
                path = os.path.join(top, name)
                if os.path.islink(path) and os.readlink(path).startswith(template + "/"):
                    target = self.root + os.readlink(path)[len(template):]
                    os.unlink(path)
                    os.symlink(target, path)
        with open(self.pct_file) as handle:
            data = json.loads(handle.read().replace(template + "/", self.root + "/"))
        for vmid in list(data["containers"]):
            if vmid not in containers:
                del data["containers"][vmid]
                os.unlink(os.path.join(self.root, "etc/pve/lxc/%s.conf" % vmid))
                shutil.rmtree(os.path.join(self.root, "rpool/data/subvol-%s-disk-0" % vmid))
        _write(self.pct_file, json.dumps(data))
        for release in self.kernels:
            if headers_for and release not in headers_for:
                done = _dkms(self.root, "remove", "-m", "nvidia", "-v", OLD, "-k", release)
                assert done.returncode == 0, done.stderr + done.stdout
                os.unlink(os.path.join(self.root, "lib/modules", release, "build"))

    def pct(self, vmid, **changes):
        with open(self.pct_file) as handle:
            data = json.load(handle)
        data["containers"][vmid].update(changes)
        _write(self.pct_file, json.dumps(data))

    def boot(self, version):
        """What a boot into ``version``'s module leaves in /proc and /sys."""
        _write(os.path.join(self.root, "proc/driver/nvidia/version"), nvrm(version))
        _write(os.path.join(self.root, "sys/module/nvidia/version"), version + "\n")

    def state(self, target=NEW, phase="before_reboot"):
        result = run_module(driver_state, {"root": self.root, "target_version": target,
                                           "next_kernel": NEXT, "phase": phase})
        assert not result.get("failed"), result.get("msg")
        return result

    def stage(self, state=None, check_mode=False, version=NEW, **extra):
        args = {"root": self.root, "version": version, "source": "apt",
                "state": state or self.state(version),
                "dkms": os.path.join(DOUBLES, "dkms-in-root"),
                "apt_get": os.path.join(DOUBLES, "apt-get"),
                "apt_cache": os.path.join(DOUBLES, "apt-cache"), "installer": "/bin/sh"}
        args.update(extra)
        return run_module(driver_stage, args, check_mode=check_mode)

    def put_run(self, version):
        """The stand-in .run for ``version`` copied onto the host; its path there."""
        path = "/root/NVIDIA-Linux-x86_64-%s.run" % version
        os.makedirs(os.path.join(self.root, "root"), exist_ok=True)
        shutil.copy(self.lab["runs"][version], os.path.join(self.root, path.lstrip("/")))
        return path

    def calls(self, tool=None):
        try:
            with open(self.log) as handle:
                rows = [json.loads(line) for line in handle if line.strip()]
        except OSError:
            return []
        return [r for r in rows if tool is None or r.get("tool") == tool]

    def ct_root(self, vmid):
        return os.path.join(self.root, "rpool/data/subvol-%s-disk-0" % vmid)

    def ct_versions(self, vmid):
        """dpkg's view inside a container's root: {package: version}."""
        fs = os.path.join(self.root, "rpool/data/subvol-%s-disk-0" % vmid)
        out = subprocess.run(["dpkg-query", "--admindir=%s/var/lib/dpkg" % fs, "-W",
                              "-f", "${Package} ${Version}\n"], capture_output=True,
                             text=True, check=False).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())


def _ko(root, release):
    return os.path.join(root, "lib/modules", release, "updates/dkms/nvidia.ko")


def _modinfo_version(path):
    return subprocess.run(["modinfo", "-F", "version", path], capture_output=True, text=True,
                          check=True).stdout.strip()


# ------------------------------------------------------------------------------------------


def test_stage_builds_new_for_both_kernels_gate_opens_second_run_changes_nothing(
        lab, tmp_path, monkeypatch, record_property):
    host = Host(lab, tmp_path, monkeypatch)
    before = host.state()
    assert before["host"]["installed"]["method"] == "debian"
    assert before["host"]["installed"]["version"] == OLD
    methods = dict((c["vmid"], c["userspace"]["method"]) for c in before["containers"])
    assert methods == {"129": "installed-deb", "131": "bind-mount", "133": "installed-run",
                       "135": "installed-deb"}
    assert before["gate"]["ok"] is False
    # the .run for container 133 (installed by a .run) is on the host
    run_file = host.put_run(NEW)
    # check mode: planned, nothing written anywhere under the root
    snap = digest(host.root)
    planned = host.stage(before, check_mode=True, run_file=run_file)
    assert not planned.get("failed"), planned.get("msg")
    assert planned["changed"] is True
    assert changed(snap, digest(host.root)) == []
    rows = dict((c["vmid"], c["action"]) for c in planned["containers"])
    assert rows == {"129": "would stage", "131": "unchanged", "133": "would start to stage",
                    "135": "would stage"}

    start = time.monotonic()
    done = host.stage(before, run_file=run_file)
    first = time.monotonic() - start
    assert not done.get("failed"), done.get("msg")
    assert done["changed"] is True
    assert [(d["kernel"], d["state_after"]) for d in done["host"]["dkms"]] == [
        (lab["release"], "installed"), (NEXT, "installed")]
    for release in host.kernels:
        assert _modinfo_version(_ko(host.root, release)) == NEW
    status = _dkms(host.root, "status").stdout
    # Debian's package removed the previous build (its prerm); the back-out comes from
    # apt (test_back_out_is_the_same_run_with_the_old_version)
    assert status.splitlines() == ["nvidia/%s, %s, x86_64: installed" % (NEW, k)
                                   for k in host.kernels], status
    assert host.ct_versions("129") == dict((p, NEW + REVISION) for p in CT_PACKAGES)
    assert host.ct_versions("135") == dict((p, NEW + REVISION) for p in CT_PACKAGES)
    rows = dict((c["vmid"], c) for c in done["containers"])
    assert rows["133"]["action"] == "staged" and rows["133"]["started"] == "and stopped again"
    with open(host.pct_file) as handle:
        assert json.load(handle)["containers"]["133"]["status"] == "stopped"
    installer = [c for c in host.calls("nvidia-installer") if c["argv"][1:2] == ["--silent"]]
    assert installer[-1]["argv"][1:] == ["--silent", "--no-questions", "--ui=none",
                                         "--no-kernel-module"]
    assert installer[-1]["root"].endswith("subvol-133-disk-0")
    assert not os.path.exists(os.path.join(
        host.root, "rpool/data/subvol-133-disk-0/root/NVIDIA-Linux-x86_64-%s.run" % NEW))

    after = host.state()
    assert after["gate"] == {"ok": True, "refusals": []}, after["gate"]

    start = time.monotonic()
    snap = digest(host.root)
    again = host.stage(after, run_file=run_file)
    second = time.monotonic() - start
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False, again
    assert changed(snap, digest(host.root)) == []
    record_property("driver_stage_first_s", round(first, 2))
    record_property("driver_stage_second_s", round(second, 2))
    print("driver_stage: host + 2 kernels + 3 containers %.2f s, second run %.2f s"
          % (first, second))

    # the boot: the host loads NEW; every container matches, one left behind would not
    host.boot(NEW)
    booted = host.state(phase="after_boot")
    assert booted["gate"] == {"ok": True, "refusals": []}, booted["gate"]
    out = subprocess.run(["pct", "exec", "129", "--", "nvidia-smi", "-L"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_back_out_is_the_same_run_with_the_old_version_no_build_no_network(
        lab, tmp_path, monkeypatch):
    """Issue 26 item 5: the previous version's DKMS build is kept (Debian's prerm removes
    it from dkms) and the back-out puts it back: dkms only installs, never builds; with no
    repository reachable apt's caches are enough."""
    host = Host(lab, tmp_path, monkeypatch, containers={"129": CONTAINERS["129"]})
    # 129's packages were installed by the `apt` front end, which removes the .debs after
    # installing: staging fetches them into its cache (--download-only) to keep them
    _clean_cache(host.ct_root("129"))
    done = host.stage()
    assert not done.get("failed"), done.get("msg")
    old_debs = sorted("%s_%s%s_amd64.deb" % (p, OLD, REVISION) for p in CT_PACKAGES)
    row = done["containers"][0]
    assert row["kept_debs"] == old_debs and row["put_back"] == []
    ct_keep = os.path.join(host.root, "var/lib/gpuhost-tuning/driver/containers/129/debs")
    assert sorted(os.listdir(ct_keep)) == old_debs
    fetched = [c["argv"] for c in host.calls("apt-get") if "--download-only" in c["argv"]]
    assert len(fetched) == 1 and "--reinstall" in fetched[0], fetched
    keep = "/var/lib/gpuhost-tuning/driver/dkms/nvidia/%s" % OLD
    assert done["host"]["kept_build"] == {"name": "nvidia", "version": OLD,
                                          "kernels": sorted(host.kernels), "path": keep}
    for release in host.kernels:
        assert _modinfo_version(os.path.join(
            host.root, keep.lstrip("/"), release, "x86_64/module/nvidia.ko")) == OLD
    assert sorted(done["host"]["kept_debs"]) == sorted(
        "%s_%s%s_amd64.deb" % (p, OLD, REVISION) for p in HOST_PACKAGES)
    # dpkg's prerm removed the previous build from dkms: only the kept copy has it
    assert OLD not in _dkms(host.root, "status").stdout
    # no network: no repository for either apt, only what apt's caches hold (the double
    # lists its cache as apt's index, so a cleaned cache cannot be shown here: the kept
    # .debs go back into it when apt lacks them, unkeep_debs)
    offline = str(tmp_path / "offline")
    os.makedirs(offline)
    monkeypatch.setenv("GPUHOST_APT_REPO", offline)
    # the container's apt still lists both versions (its last apt update) but can fetch
    # nothing, and its cache was cleaned: only the kept .debs can put OLD back there
    with open(host.pct_file) as handle:
        data = json.load(handle)
    data["apt_offline"] = True
    _write(host.pct_file, json.dumps(data))
    _clean_cache(host.ct_root("129"))

    back = host.stage(version=OLD)
    assert not back.get("failed"), back.get("msg")
    assert back["containers"][0]["put_back"] == old_debs
    # NEW's .debs were in no cache and nothing could fetch them: said, not refused
    said = str(back.get("warnings"))
    assert "129: the previous user space's" in said and "could not be kept" in said, said
    builds = [c for c in back["commands"] if c[1:2] == ["build"]]
    assert builds == [], builds
    assert back["host"]["restored"] == host.kernels
    assert [(d["kernel"], d["state_before"], d["state_after"]) for d in back["host"]["dkms"]] \
        == [(k, "built", "installed") for k in host.kernels]
    for release in host.kernels:
        assert _modinfo_version(_ko(host.root, release)) == OLD
    assert host.ct_versions("129") == dict((p, OLD + REVISION) for p in CT_PACKAGES)
    assert host.state(OLD)["gate"]["ok"] is True
    # and forward again: the build of NEW was kept in its turn
    assert back["host"]["kept_build"]["version"] == NEW


def test_container_left_behind_stops_the_gate_and_fails_after_the_boot(
        lab, tmp_path, monkeypatch):
    host = Host(lab, tmp_path, monkeypatch)
    run_file = host.put_run(NEW)
    staged = host.stage(containers=[129, 131, 133], run_file=run_file,
                        state=host.state())
    assert not staged.get("failed"), staged.get("msg")
    gate = host.state()["gate"]
    assert gate["ok"] is False
    assert gate["refusals"] == ["135: user space %s, target %s (installed-deb): stage it"
                                % (OLD, NEW)]
    host.boot(NEW)
    gate = host.state(phase="after_boot")["gate"]
    assert gate["refusals"] == ["135: user space %s, target %s (installed-deb): stage it"
                                % (OLD, NEW)]
    out = subprocess.run(["pct", "exec", "135", "--", "nvidia-smi", "-L"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 18
    assert "Driver/library version mismatch" in out.stdout


def test_missing_headers_for_the_next_kernel(lab, tmp_path, monkeypatch):
    host = Host(lab, tmp_path, monkeypatch, headers_for=[lab["release"]],
                containers={"129": CONTAINERS["129"]})
    state = host.state()
    assert state["gate"]["ok"] is False
    assert any(r.startswith("host: nvidia %s not installed by DKMS for the next kernel %s"
                            % (NEW, NEXT)) for r in state["gate"]["refusals"])
    snap = digest(host.root)
    result = host.stage(state)
    assert result["failed"] and result["changed"] is False
    assert ("headers for kernel %s not found at /lib/modules/%s/build" % (NEXT, NEXT)
            in result["msg"])
    assert "install linux-headers-%s" % NEXT in result["msg"]
    assert changed(snap, digest(host.root)) == []


def test_bad_input_changes_nothing(lab, tmp_path, monkeypatch):
    host = Host(lab, tmp_path, monkeypatch)
    state = host.state()
    os.makedirs(os.path.join(host.root, "root"))
    snap = digest(host.root)

    unknown = host.stage(state, version="595.11.02")
    assert unknown["failed"] and "host: unknown version 595.11.02" in unknown["msg"]
    assert "nvidia-kernel-dkms 595.11.02 (apt knows 580.95.05, 590.48.01)" in unknown["msg"]
    malformed = host.stage(state, version="590.48.01-1")
    assert malformed["failed"] and "version: '590.48.01-1' is not allowed" in malformed["msg"]

    not_run = os.path.join(host.root, "root/driver.run")
    _write(not_run, "#!/bin/sh\necho hello\n")
    bad = host.stage(state, source="run", run_file="/root/driver.run")
    assert bad["failed"]
    assert "/root/driver.run is not an NVIDIA .run installer: no makeself header" in bad["msg"]
    wrong = os.path.join(host.root, "root/old.run")
    shutil.copy(lab["runs"][OLD], wrong)
    mixed = host.stage(state, source="run", run_file="/root/old.run")
    assert mixed["failed"] and "installs NVIDIA %s, not the target %s" % (OLD, NEW) \
        in mixed["msg"]
    os.unlink(not_run)
    os.unlink(wrong)
    assert changed(snap, digest(host.root)) == []

    host.pct("135", exec_refused=True)
    run_file = host.put_run(NEW)
    refused = host.stage(state, run_file=run_file)
    assert refused["failed"] and refused["changed"] is False
    assert "135: pct exec refused" in refused["msg"]
    assert "Failed to get attach context" in refused["msg"]
    # nothing staged on the host either: the refusal came before any change
    assert host.state()["host"]["installed"]["version"] == OLD
    assert _modinfo_version(_ko(host.root, lab["release"])) == OLD
    host.pct("135", exec_refused=False, disk_free_kb=20 * 1024)
    full = host.stage(state, run_file=run_file)
    assert full["failed"] and "135: disk full: 20 MiB free" in full["msg"]
    assert "the user space stays %s" % OLD in full["msg"]
    assert host.ct_versions("135") == dict((p, OLD + REVISION) for p in CT_PACKAGES)
    # the previous user space still works there
    out = subprocess.run(["pct", "exec", "135", "--", "nvidia-smi", "-L"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout
    # stopped container 133 was started for the check and stopped again
    with open(host.pct_file) as handle:
        assert json.load(handle)["containers"]["133"]["status"] == "stopped"


def test_install_failing_part_way_puts_the_previous_user_space_back(
        lab, tmp_path, monkeypatch):
    host = Host(lab, tmp_path, monkeypatch, containers={"129": CONTAINERS["129"]})
    host.pct("129", apt_fail_version=NEW + REVISION)
    result = host.stage()
    assert result["failed"]
    assert "129: apt-get install of %s failed" % NEW in result["msg"]
    assert "No space left on device" in result["msg"]
    assert "put the previous user space back" in result["msg"]
    assert host.ct_versions("129") == dict((p, OLD + REVISION) for p in CT_PACKAGES)


def test_host_from_the_run_installer(lab, tmp_path, monkeypatch):
    host = Host(lab, tmp_path, monkeypatch, host_method="run",
                containers={"131": CONTAINERS["131"]})
    state = host.state()
    assert state["host"]["installed"]["method"] == "run"
    assert state["host"]["installed"]["version"] == OLD
    run_file = host.put_run(NEW)
    done = host.stage(state, source="run", run_file=run_file)
    assert not done.get("failed"), done.get("msg")
    kept = os.path.join(host.root, "var/lib/gpuhost-tuning/driver/NVIDIA-Linux-x86_64-%s.run"
                        % NEW)
    assert os.path.isfile(kept)
    calls = [c["argv"][1:] for c in host.calls("nvidia-installer")]
    assert ["--silent", "--no-questions", "--ui=none", "--dkms",
            "--kernel-name=%s" % lab["release"]] in calls
    for release in host.kernels:
        assert _modinfo_version(_ko(host.root, release)) == NEW
    after = host.state()
    assert after["host"]["installed"] == dict(after["host"]["installed"], method="run",
                                              version=NEW)
    assert after["gate"]["ok"] is True, after["gate"]
    again = host.stage(after, source="run")   # run_file: the kept copy
    assert not again.get("failed"), again.get("msg")
    assert again["changed"] is False


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _play(host, reports, extra, check=False):
    """ansible-playbook gpuhost.tuning.driver_upgrade on ``host``'s tree (no reboot: another
    root), this checkout's collection, the doubles acting on the root."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "tests/output/pathlink"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    variables = {
        "ansible_python_interpreter": os.path.join(REPO, ".venv/bin/python"),
        "gpuhost_root": host.root, "gpuhost_report_dir": reports,
        "gpuhost_tree_commands": ["pct"],
        "gpuhost_driver_version": NEW, "gpuhost_driver_next_kernel": NEXT,
        "gpuhost_driver_dkms_executable": os.path.join(DOUBLES, "dkms-in-root"),
        "gpuhost_driver_apt_get": os.path.join(DOUBLES, "apt-get"),
        "gpuhost_driver_apt_cache": os.path.join(DOUBLES, "apt-cache"),
        "gpuhost_reboot_verify_boot_config": False, "gpuhost_reboot_verify_vms": False,
        "gpuhost_reboot_verify_containers": False, "gpuhost_reboot_verify_checks": [],
        "gpuhost_reboot_verify_preflight_fail_on_critical": False,
        "gpuhost_reboot_verify_report": False}
    variables.update(extra)
    return subprocess.run(
        [os.path.join(REPO, ".venv/bin/ansible-playbook"), "-c", "local", "-i", "localhost,",
         "gpuhost.tuning.driver_upgrade", "-e", json.dumps(variables)]
        + (["--check"] if check else []),
        env=env, capture_output=True, text=True, check=False, timeout=900)


def test_playbook_stages_gates_and_summarizes(lab, tmp_path, monkeypatch):
    """ansible-playbook gpuhost.tuning.driver_upgrade on the host tree (no reboot: another
    root): staged, gated, the rollout summary naming the driver; a container left out stops
    the gate naming it."""
    host = Host(lab, tmp_path, monkeypatch, containers={"129": CONTAINERS["129"],
                                                        "131": CONTAINERS["131"]})
    reports = str(tmp_path / "reports")
    left_out = _play(host, reports, {"gpuhost_driver_containers": [131]})
    assert left_out.returncode == 2, left_out.stdout[-3000:]
    assert ("not rebooting: driver gate for %s: 129: user space %s, target %s "
            "(installed-deb): stage it" % (NEW, OLD, NEW)) in left_out.stdout
    done = _play(host, reports, {})
    assert done.returncode == 0, done.stdout[-3000:]
    with open(os.path.join(reports, "rollout.json")) as handle:
        doc = json.load(handle)
    assert doc["title"] == "driver_upgrade"
    assert doc["hosts"][0]["status"] == "done"
    assert doc["hosts"][0]["driver"] == {"before": OLD, "after": None}
    assert host.state()["gate"]["ok"] is True


def test_playbook_run_source_on_a_host_that_never_kept_a_run(lab, tmp_path, monkeypatch):
    """Issue 36 item 6: ``-e gpuhost_driver_source=run -e gpuhost_driver_run_file=<the .run
    on the controller>`` on a host without /var/lib/gpuhost-tuning/driver: ``--check`` says
    what it would copy and changes nothing; the real run makes the folder, keeps the .run
    and stages it; with that folder linked out of the root the play stops before writing,
    the folder it leads to untouched."""
    host = Host(lab, tmp_path, monkeypatch, host_method="run",
                containers={"131": CONTAINERS["131"]})
    keep = os.path.join(host.root, "var/lib/gpuhost-tuning/driver")
    assert not os.path.lexists(keep)
    reports = str(tmp_path / "reports")
    # the next boot is the running kernel: the gate judges the .ko built for it (the stand-in
    # NEXT kernel's build links to the same headers, so its .ko names the running kernel)
    run = {"gpuhost_driver_source": "run", "gpuhost_driver_run_file": lab["runs"][NEW],
           "gpuhost_driver_installer": "/bin/sh", "gpuhost_driver_next_kernel": lab["release"],
           "gpuhost_driver_kernels": [lab["release"]]}
    snap = digest(host.root)
    checked = _play(host, reports, run, check=True)
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert "check mode: would copy %s to %s/NVIDIA-Linux-x86_64-%s.run" % (
        lab["runs"][NEW], keep, NEW) in " ".join(checked.stdout.split())
    assert changed(snap, digest(host.root)) == []

    done = _play(host, reports, run)
    assert done.returncode == 0, done.stdout[-3000:]
    kept = os.path.join(keep, "NVIDIA-Linux-x86_64-%s.run" % NEW)
    with open(kept, "rb") as mine, open(lab["runs"][NEW], "rb") as theirs:
        assert mine.read() == theirs.read()
    assert os.stat(kept).st_mode & 0o777 == 0o700
    assert host.state()["host"]["installed"]["version"] == NEW

    # the keep folder linked out of the root: refused, the outside folder as it was
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.txt").write_text("the operator's own\n")
    os.rename(keep, keep + ".aside")
    os.symlink(str(outside), keep)
    before = digest(str(outside))
    refused = _play(host, reports, run)
    assert refused.returncode == 2, refused.stdout[-3000:]
    assert "outside root %s" % host.root in " ".join(refused.stdout.split())
    assert changed(before, digest(str(outside))) == []
