"""Hostile batch sizes and outputs: a batch size Ansible would read as "every host at once"
stops the run before any host is touched; what the collection writes (metrics, report
files, timers, container configs) stays valid and its own whatever names, previous files
and links it meets."""

import os
import re
import shutil
import subprocess

import pytest
import yaml
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.modules import audit_report

# tests/conftest.py keeps the live checkout importable through LINKS (the hostile
# conftest.py shadows that module's name here)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINKS = os.path.join(REPO, "tests", "output", "pathlink")
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
FLEET = ["gpu1", "gpu2", "gpu3", "gpu4"]


# ---------------------------------------------------------------------------------------
# batch sizes: checked when Ansible templates the play's keywords, before any batch runs


def _fleet(base):
    """Four inventory hosts whose interpreter only leaves a mark and fails: any module task
    that reached a host shows as ``<host>.touched`` (and never runs on this machine)."""
    inventory = {"all": {"hosts": {}, "vars": {"ansible_connection": "local"}}}
    for name in FLEET:
        marker = os.path.join(base, name + ".touched")
        python = os.path.join(base, name + "-python")
        with open(python, "w") as handle:
            handle.write("#!/bin/sh\ntouch '%s'\nexit 1\n" % marker)
        os.chmod(python, 0o755)
        inventory["all"]["hosts"][name] = {
            "ansible_python_interpreter": python,
            "gpuhost_root": os.path.join(base, name)}
    path = os.path.join(base, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


def _play(base, playbook, *extra):
    env = dict(os.environ)
    env.update({"ANSIBLE_COLLECTIONS_PATH": LINKS,
                "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    argv = [PLAYBOOK, "-i", _fleet(base), playbook,
            "-e", "gpuhost_report_dir=%s" % os.path.join(base, "reports")]
    for item in extra:
        argv += ["-e", item]
    proc = subprocess.run(argv, cwd=base, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    return proc, re.sub(r"\s+", " ", proc.stdout + proc.stderr)


# one per class of bad value: zero, negative, empty list, a zero inside a list, a
# percentage over 100 or of 0, text, a dict, a bool, an empty string from -e
BAD_SERIAL = [
    ('{"gpuhost_serial": 0}', "gpuhost_serial: 0 is not a batch size"),
    ('{"gpuhost_serial": -2}', "gpuhost_serial: -2 is not"),
    ('{"gpuhost_serial": []}', "gpuhost_serial: [] is not"),
    ('{"gpuhost_serial": [0]}', "0 (position 1 of [0]) is not"),
    ('{"gpuhost_serial": [1, "25%", 0]}', "0 (position 3 of [1, '25%', 0]) is not"),
    ('{"gpuhost_serial": "150%"}', "'150%' is not"),
    ('{"gpuhost_serial": "0%"}', "'0%' is not"),
    ("gpuhost_serial=abc", "'abc' is not"),
    ("gpuhost_serial=", "'' is not"),
    ('{"gpuhost_serial": {"first": 1}}', "{'first': 1} is not"),
    ('{"gpuhost_serial": true}', "True is not"),
    ('{"gpuhost_max_fail_percentage": 150}', "gpuhost_max_fail_percentage: 150 is not a "
                                              "failure percentage"),
    ('{"gpuhost_max_fail_percentage": -1}', "-1 is not a failure percentage"),
    ("gpuhost_max_fail_percentage=abc", "'abc' is not a failure percentage"),
    ('{"gpuhost_max_fail_percentage": [0]}', "[0] is not a failure percentage"),
    ('{"gpuhost_max_fail_percentage": false}', "False is not a failure percentage"),
]


@pytest.mark.parametrize("extra,expect", BAD_SERIAL, ids=[b[0] for b in BAD_SERIAL])
def test_a_bad_batch_size_stops_reboot_verify_before_any_host(tmp_path, extra, expect):
    base = str(tmp_path)
    proc, out = _play(base, "gpuhost.tuning.reboot_verify", extra,
                      "gpuhost_reboot_verify_reboot=true")
    assert proc.returncode != 0, out[-3000:]
    assert expect in out, out[-3000:]
    forms = ("a positive integer" if "serial" in extra else "a number from 0 to 100")
    assert forms in out
    # no task started, no host reached, no report written
    assert "TASK [" not in out
    assert [n for n in FLEET if os.path.exists(os.path.join(base, n + ".touched"))] == []
    assert not os.path.exists(os.path.join(base, "reports"))


def _keywords():
    with open(os.path.join(REPO, "playbooks", "reboot_verify.yml")) as handle:
        play = yaml.safe_load(handle)[0]
    return play["serial"], play["max_fail_percentage"]


def _batches(base, *extra):
    """The batches (host lists, in order) a play with reboot_verify's own ``serial`` and
    ``max_fail_percentage`` keywords makes of the four hosts."""
    serial, max_fail = _keywords()
    path = os.path.join(base, "batches.yml")
    with open(path, "w") as handle:
        yaml.safe_dump([{"name": "batches", "hosts": "all", "gather_facts": False,
                         "serial": serial, "max_fail_percentage": max_fail,
                         "tasks": [{"name": "in this batch",
                                    "ansible.builtin.debug": {"msg": "here"}}]}], handle)
    proc, out = _play(base, path, *extra)
    assert proc.returncode == 0, out[-3000:]
    plays = (proc.stdout).split("PLAY [batches]")[1:]
    return [re.findall(r"^ok: \[(\w+)\]", chunk, re.M) for chunk in plays]


def test_good_batch_sizes_batch_as_given(tmp_path):
    base = str(tmp_path)
    assert _batches(base) == [["gpu1"], ["gpu2"], ["gpu3"], ["gpu4"]]
    # digits from -e key=value arrive as text: still a batch size
    assert _batches(base, "gpuhost_serial=2") == [["gpu1", "gpu2"], ["gpu3", "gpu4"]]
    assert _batches(base, '{"gpuhost_serial": [1, "50%"]}',
                    "gpuhost_max_fail_percentage=25") == [["gpu1"], ["gpu2", "gpu3"], ["gpu4"]]
    assert _batches(base, "gpuhost_serial=100%") == [FLEET]


# ---------------------------------------------------------------------------------------
# gpuhost.prom: whatever a host name or finding subject holds, the file parses


def _promtool():
    path = shutil.which("promtool")
    if path is None:
        subprocess.run([os.path.join(REPO, "scripts", "apt-ensure.sh"), "prometheus"],
                       check=True, timeout=900)
        path = shutil.which("promtool")
    assert path, "promtool is not installed (Debian package prometheus)"
    return path


def _finding(subject):
    return {"id": "audit_error", "severity": "low", "subject": subject, "current": "x",
            "expected": "y", "remedy": "z"}


# every kind of character a text format or a line-splitting reader chokes on
ODD = ["\r", "\r\n", "\n", "\x00", "\t", "\x0b", "\x0c", "\x1b[31m", "\x7f", "\x85",
       "\u2028", "\u2029", "\udcff", "\\", '"', "\\n", "}", "{a=\"b\"}", " 1\nfake 2"]


def test_odd_host_names_and_subjects_leave_gpuhost_prom_valid(tmp_path):
    dest = str(tmp_path / "reports")
    audits = dict(("gpu%02d%s" % (n, odd), {"findings": [_finding("dev%s0" % odd)],
                                             "checks": {}, "collected_at": "2026-12-01T03:47:48Z"})
                  for n, odd in enumerate(ODD))
    result = run_module(audit_report, {"audits": audits, "dest": dest})
    assert not result.get("failed"), result.get("msg")
    with open(os.path.join(dest, "gpuhost.prom"), "rb") as handle:
        data = handle.read()
    text = data.decode("utf-8")  # strict
    proc = subprocess.run([_promtool(), "check", "metrics"], input=data, capture_output=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # one sample per host and finding, whatever splits lines: no sample was forged or cut
    lines = text.splitlines()
    assert lines == text.split("\n")[:-1]
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert len([s for s in samples if s.startswith("gpuhost_finding{")]) == len(ODD)
    assert len([s for s in samples if s.startswith("gpuhost_audit_timestamp_seconds{")]) \
        == len(ODD)
    assert all(re.match(r'^gpuhost_\w+\{host="', s) for s in samples), samples
    assert not any(s.startswith("fake") for s in samples)
