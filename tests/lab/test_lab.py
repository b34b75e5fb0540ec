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
import yaml

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
    result = subprocess.run(["bash", "-n", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("playbook", ["setup.yml", "upgrade.yml", "reboot.yml", "assert.yml",
                                      "audit-check.yml", "tune-check.yml", "gate.yml",
                                      "driver-setup.yml", "driver-assert.yml"])
def test_lab_playbooks_pass_syntax_check(playbook, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    lab:\n      hosts:\n        vm:\n",
                         encoding="utf-8")
    result = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "--syntax-check", "-i", str(inventory),
         os.path.join(LAB, playbook)],
        capture_output=True, text=True, cwd=REPO, check=False,
        env={**os.environ, "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg")},
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("recipe_file", ["recipe.env", "recipe-trixie.env"])
def test_dkms_conf_matches_the_recipe(recipe_file):
    conf = open(os.path.join(GPUSTUB, "dkms.conf"), encoding="utf-8").read()
    recipe = open(os.path.join(LAB, recipe_file), encoding="utf-8").read()
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
    result = subprocess.run(["make", f"KVER={kver}"], cwd=build, capture_output=True, text=True,
                            check=False)
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
                          env=env, timeout=120, check=False)


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
                            env=env, timeout=180, check=False)
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


# --- the collection run (make lab-collection): wiring, checked without a VM ---------------

def _declared_role_variables():
    """Every option named in roles/*/meta/argument_specs.yml, and every role default."""
    names = set()
    for spec in glob.glob(os.path.join(REPO, "roles", "*", "meta", "argument_specs.yml")):
        with open(spec, encoding="utf-8") as handle:
            for entry in yaml.safe_load(handle)["argument_specs"].values():
                names.update((entry.get("options") or {}).keys())
    for defaults in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")):
        with open(defaults, encoding="utf-8") as handle:
            names.update((yaml.safe_load(handle) or {}).keys())
    return names


def test_collection_vars_name_only_variables_the_roles_define():
    with open(os.path.join(LAB, "vars/collection.yml"), encoding="utf-8") as handle:
        lab_vars = yaml.safe_load(handle)
    unknown = sorted(k for k in lab_vars
                     if not k.startswith("lab_") and k not in _declared_role_variables())
    assert not unknown, "lab/vars/collection.yml sets variables no role defines: %s" % unknown
    # the run the lab exists for: upgrade, trial boot, reboot by the role itself
    assert lab_vars["gpuhost_reboot_verify_kernel_upgrade"] is True
    assert lab_vars["gpuhost_reboot_verify_reboot"] is True
    assert lab_vars["gpuhost_trial_boot"] is True
    assert lab_vars["gpuhost_boot_params"] == {"processor.max_cstate": "1", "nmi_watchdog": "0"}
    assert lab_vars["gpuhost_reboot_verify_module_params"] == {"gpustub": {"disable_hmm": "1"}}


def test_shared_role_variables_are_defaulted_once_in_role_common():
    owners = {}
    for defaults in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")):
        with open(defaults, encoding="utf-8") as handle:
            for key in (yaml.safe_load(handle) or {}):
                owners.setdefault(key, []).append(defaults.split(os.sep)[-3])
    for key in ("gpuhost_tree_commands", "gpuhost_esp_dirs"):
        assert owners.get(key) == ["common"], (key, owners.get(key))


def _fake_run(base, steps, env_extra):
    """A run folder the driver accepts without the boot step: localhost inventory."""
    run = base / "run"
    run.mkdir(parents=True)
    (run / "inventory.yml").write_text(
        "all:\n  children:\n    lab:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n"
        f"          ansible_python_interpreter: {os.path.join(BIN, 'python')}\n",
        encoding="utf-8")
    (run / "lab-vars.yml").write_text(f"lab_run_dir: {run}\n", encoding="utf-8")
    env = {**os.environ, "LAB_CACHE": str(base), "LAB_RUN": str(run), "LAB_STEPS": steps,
           "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"), **env_extra}
    return subprocess.run([os.path.join(LAB, "run.sh")], capture_output=True, text=True,
                          env=env, timeout=180, check=False)


def _playbook(path, tasks):
    path.write_text(yaml.safe_dump([{"name": "t", "hosts": "lab", "gather_facts": False,
                                     "tasks": tasks}]), encoding="utf-8")
    return str(path)


def test_tune_step_takes_the_expected_failure_only_through_its_check(tmp_path):
    failing_tune = _playbook(tmp_path / "tune.yml", [
        {"name": "the MRRS write did not take", "ansible.builtin.fail": {"msg": "MRRS refused"}}])
    accepting = _playbook(tmp_path / "accept.yml", [
        {"name": "tune failed", "ansible.builtin.assert": {"that": ["lab_tune_rc | int == 2"]}}])
    rejecting = _playbook(tmp_path / "reject.yml", [
        {"name": "tune passed", "ansible.builtin.assert": {"that": ["lab_tune_rc | int == 0"]}}])

    result = _fake_run(tmp_path / "a", "tune", {"LAB_TUNE_PLAYBOOK": failing_tune,
                                                "LAB_TUNE_CHECK": accepting})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "tune playbook exited 2" in result.stderr

    # a check that rejects the result fails the step; without a check tune's verdict stands
    for name, check in (("b", rejecting), ("c", "")):
        result = _fake_run(tmp_path / name, "tune", {"LAB_TUNE_PLAYBOOK": failing_tune,
                                                     "LAB_TUNE_CHECK": check})
        assert result.returncode != 0, name
        assert "FAILED in step 'tune'" in result.stderr, name


def test_driver_vars_name_only_variables_the_roles_define():
    with open(os.path.join(LAB, "vars/driver.yml"), encoding="utf-8") as handle:
        lab_vars = yaml.safe_load(handle)
    unknown = sorted(k for k in lab_vars
                     if not k.startswith("lab_") and k not in _declared_role_variables())
    assert not unknown, "lab/vars/driver.yml sets variables no role defines: %s" % unknown
    assert lab_vars["gpuhost_driver_version"] == "590.48.01"
    assert lab_vars["gpuhost_reboot_verify_reboot"] is True


def test_driver_mode_runs_the_driver_steps_in_order(tmp_path):
    env = {**os.environ, "LAB_CACHE": str(tmp_path), "LAB_DRIVER": "1",
           "LAB_STEPS": "bogus"}
    result = subprocess.run([os.path.join(LAB, "run.sh")], capture_output=True, text=True,
                            env=env, timeout=60, check=False)
    assert result.returncode != 0 and "unknown step 'bogus'" in result.stderr
    assert "args: -e @" + os.path.join(LAB, "vars/driver.yml") in result.stderr
    source = open(os.path.join(LAB, "run.sh"), encoding="utf-8").read()
    steps = re.search(r'LAB_STEPS:=(image boot ping driver[a-z_ ]+)\}', source).group(1).split()
    assert steps == ["image", "boot", "ping", "driver_setup", "driver_gate", "driver_upgrade",
                     "driver_assert", "shutdown"]
    for step in steps:
        assert re.search(r"^step_%s\(\)" % step, source, re.M), step


def test_collection_mode_fills_the_hooks_with_the_collection_playbooks(tmp_path):
    # An unknown step stops the driver before anything starts, after it logged its hooks.
    env = {**os.environ, "LAB_CACHE": str(tmp_path), "LAB_COLLECTION": "1",
           "LAB_STEPS": "bogus"}
    result = subprocess.run([os.path.join(LAB, "run.sh")], capture_output=True, text=True,
                            env=env, timeout=60, check=False)
    assert result.returncode != 0 and "unknown step 'bogus'" in result.stderr
    hooks = re.search(r"hooks: audit=(\S+) tune=(\S+) upgrade=(\S+) verify=\S*; args: (.*)",
                      result.stderr)
    assert hooks, result.stderr
    assert hooks.groups()[:3] == ("gpuhost.tuning.audit", "gpuhost.tuning.tune",
                                  "gpuhost.tuning.reboot_verify")
    assert hooks.group(4).split() == ["-e", "@" + os.path.join(LAB, "vars/collection.yml")]
    for fqcn in hooks.groups()[:3]:
        assert os.path.isfile(os.path.join(REPO, "playbooks", fqcn.split(".")[-1] + ".yml"))
    # its default steps: the role reboots (no `reboot` step), assert and gate after it
    source = open(os.path.join(LAB, "run.sh"), encoding="utf-8").read()
    steps = re.search(r'LAB_STEPS:=([a-z ]+)\}', source).group(1).split()
    order = [steps.index(s) for s in ("setup", "audit", "tune", "upgrade", "assert", "gate")]
    assert order == sorted(order) and "reboot" not in steps


def test_the_recipes_set_the_same_variables():
    """A recipe lacking a variable the other sets would build an image from the wrong
    defaults (customize.sh reads them all)."""
    names = []
    for recipe_file in ("recipe.env", "recipe-trixie.env"):
        text = open(os.path.join(LAB, recipe_file), encoding="utf-8").read()
        names.append(sorted(re.findall(r"^(LAB_\w+)=", text, re.M)))
    assert names[0] == names[1]
