"""The example dynamic inventory yields Proxmox VE nodes only, through the community.proxmox
inventory plugin's own options (``filters``), against a loopback fake of the Proxmox API.

The plugin is the real one: community.proxmox as the ``ansible`` package of
requirements-test.txt ships it (1.4.0 in ansible 12.3.0: nothing more to install; the
collection is skipped, naming why, where it or python3-requests is missing). The fake
answers the requests of both plugin lines: 1.x reads /nodes, /pools and /nodes/<node>/{lxc,
qemu}; 2.x (community.proxmox main, 2.1) reads /cluster/status, /pools and
/cluster/resources?type=vm (plugins/inventory/proxmox.py, _get_nodes and _get_vms). Shapes
as PVE 8 answers them (pve-manager PVE/API2/Nodes.pm index, PVE/API2/Cluster.pm status and
resources, pve-container PVE/API2/LXC.pm and qemu-server PVE/API2/Qemu.pm vmlist), every
answer inside {"data": ...}. A wrong token is answered 401, as pveproxy does. About 6 s.
"""

import http.server
import json
import os
import subprocess
import threading

import pytest
from conftest import LINKS, REPO

DYNAMIC_INVENTORY = os.path.join(REPO, "inventories", "proxmox-dynamic")
TOKEN = "PVEAPIToken=gpuhost@pve!inventory=0f5b1c2e-9d41-4c8a-a7c3-3c5d8e1f2a90"
NODES = ("pve-a-gpu01", "pve-a-gpu02")
GUESTS = ("sglang", "build-vm", "tmpl-debian")


class FakeProxmoxApi(http.server.BaseHTTPRequestHandler):
    ROUTES = {
        # 1.x
        "/api2/json/nodes": [
            {"node": "pve-a-gpu01", "type": "node", "status": "online", "id": "node/pve-a-gpu01",
             "maxcpu": 128, "maxmem": 1622918512640, "level": "", "uptime": 864000},
            {"node": "pve-a-gpu02", "type": "node", "status": "online", "id": "node/pve-a-gpu02",
             "maxcpu": 128, "maxmem": 1622918512640, "level": "", "uptime": 864000},
        ],
        "/api2/json/pools": [],
        "/api2/json/nodes/pve-a-gpu01/lxc": [
            {"vmid": 129, "name": "sglang", "status": "running", "type": "lxc", "cpus": 64,
             "tags": "gpu;gpu-rtx-pro-6000", "maxmem": 549755813888}],
        "/api2/json/nodes/pve-a-gpu01/qemu": [
            {"vmid": 9000, "name": "tmpl-debian", "status": "stopped", "cpus": 2,
             "template": 1}],
        "/api2/json/nodes/pve-a-gpu02/lxc": [],
        "/api2/json/nodes/pve-a-gpu02/qemu": [
            {"vmid": 301, "name": "build-vm", "status": "running", "cpus": 8,
             "maxmem": 17179869184}],
        # 2.x
        "/api2/json/cluster/status": [
            {"type": "cluster", "id": "cluster", "name": "pve-a", "nodes": 2, "quorate": 1,
             "version": 4},
            {"type": "node", "id": "node/pve-a-gpu01", "name": "pve-a-gpu01", "nodeid": 1,
             "ip": "192.0.2.11", "local": 1, "online": 1, "level": ""},
            {"type": "node", "id": "node/pve-a-gpu02", "name": "pve-a-gpu02", "nodeid": 2,
             "ip": "192.0.2.12", "local": 0, "online": 1, "level": ""},
        ],
        "/api2/json/cluster/resources?type=vm": [
            {"id": "lxc/129", "type": "lxc", "vmid": 129, "name": "sglang",
             "node": "pve-a-gpu01", "status": "running", "tags": "gpu;gpu-rtx-pro-6000",
             "template": 0, "maxcpu": 64},
            {"id": "qemu/301", "type": "qemu", "vmid": 301, "name": "build-vm",
             "node": "pve-a-gpu02", "status": "running", "template": 0, "maxcpu": 8},
            {"id": "qemu/9000", "type": "qemu", "vmid": 9000, "name": "tmpl-debian",
             "node": "pve-a-gpu01", "status": "stopped", "template": 1, "maxcpu": 2},
        ],
    }
    calls = []

    def do_GET(self):
        self.calls.append(self.path)
        if self.headers.get("Authorization") != TOKEN:
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


@pytest.fixture
def fake_proxmox():
    pytest.importorskip("requests", reason="community.proxmox's inventory plugin needs it")
    pytest.importorskip("ansible_collections.community.proxmox",
                        reason="community.proxmox (the ansible package) is not installed")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeProxmoxApi)
    FakeProxmoxApi.calls = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _env(url, secret="0f5b1c2e-9d41-4c8a-a7c3-3c5d8e1f2a90"):
    env = dict(os.environ)
    env.update({"PROXMOX_URL": url, "PROXMOX_USER": "gpuhost@pve",
                "PROXMOX_TOKEN_ID": "inventory", "PROXMOX_TOKEN_SECRET": secret,
                # requests honours proxy variables: the fake API is on loopback
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_COLLECTIONS_PATH": LINKS, "ANSIBLE_NOCOLOR": "1"})
    return env


def _run(args, env):
    return subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_dynamic_inventory_yields_the_nodes_and_no_guest(fake_proxmox):
    proc = _run([os.path.join(REPO, ".venv/bin/ansible-inventory"), "-i", DYNAMIC_INVENTORY,
                 "--list"], _env(fake_proxmox))
    assert proc.returncode == 0 and "[WARNING]" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    hostvars = data["_meta"]["hostvars"]
    assert sorted(hostvars) == sorted(NODES)
    assert set(data["proxmox_nodes"]["hosts"]) == set(NODES)
    assert data["gpuhosts"]["children"] == ["proxmox_nodes"]
    for group, body in data.items():
        assert not set(body.get("hosts", [])) & set(GUESTS), group
    # guests are listed by the API but no call is made for any of them
    assert not [c for c in FakeProxmoxApi.calls if "/129" in c or "/301" in c], \
        FakeProxmoxApi.calls
    for node in NODES:
        assert hostvars[node]["ansible_python_interpreter"] == "/usr/bin/python3"
        assert "ansible_host" not in hostvars[node]


def test_tune_lists_the_nodes_only(fake_proxmox):
    proc = _run([os.path.join(REPO, ".venv/bin/ansible-playbook"), "-i", DYNAMIC_INVENTORY,
                 "gpuhost.tuning.tune", "--list-hosts"], _env(fake_proxmox))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    play = proc.stdout.split("play #2")[1]
    listed = set(line.strip() for line in play.splitlines()[3:] if line.strip())
    assert listed == set(NODES), proc.stdout


def test_a_wrong_token_fails_the_run_saying_so(fake_proxmox, tmp_path):
    proc = _run([os.path.join(REPO, ".venv/bin/ansible-playbook"), "-i", DYNAMIC_INVENTORY,
                 "gpuhost.tuning.audit", "-e", "gpuhost_audit_report_dir=%s" % tmp_path],
                _env(fake_proxmox, secret="wrong"))
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, out[-3000:]
    assert "No inventory host matches the host pattern 'all' (gpuhost_hosts)" in out
    assert "401" in out  # the plugin's own warning names the refusal
    assert os.listdir(str(tmp_path)) == []
