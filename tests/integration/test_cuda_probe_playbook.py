"""cuda_probe through ansible-playbook (AnsiballZ packaging, the probe's source shipped to a
container from inside the module), against the stand-in libcuda.so.1 and the pct double."""

import json
import os
import subprocess

import fakecuda
from fixtures import lxc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
DOUBLES = os.path.join(REPO, "tests", "doubles")
COLLECTIONS = os.path.join(REPO, "tests", "output", "pathlink")

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Probe CUDA
      gpuhost.tuning.cuda_probe: {args}
      register: probe
      ignore_errors: true
    - name: Keep the result
      ansible.builtin.copy:
        content: "{{{{ probe | to_json }}}}"
        dest: "{out}"
"""


def play(tmp_path, args, env_extra):
    out = str(tmp_path / "result.json")
    path = tmp_path / "play.yml"
    path.write_text(PLAY.format(args=json.dumps(args), out=out))
    env = fakecuda.clean_environ()
    env.update({"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
                "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1",
                "PATH": DOUBLES + os.pathsep + os.environ.get("PATH", "")})
    env.update(env_extra)
    proc = subprocess.run([PLAYBOOK, "-c", "local", "-i", "localhost,", str(path),
                           "-e", "ansible_python_interpreter=" + VENV_PY],
                          env=env, capture_output=True, text=True, check=False,
                          cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out) as handle:
        return json.load(handle)


def test_host_two_gpus_with_bandwidth_and_link_ceilings(tmp_path):
    lib = fakecuda.build()
    root = tmp_path / "root"
    for bdf, speed in (("0000:a1:00.0", "32.0 GT/s PCIe"), ("0000:c1:00.0", "8.0 GT/s PCIe")):
        folder = root / "sys/bus/pci/devices" / bdf
        folder.mkdir(parents=True)
        (folder / "current_link_speed").write_text(speed + "\n")
        (folder / "current_link_width").write_text("16\n")
    res = play(tmp_path, {"library": lib, "bandwidth": True, "size_mb": 8, "root": str(root)},
               fakecuda.env(devices="0000:A1:00.0,0000:C1:00.0", h2d_gbs="0.25,0.125",
                            d2h_gbs="0.25,0.125"))
    assert res["failed"] is False and res["changed"] is False
    devs = res["devices"]
    assert [(d["pci_bus_id"], d["link_gbs"]) for d in devs] == [("0000:a1:00.0", 63.0),
                                                                ("0000:c1:00.0", 15.8)]
    assert 0.2 <= devs[0]["h2d_gbs"] <= 0.253 and 0.1 <= devs[1]["d2h_gbs"] <= 0.127


def test_host_init_999_fails_naming_code_and_name(tmp_path):
    res = play(tmp_path, {"library": fakecuda.build()}, fakecuda.env(init=999))
    assert res["failed"] is True
    assert "returned 999 CUDA_ERROR_UNKNOWN" in res["msg"]
    assert res["init"]["code"] == 999


def test_container_through_pct_gets_the_source_on_stdin(tmp_path):
    lib = fakecuda.build()
    root = str(tmp_path / "host")
    lxc.seed_host(root, era="after", config_era="after")
    state = os.path.join(root, "var/lib/gpuhost-doubles")
    os.makedirs(state)
    with open(os.path.join(state, "pct.json"), "w") as handle:
        json.dump({"containers": {"129": {"status": "stopped"}},
                   "cuda_env": {"LD_LIBRARY_PATH": os.path.dirname(lib)}}, handle)
    env = {"GPUHOST_DOUBLES_ROOT": root}
    subprocess.run([os.path.join(DOUBLES, "pct"), "start", "129"], check=True,
                   env=dict(os.environ, **env))
    res = play(tmp_path, {"vmid": 129}, env)
    assert res["failed"] is False, res
    assert res["vmid"] == 129 and res["devices"][0]["pci_bus_id"] == "0000:00:06.0"
