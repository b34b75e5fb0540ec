"""How the collection fits the Ansible ecosystem: what `ansible-galaxy collection build` ships,
the execution environment definition ansible-builder turns into a build context, and the
example inventories ansible-inventory reads. Every check runs the real tool: the one next to
the Python running the tests (a virtualenv's bin), else the one on PATH.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from conftest import REPO

BIN = os.path.dirname(sys.executable)
STATIC_INVENTORY = os.path.join(REPO, "inventories", "proxmox-static")
DYNAMIC_INVENTORY = os.path.join(REPO, "inventories", "proxmox-dynamic")

# What must never be in the published artifact (developer and test state).
FORBIDDEN_PARTS = (".venv", "collections", "__pycache__", ".pytest_cache", ".ruff_cache",
                   ".git", "gpuhost-reports", ".cache")
FORBIDDEN_TOP = ("build/", "tests/output", "bench/out/")


def tool(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        path = shutil.which(name)
    if not path:
        pytest.fail("%s not found next to %s nor on PATH: install requirements-test.txt "
                    "(make venv)" % (name, sys.executable))
    return path


def run(args, cwd=REPO, env=None):
    full_env = dict(os.environ)
    full_env.update({"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"), "NO_COLOR": "1",
                     "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    full_env.update(env or {})
    proc = subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True,
                          check=False)
    # ansible-galaxy reports some failures (a checksum mismatch on install) with rc 0.
    assert proc.returncode == 0 and "[ERROR]" not in proc.stderr, \
        "%s failed (rc %d):\n%s\n%s" % (" ".join(args), proc.returncode, proc.stdout,
                                        proc.stderr)
    return proc


def galaxy_meta():
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def tarball_name():
    meta = galaxy_meta()
    return "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"])


def build_collection(src, out):
    run([tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out),
         str(src)])
    path = os.path.join(str(out), tarball_name())
    assert os.path.isfile(path), "ansible-galaxy build wrote no %s" % path
    return path


def tar_names(path):
    with tarfile.open(path) as tar:
        return [m.name[2:] if m.name.startswith("./") else m.name for m in tar.getmembers()]


def forbidden(names):
    bad = []
    for name in names:
        parts = name.split("/")
        if any(p in FORBIDDEN_PARTS or p.endswith(".pyc") for p in parts):
            bad.append(name)
        elif name.startswith(FORBIDDEN_TOP):
            bad.append(name)
    return bad


# ---------------------------------------------------------------- ansible-galaxy build


def test_galaxy_build_of_the_checkout_ships_content_and_no_developer_state(tmp_path):
    # The live checkout may have .venv, collections/, tests/output (with a link back to the
    # repo) and __pycache__ folders after any test run: build_ignore must keep all of them out
    # (the next test plants each kind, so the exclusion is proven even on a clean checkout).
    names = tar_names(build_collection(REPO, tmp_path))

    assert "MANIFEST.json" in names and "FILES.json" in names
    modules = {n for n in names if re.match(r"plugins/modules/[a-z_]+\.py$", n)}
    assert {"plugins/modules/setpci_maxreadreq.py", "plugins/modules/cpuidle_state.py",
            "plugins/modules/lxc_cgroup_devices.py", "plugins/modules/dkms_build.py",
            "plugins/modules/kernel_cmdline.py"} <= modules
    assert "plugins/module_utils/platform/hostfs.py" in names
    assert any(re.match(r"roles/[a-z_]+/tasks/main\.yml$", n) for n in names)
    assert "roles/common/defaults/main.yml" in names
    assert "meta/runtime.yml" in names
    assert any(n.startswith("inventories/proxmox-static/") for n in names)
    assert forbidden(names) == []


def test_build_ignore_drops_developer_state_that_is_present(tmp_path):
    # A copy of the sources with every kind of junk planted, so the exclusion is proven on
    # files that exist rather than on a tree that happens to be clean.
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(os.path.join(REPO, "galaxy.yml"), src / "galaxy.yml")
    (src / "README.md").write_text("# gpuhost.tuning\n")
    for name in ("plugins", "meta", "roles"):
        shutil.copytree(os.path.join(REPO, name), src / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    planted = {
        ".venv/bin/python": "x", ".venv/pyvenv.cfg": "home = /usr/bin\n",
        "collections/ansible_collections/gpuhost/tuning/galaxy.yml": "x",
        "tests/output/.tmp/sanity.json": "{}",
        "plugins/module_utils/__pycache__/hostfs.cpython-311.pyc": "x",
        "plugins/modules/kernel_cmdline.pyc": "x",
        ".pytest_cache/v/cache/lastfailed": "{}", ".ruff_cache/CACHEDIR.TAG": "x",
        "gpuhost-reports/index.html": "x", "build/gpuhost-tuning-0.0.1.tar.gz": "x",
        "tests/unit/test_kept.py": "def test_kept():\n    pass\n",
    }
    for rel, text in planted.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    names = tar_names(build_collection(src, tmp_path / "out"))

    assert forbidden(names) == []
    assert "tests/unit/test_kept.py" in names
    assert "plugins/module_utils/platform/hostfs.py" in names


# ---------------------------------------------------------------- execution environment


def load_ee():
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_execution_environment_pins_what_the_tests_run():
    ee = load_ee()
    assert ee["version"] == 3
    assert ee["images"]["base_image"]["name"]
    with open(os.path.join(REPO, "requirements-test.txt"), encoding="utf-8") as handle:
        core_pin = re.search(r"^ansible-core==\S+", handle.read(), re.M).group(0)
    assert ee["dependencies"]["ansible_core"]["package_pip"] == core_pin
    assert ee["dependencies"]["ansible_runner"]["package_pip"].startswith("ansible-runner==")
    # The collection's runtime dependency is ansible-core alone.
    assert not ee["dependencies"].get("python") and not ee["dependencies"].get("system")
    # The tarball named in the EE is the one `make build` writes for this version.
    collections = ee["dependencies"]["galaxy"]["collections"]
    assert [c["name"] for c in collections] == ["collections/" + tarball_name()]
    assert [f["src"] for f in ee["additional_build_files"]] == ["build/" + tarball_name()]


def test_ansible_builder_creates_a_context_whose_galaxy_stage_installs_the_collection(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), project)
    build_collection(REPO, project / "build")
    context = tmp_path / "context"

    run([tool("ansible-builder"), "create", "--file", "execution-environment.yml",
         "--context", str(context), "--output-filename", "Containerfile"], cwd=str(project))

    containerfile = (context / "Containerfile").read_text()
    ee = load_ee()
    assert 'ARG EE_BASE_IMAGE="%s"' % ee["images"]["base_image"]["name"] in containerfile
    assert ee["dependencies"]["ansible_core"]["package_pip"] in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert (context / "_build" / "collections" / tarball_name()).is_file()
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert requirements["collections"] == [
        {"name": "collections/" + tarball_name(), "type": "file"}]

    # The galaxy stage runs `ansible-galaxy collection install -r requirements.yml` in
    # /build, a copy of _build: the same command in the same place, without a container.
    installed = tmp_path / "installed"
    # (There /usr/share/ansible/collections is on the collections path; here the target is
    # made the only one, else ansible-galaxy finds ./collections' copy and installs nothing.)
    run([tool("ansible-galaxy"), "collection", "install", "-r", "requirements.yml",
         "--collections-path", str(installed)], cwd=str(context / "_build"),
        env={"ANSIBLE_COLLECTIONS_PATH": str(installed)})
    manifest = installed / "ansible_collections" / "gpuhost" / "tuning" / "MANIFEST.json"
    info = json.loads(manifest.read_text())["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == (
        "gpuhost", "tuning", galaxy_meta()["version"])
    assert info["dependencies"] == {}
    doc = run([tool("ansible-doc"), "-t", "module", "-l", "gpuhost.tuning"],
              env={"ANSIBLE_COLLECTIONS_PATH": str(installed)}).stdout
    assert "gpuhost.tuning.setpci_maxreadreq" in doc


# ---------------------------------------------------------------- inventories


def inventory_json(source):
    out = run([tool("ansible-inventory"), "-i", source, "--list"]).stdout
    return json.loads(out)


def test_static_inventory_graph_lists_clusters_and_gpu_models():
    graph = run([tool("ansible-inventory"), "-i", STATIC_INVENTORY, "--graph"]).stdout
    for group in ("@gpuhosts:", "@pve_cluster_a:", "@pve_cluster_b:", "@gpu_rtx_pro_6000:",
                  "@gpu_h200:"):
        assert group in graph
    assert "[WARNING]" not in graph


def test_static_inventory_every_host_has_one_cluster_one_gpu_model_and_connection_vars():
    data = inventory_json(STATIC_INVENTORY)
    hostvars = data["_meta"]["hostvars"]

    def members(group):
        return set(data.get(group, {}).get("hosts", []))

    clusters = [g for g in data if g.startswith("pve_cluster_")]
    models = [g for g in data if g.startswith("gpu_")]
    assert set(data["gpuhosts"]["children"]) == set(clusters + models)
    hosts = set().union(*(members(g) for g in clusters))
    assert len(hosts) >= 4
    assert hosts == set().union(*(members(g) for g in models))
    for host in hosts:
        assert sum(host in members(g) for g in clusters) == 1, host
        assert sum(host in members(g) for g in models) == 1, host
        assert hostvars[host]["ansible_python_interpreter"] == "/usr/bin/python3"
        assert hostvars[host]["ansible_user"]
        assert isinstance(hostvars[host]["gpuhost_serial"], int)
        assert hostvars[host]["gpuhost_serial"] >= 1
    assert hostvars["pve-a-gpu01"]["gpuhost_kernel_version"] == "6.14.11-5-bpo12-pve"


def test_dynamic_inventory_is_documented_optional_and_yields_nodes_only():
    # tests/packaging/test_inventory_guests.py runs it against a fake of the Proxmox API.
    with open(os.path.join(DYNAMIC_INVENTORY, "gpuhosts.proxmox.yml"), encoding="utf-8") as fh:
        text = fh.read()
    config = yaml.safe_load(text)
    assert config["plugin"] == "community.proxmox.proxmox"
    # Guests are filtered out by the plugin itself, with no API call per guest.
    assert config["want_facts"] is False
    assert config["filters"] == ["proxmox_vmtype not in ['lxc', 'qemu']"]
    assert config["strict"] is True
    assert "optional" in text and "not" in text and "dependency" in text
    # No credentials in the file: they come from PROXMOX_* environment variables.
    assert not {"password", "token_secret", "token_id", "user"} & set(config)
    # The collection itself must not depend on community.proxmox.
    assert galaxy_meta().get("dependencies") in (None, {})
