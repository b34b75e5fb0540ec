"""Fast checks of the VM lab (lab/) and the stand-in driver (tests/assets/gpustub).

The lab itself (a real boot, upgrade and reboot under QEMU) is `make lab`; these tests check
what can go wrong without a VM: the image cache key, the scripts and playbooks parse, the
driver builds against real kernel headers and has the parameter the lab relies on, and the
driver refuses bad input before it starts anything.
"""

import glob
import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = os.path.join(REPO, "lab")
GPUSTUB = os.path.join(REPO, "tests", "assets", "gpustub")
BIN = os.path.join(REPO, ".venv", "bin")


def recipe_hash(repo):
    out = subprocess.run(
        ["bash", "-c", ". lab/lib.sh && lab_recipe_hash"],
        cwd=repo, capture_output=True, text=True, check=True, env={**os.environ, "LAB_CACHE": repo},
    )
    return out.stdout.strip()


@pytest.fixture
def repo_copy(tmp_path):
    """The parts of the checkout that decide the image, copied so a test can edit them."""
    shutil.copytree(LAB, tmp_path / "lab")
    shutil.copytree(GPUSTUB, tmp_path / "tests" / "assets" / "gpustub",
                    ignore=shutil.ignore_patterns("*.o", "*.ko", "*.mod*", ".*"))
    return tmp_path


def test_recipe_hash_follows_what_goes_into_the_image(repo_copy):
    first = recipe_hash(repo_copy)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert recipe_hash(repo_copy) == first

    # The driver and the playbooks are not in the image: editing them must not rebuild it.
    (repo_copy / "lab" / "run.sh").write_text("# edited\n", encoding="utf-8")
    (repo_copy / "lab" / "upgrade.yml").write_text("# edited\n", encoding="utf-8")
    assert recipe_hash(repo_copy) == first

    # The stand-in driver's source, the recipe and the guest files are.
    src = repo_copy / "tests" / "assets" / "gpustub" / "gpustub.c"
    src.write_text(src.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    second = recipe_hash(repo_copy)
    assert second != first
    conf = repo_copy / "lab" / "guest" / "etc" / "modprobe.d" / "gpustub.conf"
    conf.write_text("options gpustub disable_hmm=0\n", encoding="utf-8")
    assert recipe_hash(repo_copy) not in (first, second)


@pytest.mark.parametrize("script", sorted(glob.glob(os.path.join(LAB, "*.sh"))))
def test_lab_scripts_parse(script):
    result = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("playbook", ["setup.yml", "upgrade.yml", "reboot.yml", "assert.yml"])
def test_lab_playbooks_pass_syntax_check(playbook, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    lab:\n      hosts:\n        vm:\n",
                         encoding="utf-8")
    result = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "--syntax-check", "-i", str(inventory),
         os.path.join(LAB, playbook)],
        capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg")},
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dkms_conf_matches_the_recipe():
    conf = open(os.path.join(GPUSTUB, "dkms.conf"), encoding="utf-8").read()
    recipe = open(os.path.join(LAB, "recipe.env"), encoding="utf-8").read()
    name = re.search(r'^PACKAGE_NAME="(\w+)"', conf, re.M).group(1)
    version = re.search(r'^PACKAGE_VERSION="([\w.]+)"', conf, re.M).group(1)
    assert re.search(rf"^LAB_DKMS_NAME={name}$", recipe, re.M)
    assert re.search(rf"^LAB_DKMS_VERSION={re.escape(version)}$", recipe, re.M)
    assert re.search(rf'^BUILT_MODULE_NAME\[0\]="{name}"$', conf, re.M)


def _headers():
    return sorted(d for d in glob.glob("/lib/modules/*/build") if os.path.isdir(d))


@pytest.mark.skipif(not _headers(), reason="no kernel headers (/lib/modules/*/build)")
def test_gpustub_builds_and_declares_its_parameter(tmp_path):
    build = tmp_path / "gpustub"
    shutil.copytree(GPUSTUB, build)
    kver = os.path.basename(os.path.dirname(_headers()[-1]))
    result = subprocess.run(["make", f"KVER={kver}"], cwd=build, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    info = subprocess.run(["/sbin/modinfo", str(build / "gpustub.ko")],
                          capture_output=True, text=True, check=True).stdout
    assert re.search(r"^parm:\s+disable_hmm:.*\(int\)$", info, re.M), info
    assert re.search(rf"^vermagic:\s+{re.escape(kver)} ", info, re.M), info
    source = (build / "gpustub.c").read_text(encoding="utf-8")
    # Dynamic major (like nvidia-uvm), read-only parameter (like uvm_disable_hmm).
    assert 'register_chrdev(0, "gpustub"' in source
    assert "module_param(disable_hmm, int, 0444)" in source


def _run_driver(tmp_path, steps):
    env = {**os.environ, "LAB_CACHE": str(tmp_path), "LAB_STEPS": steps}
    return subprocess.run([os.path.join(LAB, "run.sh")], capture_output=True, text=True,
                          env=env, timeout=120)


def test_driver_rejects_an_unknown_step_before_starting_anything(tmp_path):
    result = _run_driver(tmp_path, "image bogus")
    assert result.returncode != 0
    assert "unknown step 'bogus'" in result.stderr
    assert not (tmp_path / "images").exists()


def test_driver_without_an_image_says_which_step_to_add(tmp_path):
    result = _run_driver(tmp_path, "boot")
    assert result.returncode != 0
    assert "include the 'image' step" in result.stderr
    assert "FAILED in step 'boot'" in result.stderr


def _cached_image():
    out = subprocess.run(["bash", "-c", ". lab/lib.sh && lab_image_dir"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.strip()
    return out if os.path.isfile(os.path.join(out, "disk.qcow2")) else None


@pytest.mark.skipif(not shutil.which("qemu-system-x86_64") or not _cached_image(),
                    reason="needs QEMU and the lab image built by `make lab`")
def test_a_boot_that_times_out_shows_the_console_and_leaves_no_vm(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "LAB_STEPS": "boot", "LAB_SSH_TIMEOUT": "1", "LAB_RUN": str(run)}
    result = subprocess.run([os.path.join(LAB, "run.sh")], capture_output=True, text=True,
                            env=env, timeout=180)
    assert result.returncode != 0
    assert "no SSH on 127.0.0.1:" in result.stderr
    assert "serial console, last" in result.stderr
    assert "FAILED in step 'boot'" in result.stderr
    pid = int((run / "supervisor.pid").read_text(encoding="utf-8"))
    assert not os.path.exists(f"/proc/{pid}"), "QEMU's supervisor still runs"
    assert not (run / "qemu.pid").exists(), "QEMU still running after the failed run"
    assert "power on #1" in (run / "supervisor.log").read_text(encoding="utf-8")
    assert not (run / "overlay.qcow2").exists()
    assert (run / "console.log").exists()
