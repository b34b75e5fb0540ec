"""lxc_cgroup_devices proven on a REAL kernel: a real LXC container, the cgroup2 device
controller's BPF program, a stale rule refused, the repaired rule allowing the device.

The host tree (a temporary ``root`` for the module) is the seed's: ``/proc/devices`` of the
new kernel (``fixtures.lxc`` era "after": nvidia-uvm 509, nvidia-caps 238) and container
129's ``/etc/pve/lxc/129.conf`` of the old one (``c 504:* rwm`` for nvidia-uvm, ``c 507:*
rwm`` for nvidia-caps: the field story's stale rules). The real container's config is
generated from that file at every start the way pve-container does it: its live section's
raw ``lxc.*`` keys written as ``key = value`` after Debian's
``/usr/share/lxc/config/common.conf`` (``lxc.cgroup2.devices.deny = a`` and the base
allows, which pve-container includes too), the bind mounts' sources resolved under the
root. The device nodes are made as nvidia-modprobe makes them, with the majors the tree's
``/proc/devices`` registers; no driver is behind them, so an allowed open fails with ENXIO
and a refused one with EPERM (the device controller answers before the driver lookup).

This machine's cgroups are hybrid: plain ``lxc-start`` logs "Ignoring cgroup2 limits on
legacy cgroup system" and every major opens. So every command runs in a private mount
namespace (``unshare -m --propagation private``) with cgroup2 mounted on ``/sys/fs/cgroup``
(LXC then attaches its BPF device program, as on Proxmox) and a tmpfs on the tree's
``/dev`` for the nodes (works where the temporary folder is nodev; no node outlives the
namespace). The refusal is asserted first: without it the test proves nothing and fails.

Needs root, lxc, lxc-templates, busybox-static (INTEGRATION_PKGS) and cgroup2 in the kernel.
"""

import errno
import os
import re
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.modules import lxc_cgroup_devices
from fixtures import hosts
from fixtures import lxc as fx
from modrun import run_module

# One worker runs the whole file (--dist loadgroup): containers and the cgroup tree check.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("lxc_real")]

VMID = 129
COMMON_CONF = "/usr/share/lxc/config/common.conf"
TOOLS = ("lxc-create", "lxc-start", "lxc-stop", "lxc-destroy", "unshare", "mknod")
# The nodes probed: (path under /dev, char device of name, minor). nvidiactl's fixed
# major 195 is allowed before and after (the rule the module must keep): it shows the
# container runs and the controller refuses only what no rule allows.
NODES = (
    ("nvidia-uvm", "nvidia-uvm", 0),
    ("nvidia-caps/nvidia-cap1", "nvidia-caps", 1),
    ("nvidiactl", "nvidia-frontend", 255),
)
ERRNO_BY_TEXT = {os.strerror(e): errno.errorcode[e]
                 for e in (errno.EPERM, errno.ENXIO, errno.ENOENT, errno.EACCES, errno.ENODEV)}
# Inside the container (busybox sh): open each node, write "<node> ok" or busybox cat's
# error, whose text is the C library's strerror.
PROBE = (
    'for n in %s; do '
    'if e=$(cat "$n" 2>&1 >/dev/null); then echo "$n ok"; else echo "$n $e"; fi; '
    'done > /gpuhost-probe'
) % " ".join("/dev/" + node[0] for node in NODES)
# Run in the private mount namespace: $1 cgroup folder list or start, then arguments.
NS_START = r"""set -eu
mount -t cgroup2 cgroup2 /sys/fs/cgroup
dev=$1; shift
mount -t tmpfs -o mode=0755,size=64k gpuhost-lxcreal-dev "$dev"
while [ "$1" != -- ]; do
  mkdir -p "$(dirname "$dev/$1")"; mknod -m 0666 "$dev/$1" c "$2" "$3"; shift 3
done
shift
exec lxc-start "$@"
"""
NS_CGROUPS = r"""set -eu
mount -t cgroup2 cgroup2 /sys/fs/cgroup
find /sys/fs/cgroup -maxdepth 4 -type d -name 'lxc.*' | sed 's|^/sys/fs/cgroup||'
"""
NS_RMDIR = r"""set -eu
mount -t cgroup2 cgroup2 /sys/fs/cgroup
rmdir "/sys/fs/cgroup$1"
"""


def _ns(*argv, timeout=60):
    """A command in a private mount namespace of its own (nothing leaves it)."""
    return subprocess.run(["unshare", "-m", "--propagation", "private"] + list(argv),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                          timeout=timeout, env=dict(os.environ, LC_ALL="C"))


def _cgroup_dirs():
    done = _ns("sh", "-c", NS_CGROUPS, "sh", timeout=30)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def _char_majors(text):
    """{name: major} of /proc/devices' "Character devices:" section (the test's own reader,
    so a bug in the collection's cannot make the nodes agree with it)."""
    majors, section = {}, None
    for line in text.splitlines():
        if line.endswith(":"):
            section = line
            continue
        match = re.match(r"^\s*(\d+) (\S.*)$", line)
        if section == "Character devices:" and match:
            majors.setdefault(match.group(2), int(match.group(1)))
    return majors


def _lxc_lines(pve_text, root):
    """The raw ``lxc.*`` keys of a PVE config's live section as LXC config lines, the way
    pve-container's update_lxc_config copies them (``key = value``, in order), with the
    bind mounts' absolute sources resolved under ``root``."""
    lines = []
    for line in pve_text.splitlines():
        if line.startswith("["):
            break
        match = re.match(r"^(lxc\.[A-Za-z0-9_.]+)\s*:\s*(.*)$", line)
        if not match:
            continue
        key, value = match.groups()
        if key == "lxc.mount.entry" and value.startswith("/"):
            value = os.path.join(root, value.lstrip("/"))
        lines.append("%s = %s" % (key, value))
    return lines


class Container:
    """A busybox container under its own lxcpath; every command in a private namespace."""

    def __init__(self, tmp_path, root):
        self.root = root
        self.lxcpath = str(tmp_path / "lxc")
        self.name = "gpuhost-cg-%d" % os.getpid()
        self.dir = os.path.join(self.lxcpath, self.name)
        self.rootfs = os.path.join(self.dir, "rootfs")
        self.log = str(tmp_path / "lxc-start.log")
        self.starts = []
        self.base_conf = str(tmp_path / "base.conf")
        self.base = None

    def create(self):
        os.makedirs(self.lxcpath)
        base = self.base_conf
        with open(base, "w") as handle:
            handle.write("lxc.net.0.type = empty\n")
        done = _ns("lxc-create", "-P", self.lxcpath, "-n", self.name, "-t", "busybox",
                   "-f", base)
        assert done.returncode == 0, "lxc-create failed: %s %s" % (done.stdout, done.stderr)
        with open(os.path.join(self.dir, "config")) as handle:
            self.base = handle.read()

    def write_config(self):
        """The container's LXC config from the tree's 129.conf, as at a PVE start."""
        with open(os.path.join(self.root, "etc/pve/lxc/%d.conf" % VMID)) as handle:
            pve = handle.read()
        lines = ["lxc.include = %s" % COMMON_CONF] + _lxc_lines(pve, self.root)
        with open(os.path.join(self.dir, "config"), "w") as handle:
            handle.write(self.base + "\n# from %d.conf\n" % VMID + "\n".join(lines) + "\n")
        return lines

    def probe(self):
        """Start the container (lxc-start -F) with the probe as init; {node: outcome}."""
        self.write_config()
        with open(os.path.join(self.root, "proc/devices")) as handle:
            majors = _char_majors(handle.read())
        nodes = []
        for node, name, minor in NODES:
            nodes += [node, str(majors[name]), str(minor)]
        out = os.path.join(self.rootfs, "gpuhost-probe")
        if os.path.exists(out):
            os.unlink(out)
        start = time.monotonic()
        done = _ns("sh", "-c", NS_START, "sh", os.path.join(self.root, "dev"), *nodes, "--",
                   "-F", "-P", self.lxcpath, "-n", self.name, "-o", self.log, "-l", "INFO",
                   "--", "/bin/sh", "-c", PROBE)
        self.starts.append(time.monotonic() - start)
        with open(self.log) as handle:
            log = handle.read()
        assert done.returncode == 0 and os.path.exists(out), (
            "lxc-start failed (rc %s): %s %s\n%s" % (done.returncode, done.stdout,
                                                     done.stderr, log[-4000:]))
        assert "Ignoring cgroup2 limits" not in log, "LXC ignored the cgroup2 rules:\n" + log
        outcome = {}
        with open(out) as handle:
            for line in handle:
                node, _sep, rest = line.strip().partition(" ")
                if rest == "ok":
                    outcome[node] = "ok"
                    continue
                found = [code for text, code in ERRNO_BY_TEXT.items() if text in rest]
                outcome[node] = found[0] if found else rest
        return outcome

    def destroy(self):
        _ns("lxc-stop", "-k", "-P", self.lxcpath, "-n", self.name, timeout=30)
        done = _ns("lxc-destroy", "-f", "-P", self.lxcpath, "-n", self.name, timeout=60)
        shutil.rmtree(self.lxcpath, ignore_errors=True)
        return done


@pytest.fixture
def container(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: real LXC containers and a cgroup2 mount in a private "
                    "mount namespace")
    missing = [tool for tool in TOOLS if not shutil.which(tool)]
    template = "/usr/share/lxc/templates/lxc-busybox"
    for path in (template, COMMON_CONF):
        if not os.path.exists(path):
            missing.append(path)
    if not shutil.which("busybox"):
        missing.append("busybox (busybox-static)")
    with open("/proc/filesystems") as handle:
        if "cgroup2" not in handle.read().split():
            missing.append("cgroup2 in /proc/filesystems")
    if missing:
        (pytest.fail if os.environ.get("GPUHOST_TEST_STRICT") else pytest.skip)(
            "missing %s (scripts/apt-ensure.sh lxc lxc-templates busybox-static)"
            % ", ".join(missing))
    root = str(tmp_path / "host")
    fx.proc_devices(root, era="after")
    fx.container_129(root, era="before")
    os.makedirs(os.path.join(root, "dev"))
    cgroups_before = _cgroup_dirs()
    box = Container(tmp_path, root)
    try:
        box.create()
        yield box
    finally:
        done = box.destroy()
        # LXC leaves its empty monitor pivot cgroup (lxc.pivot) behind: remove the one it
        # made; anything else of this container left in the cgroup tree is a leak.
        left = _cgroup_dirs() - cgroups_before
        for path in sorted(p for p in left if os.path.basename(p) == "lxc.pivot"):
            _ns("sh", "-c", NS_RMDIR, "sh", path, timeout=30)
        leaked = sorted(p for p in left if box.name in p)
        assert done.returncode == 0, "lxc-destroy failed: %s" % done.stderr
        assert not leaked, "container cgroups left behind: %s" % leaked


def _allow_rules(path):
    with open(path) as handle:
        text = handle.read().split("\n[", 1)[0]
    return re.findall(r"^lxc\.cgroup2\.devices\.allow: (.*)$", text, re.M)


def test_stale_rule_refused_then_repaired_rule_allows(container, record_property):
    conf = os.path.join(container.root, "etc/pve/lxc/%d.conf" % VMID)
    uvm, cap, ctl = ("/dev/" + node[0] for node in NODES)

    # The stale rules first: the kernel must refuse, or the rest proves nothing.
    before = container.probe()
    assert before[uvm] == "EPERM", (
        "the stale rule c 504:* did not make the kernel refuse nvidia-uvm 509 (%s): the "
        "cgroup2 device controller is not in force, the test cannot prove the repair"
        % before)
    assert before[cap] == "EPERM", before
    assert before[ctl] == "ENXIO", before  # c 195:* rwm allows it: the container runs

    # Check mode changes nothing: the file and the kernel's answer stay.
    with open(conf, "rb") as handle:
        original = handle.read()
    planned = run_module(lxc_cgroup_devices, {"vmid": VMID, "root": container.root},
                         check_mode=True)
    assert planned["changed"] is True and not planned.get("failed"), planned
    with open(conf, "rb") as handle:
        assert handle.read() == original
    assert container.probe() == before

    result = run_module(lxc_cgroup_devices, {"vmid": VMID, "root": container.root})
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    # Restarted with the repaired config: the kernel allows the devices now.
    after = container.probe()
    assert after == {uvm: "ENXIO", cap: "ENXIO", ctl: "ENXIO"}, after
    assert result["majors"] == {"nvidia": 195, "nvidia-uvm": 509, "nvidia-caps": 238}
    assert sorted(result["removed"]) == ["c 504:* rwm", "c 507:* rwm"]
    assert sorted(_allow_rules(conf)) == sorted(
        ["c 195:* rwm", "c 509:* rwm", "c 238:* rwm", "c 226:* rwm"])

    again = run_module(lxc_cgroup_devices, {"vmid": VMID, "root": container.root})
    assert again["changed"] is False and not again.get("failed"), again
    assert container.probe() == after

    record_property("lxc_start_s", [round(s, 3) for s in container.starts])
    print("lxc-start with the probe: %s s" % ", ".join("%.3f" % s for s in container.starts))


def test_cgroup_v1_device_rules_are_ignored_and_the_audit_says_so(container):
    """The pre-cgroup2 guides' ``lxc.cgroup.devices.allow`` for the right majors: LXC on a
    unified hierarchy ignores them (the kernel refuses the nodes), and the audit's
    lxc_cgroup_v1_keys names them (high); its remedy (rename to lxc.cgroup2.) opens them."""
    conf = os.path.join(container.root, "etc/pve/lxc/%d.conf" % VMID)
    uvm, cap, ctl = ("/dev/" + node[0] for node in NODES)
    with open(conf) as handle:
        text = handle.read()
    live, sep, rest = text.partition("\n[")
    live = live.replace("lxc.cgroup2.devices.allow: c 504:* rwm",
                        "lxc.cgroup.devices.allow: c 509:* rwm")
    live = live.replace("lxc.cgroup2.devices.allow: c 507:* rwm",
                        "lxc.cgroup.devices.allow: c 238:* rwm")
    with open(conf, "w") as handle:
        handle.write(live + sep + rest)

    before = container.probe()
    with open(container.log) as handle:
        log = handle.read()
    assert before[uvm] == "EPERM" and before[cap] == "EPERM", before
    assert before[ctl] == "ENXIO", before
    assert "Ignoring legacy cgroup limits on pure cgroup2 system" in log, log[-4000:]

    result = audit.audit(container.root, hosts.common_wanted())
    (finding,) = [f for f in result["findings"] if f["id"] == "lxc_cgroup_v1_keys"]
    assert finding["subject"] == "lxc %d" % VMID and finding["severity"] == "high", finding
    assert "c 509:* rwm" in finding["current"] and "c 238:* rwm" in finding["current"]

    # The remedy's rename, then the same start: the kernel allows both.
    with open(conf, "w") as handle:
        handle.write(live.replace("lxc.cgroup.devices.", "lxc.cgroup2.devices.") + sep + rest)
    assert container.probe() == {uvm: "ENXIO", cap: "ENXIO", ctl: "ENXIO"}
    again = audit.audit(container.root, hosts.common_wanted())
    assert not [f for f in again["findings"] if f["id"] == "lxc_cgroup_v1_keys"]
