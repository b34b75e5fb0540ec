"""How the collection fits the Ansible ecosystem: what `ansible-galaxy collection build` ships,
the execution environment definition ansible-builder turns into a build context, and the
example inventories ansible-inventory reads. Every check runs the real tool: the one next to
the Python running the tests (a virtualenv's bin), else the one on PATH.
"""

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading

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
    assert "plugins/module_utils/onhost/hostfs.py" in names
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
    assert "plugins/module_utils/onhost/hostfs.py" in names


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


def test_dynamic_inventory_is_documented_optional_and_keys_groups_by_tag():
    with open(os.path.join(DYNAMIC_INVENTORY, "gpuhosts.proxmox.yml"), encoding="utf-8") as fh:
        text = fh.read()
    config = yaml.safe_load(text)
    assert config["plugin"] == "community.proxmox.proxmox"
    assert config["want_facts"] is True
    assert any("proxmox_tags_parsed" in k["key"] for k in config["keyed_groups"])
    assert "optional" in text and "not" in text and "dependency" in text
    # No credentials in the file: they come from PROXMOX_* environment variables.
    assert not {"password", "token_secret", "token_id", "user"} & set(config)
    # The collection itself must not depend on community.proxmox.
    assert galaxy_meta().get("dependencies") in (None, {})


class FakeProxmoxApi(http.server.BaseHTTPRequestHandler):
    """The read-only part of the Proxmox VE API the inventory plugin calls (shapes as a PVE 8
    node answers them): two GPU nodes, a tagged GPU container and an untagged VM."""

    TOKEN = "PVEAPIToken=gpuhost@pve!inventory=0f5b1c2e-9d41-4c8a-a7c3-3c5d8e1f2a90"
    LXC_CONFIG = {
        "hostname": "sglang", "arch": "amd64", "cores": 64, "memory": 524288,
        "ostype": "debian", "tags": "gpu;gpu-rtx-pro-6000", "onboot": 1,
        "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
        "rootfs": "local-zfs:subvol-129-disk-0,size=200G",
        "lxc": [["lxc.cgroup2.devices.allow", "c 195:* rwm"],
                ["lxc.cgroup2.devices.allow", "c 509:* rwm"],
                ["lxc.mount.entry",
                 "/dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file"]],
        "digest": "5f0c6e1d2b3a4c5d6e7f8091a2b3c4d5e6f70812",
    }
    ROUTES = {
        "/api2/json/nodes": [
            {"node": "pve-a-gpu01", "type": "node", "status": "online", "id": "node/pve-a-gpu01",
             "maxcpu": 128, "level": ""},
            {"node": "pve-a-gpu02", "type": "node", "status": "online", "id": "node/pve-a-gpu02",
             "maxcpu": 128, "level": ""},
        ],
        "/api2/json/pools": [],
        "/api2/json/nodes/pve-a-gpu01/lxc": [
            {"vmid": 129, "name": "sglang", "status": "running", "type": "lxc", "cpus": 64}],
        "/api2/json/nodes/pve-a-gpu01/qemu": [],
        "/api2/json/nodes/pve-a-gpu02/lxc": [],
        "/api2/json/nodes/pve-a-gpu02/qemu": [
            {"vmid": 301, "name": "build-vm", "status": "stopped", "cpus": 8}],
        "/api2/json/nodes/pve-a-gpu01/lxc/129/status/current": {"status": "running", "vmid": 129},
        "/api2/json/nodes/pve-a-gpu01/lxc/129/config": LXC_CONFIG,
        "/api2/json/nodes/pve-a-gpu01/lxc/129/snapshot": [
            {"name": "current", "description": "You are here!", "running": 1}],
        "/api2/json/nodes/pve-a-gpu01/lxc/129/interfaces": [
            {"name": "lo", "hwaddr": "00:00:00:00:00:00", "inet": "127.0.0.1/8"},
            {"name": "eth0", "hwaddr": "bc:24:11:5e:7a:01", "inet": "192.0.2.129/24"}],
        "/api2/json/nodes/pve-a-gpu02/qemu/301/status/current": {
            "status": "stopped", "qmpstatus": "stopped", "vmid": 301},
        "/api2/json/nodes/pve-a-gpu02/qemu/301/config": {
            "name": "build-vm", "cores": 8, "memory": "16384", "ostype": "l26",
            "scsi0": "local-zfs:vm-301-disk-0,size=64G", "digest": "0a1b2c"},
        "/api2/json/nodes/pve-a-gpu02/qemu/301/snapshot": [{"name": "current"}],
    }
    calls = []

    def do_GET(self):
        self.calls.append(self.path)
        if self.headers.get("Authorization") != self.TOKEN:
            return self.answer(401, {"data": None})
        if self.path not in self.ROUTES:
            return self.answer(501, {"data": None, "errors": {"path": "not implemented"}})
        return self.answer(200, {"data": self.ROUTES[self.path]})

    def answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


def plain(value):
    """A value from `ansible-inventory --list` without its {"__ansible_unsafe": ...} wrappers
    (API data is marked unsafe so it is never templated)."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@pytest.fixture
def fake_proxmox():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeProxmoxApi)
    FakeProxmoxApi.calls = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_dynamic_inventory_reads_nodes_and_tagged_guests_from_the_api(fake_proxmox):
    # The real community.proxmox plugin (shipped by the `ansible` package of
    # requirements-test.txt) against a loopback fake of the API, credentials only from the
    # environment as documented.
    pytest.importorskip("requests")
    pytest.importorskip("ansible_collections.community.proxmox")
    env = {"PROXMOX_URL": fake_proxmox, "PROXMOX_USER": "gpuhost@pve",
           "PROXMOX_TOKEN_ID": "inventory",
           "PROXMOX_TOKEN_SECRET": "0f5b1c2e-9d41-4c8a-a7c3-3c5d8e1f2a90",
           # requests honours proxy variables: the fake API is on loopback, never proxied.
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    proc = run([tool("ansible-inventory"), "-i", DYNAMIC_INVENTORY, "--list"], env=env)
    assert "[WARNING]" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    hostvars = data["_meta"]["hostvars"]

    def members(group):
        return set(data.get(group, {}).get("hosts", []))

    # The nodes are the GPU hosts, with the connection settings of group_vars/gpuhosts.yml.
    assert "proxmox_nodes" in data["gpuhosts"]["children"]
    assert members("proxmox_nodes") == {"pve-a-gpu01", "pve-a-gpu02"}
    for node in ("pve-a-gpu01", "pve-a-gpu02"):
        assert hostvars[node]["ansible_python_interpreter"] == "/usr/bin/python3"
        assert hostvars[node]["gpuhost_serial"] == 1
        assert "ansible_host" not in hostvars[node]
    # Guests: grouped by tag, and the GPU workload container found by its `gpu` tag.
    assert members("tag_gpu") == {"sglang"}
    assert members("tag_gpu_rtx_pro_6000") == {"sglang"}
    assert members("gpu_workloads") == {"sglang"}
    assert "build-vm" in members("proxmox_all_qemu")
    assert "build-vm" not in members("gpu_workloads")
    assert plain(hostvars["sglang"]["proxmox_vmid"]) == 129
    assert plain(hostvars["sglang"]["proxmox_tags_parsed"]) == ["gpu", "gpu-rtx-pro-6000"]
    assert "sglang" not in data["gpuhosts"].get("hosts", [])
    assert "/api2/json/nodes/pve-a-gpu01/lxc/129/config" in FakeProxmoxApi.calls
