"""Guests are never targets: the playbooks against a container tree and a VM guest tree.

Every role that changes a host refuses a container or a VM guest before any change (role
common's preflight; the tree's digest is unchanged, so no lock file, snapshot or report on
the host either), naming the host and what it is; gpuhost_allow_guest opts in. The audit
runs on a guest and reports it (host_is_guest). A host pattern that matches no inventory
host (a dynamic inventory whose API refused the token) fails the run, except in an audit
slice, which succeeds and writes nothing. A misspelled gpuhost_* variable is warned about
with the nearest known name.

Trees: the VM guest is hosts.vm_host (a QEMU guest's cpuinfo, hypervisor flag, no /etc/pve);
the container has init's environment as LXC starts it (container=lxc, NUL-separated: proc(5))
and /run/systemd/container as systemd writes it inside a container (systemd src/basic/virt.c
reads both). About 25 s (eight playbook runs of 2 to 4 s, and the collection install).
"""

import json
import os
import subprocess

import pytest
from digest import changed, digest
from fixtures import hosts, procsys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv/bin/python")
PLAYBOOK = os.path.join(REPO, ".venv/bin/ansible-playbook")
COLLECTIONS = {}


def _env():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS["path"]
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    return env


@pytest.fixture(scope="module", autouse=True)
def collection(tmp_path_factory):
    # A private copy: other test modules reinstall ./collections while these run.
    private = str(tmp_path_factory.mktemp("collections"))
    subprocess.run([os.path.join(REPO, ".venv/bin/ansible-galaxy"), "collection", "install",
                    "--force", "-p", private, REPO], check=True, env=_env_plain(),
                   capture_output=True, timeout=300)
    COLLECTIONS["path"] = private


def _env_plain():
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = os.path.join(REPO, "ansible.cfg")
    return env


def playbook(name, root, tmp_path, *args, inventory="localhost,"):
    cmd = [PLAYBOOK, "gpuhost.tuning.%s" % name, "-c", "local", "-i", inventory,
           "-e", "ansible_python_interpreter=%s" % VENV_PY, "-e", "gpuhost_root=%s" % root,
           "-e", "gpuhost_report_dir=%s" % (tmp_path / "reports")] + list(args)
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=_env(), capture_output=True, text=True,
                          timeout=300, check=False)
    return proc, proc.stdout + proc.stderr


def container_tree(root):
    root = str(root)
    os.makedirs(os.path.join(root, "proc/1"))
    with open(os.path.join(root, "proc/1/environ"), "wb") as handle:
        handle.write(b"container=lxc\0PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
                     b"\0TERM=linux\0container_ttys=/dev/tty1 /dev/tty2\0")
    os.makedirs(os.path.join(root, "run/systemd"))
    with open(os.path.join(root, "run/systemd/container"), "w") as handle:
        handle.write("lxc\n")
    # the node's CPUs, as a container sees them; no /etc/pve (the node's is not mounted)
    procsys.cpuinfo(root, threads=4)
    procsys.sysctls(root, dict(procsys.DESKTOP_SYSCTLS))
    return root


@pytest.fixture
def guests(tmp_path):
    vm = hosts.vm_host(str(tmp_path / "vm"))["root"]
    ct = container_tree(tmp_path / "ct")
    return {"vm": vm, "ct": ct}


@pytest.mark.parametrize("name,guest,args", [
    ("tune", "vm", ["-e", "gpuhost_tune_pcei=false"]),
    ("revert", "ct", []),
    ("reboot_verify", "vm", ["-e", "gpuhost_reboot_verify_reboot=true"]),
    ("driver_upgrade", "ct", ["-e", "gpuhost_driver_version=590.48.01",
                              "-e", "gpuhost_reboot_verify_reboot=true"]),
])
def test_a_changing_playbook_refuses_a_guest_before_any_change(guests, tmp_path, name, guest,
                                                               args):
    root = guests[guest]
    before = digest(root)
    proc, out = playbook(name, root, tmp_path, *args)
    assert proc.returncode != 0, out[-3000:]
    what = ("a virtual machine guest (unknown hypervisor: /proc/cpuinfo flags: hypervisor)"
            if guest == "vm" else "a container (lxc: /proc/1/environ container=lxc)")
    assert "localhost (%s) is %s" % (root, what) in " ".join(out.split()), out[-3000:]
    assert "gpuhost_allow_guest=true" in out
    assert changed(before, digest(root)) == [], "the guest tree changed"
    report = tmp_path / "reports" / "localhost-tune.json"
    if name == "tune":
        # host_tune refused it after its read-only audit (role tune's guest check is the
        # module's own): its report says so, the host is unchanged
        assert "is %s" % what in " ".join(report.read_text().split())
    else:
        assert not report.exists()
    if name == "tune":
        # a misspelled switch is named, with the one meant
        assert ("[WARNING] gpuhost_tune_pcei is not a gpuhost.tuning variable: nothing reads "
                "it; did you mean gpuhost_tune_pcie?") in " ".join(out.split())


def test_allow_guest_tunes_a_gpu_vm_guest_on_purpose(guests, tmp_path):
    proc, out = playbook("tune", guests["vm"], tmp_path, "--check",
                         "-e", "gpuhost_allow_guest=true")
    assert proc.returncode == 0, out[-3000:]
    assert "localhost is a vm guest (/proc/cpuinfo flags: hypervisor); changed because " \
        "gpuhost_allow_guest is true (host_tune guest: warn)" in " ".join(out.split())


def test_the_audit_runs_on_a_guest_and_says_so(guests, tmp_path):
    proc, out = playbook("audit", guests["ct"], tmp_path,
                         "-e", "gpuhost_audit_report_dir=%s" % (tmp_path / "reports"))
    assert proc.returncode == 0, out[-3000:]
    with open(str(tmp_path / "reports" / "localhost.json")) as handle:
        doc = json.load(handle)
    (item,) = [f for f in doc["findings"] if f["id"] == "host_is_guest"]
    assert (item["subject"], item["severity"]) == ("container", "info")
    assert item["current"] == "a container (lxc; /proc/1/environ container=lxc)"


def test_no_host_matched_fails_and_an_audit_slice_succeeds_writing_nothing(tmp_path):
    empty = tmp_path / "empty.yml"
    empty.write_text("all:\n  children:\n    gpuhosts: {}\n")
    proc, out = playbook("tune", "/nonexistent", tmp_path, inventory=str(empty))
    assert proc.returncode == 2, out[-3000:]
    assert "No inventory host matches the host pattern 'all' (gpuhost_hosts)" in " ".join(
        out.split()), out[-3000:]
    assert "ansible-inventory -i <inventory> --graph" in " ".join(out.split())
    reports = tmp_path / "slice"
    proc, out = playbook("audit", "/nonexistent", tmp_path, "-e",
                         "gpuhost_audit_report_slice=true", "-e",
                         "gpuhost_audit_report_dir=%s" % reports, inventory=str(empty))
    assert proc.returncode == 0, out[-3000:]
    assert not reports.exists()


def test_in_a_fleet_the_node_is_tuned_and_the_guest_refused(guests, tmp_path):
    node = hosts.seed_host(str(tmp_path / "node"))["root"]
    inventory = tmp_path / "fleet.ini"
    inventory.write_text(
        "[gpuhosts]\nnode gpuhost_root=%s\nct gpuhost_root=%s\n\n[all:vars]\n"
        "ansible_connection=local\nansible_python_interpreter=%s\n"
        % (node, guests["ct"], VENV_PY))
    proc = subprocess.run(
        [PLAYBOOK, "gpuhost.tuning.tune", "-i", str(inventory), "--check",
         "-e", "gpuhost_report_dir=%s" % (tmp_path / "reports"), "-e", "gpuhost_tune_pcei=0"],
        cwd=str(tmp_path), env=_env(), capture_output=True, text=True, timeout=300,
        check=False)
    out = proc.stdout + proc.stderr
    recap = out.split("PLAY RECAP")[-1]
    assert proc.returncode == 2, out[-3000:]
    assert [line.split()[0] for line in recap.splitlines() if "failed=1" in line] == ["ct"]
    # host_tune refused ct after its read-only audit; node went through (no host_kind
    # round trip of its own any more: role tune's guest check is host_tune's)
    assert "Read what the host is" not in out
    assert "ct (%s) is a container (lxc: /proc/1/environ container=lxc)" % guests["ct"] in \
        " ".join(out.split())
    assert "fatal: [node]" not in out
    # warned once for the play, not once per host
    assert out.count("is not a gpuhost.tuning variable") == 1


def test_a_host_whose_kind_cannot_be_read_is_refused_not_hung(tmp_path):
    """init's environment replaced by a FIFO (a reader would block on it): the audit's
    reader refuses it, and the role refuses the host, saying why."""
    root = tmp_path / "odd"
    os.makedirs(str(root / "proc/1"))
    os.mkfifo(str(root / "proc/1/environ"))
    before = digest(str(root))
    proc, out = playbook("revert", str(root), tmp_path)
    text = " ".join(out.split())
    assert proc.returncode == 2, out[-3000:]
    assert "localhost (%s) is a host whose kind could not be read (" % root in text
    assert "/proc/1/environ" in text.split("could not be read (")[1]
    assert changed(before, digest(str(root))) == []
