"""facts: the wanted values the audit judges against (``wanted_spec``, completed by
``merged_wanted``) and ``collect``, every fact of the audit schema read once from a root, a
failing reader an entry in ``errors`` and not a crash, a refused file (a FIFO) named there
too. Whole-host judgements: test_audit.py; the golden reports: tests/unit/test_golden.py."""

import os

import pytest

from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec
from ansible_collections.gpuhost.tuning.plugins.modules import host_audit, host_tune
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu import audit_cpu
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.host import sysinfo
from fixtures import hosts


def test_wanted_spec_is_what_role_audit_passes():
    spec = facts.wanted_spec()
    assert sorted(set(hosts.common_wanted()) - set(spec)) == []
    assert spec["nvidia_uvm_modprobe_file"]["default"] == sysinfo.UVM_MODPROBE_FILE
    assert spec["mrrs_size"]["choices"] == [128, 256, 512, 1024, 2048, 4096]


def test_merged_wanted_fills_defaults_and_refuses_bad_values():
    out = facts.merged_wanted({"mrrs_size": None, "sysctl": {"vm.swappiness": "10"}})
    assert out["mrrs_size"] == 4096 and out["sysctl"] == {"vm.swappiness": "10"}
    assert out["lxc_config_dir"] == "/etc/pve/lxc"
    with pytest.raises(ValueError, match="mrrs_size"):
        facts.merged_wanted({"mrrs_size": 3000})


@pytest.fixture(scope="module")
def seed_facts(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("seed"))
    hosts.seed_host(root)
    return root, facts.collect(root, hosts.common_wanted())


def test_collect_on_the_seed_host(seed_facts):
    _root, got = seed_facts
    assert got["errors"] == []
    assert got["kernel"]["running"] == hosts.SEED_RUNNING
    assert len(got["gpus"]) == 8
    assert got["nvidia"]["driver_version"] == hosts.SEED_NVIDIA


def test_an_empty_root_gives_facts_not_errors(tmp_path):
    got = facts.collect(str(tmp_path))
    assert got["gpus"] == [] and got["kernel"]["running"] is None


def test_a_failing_reader_is_an_error_entry_naming_its_section(tmp_path, monkeypatch):
    root = str(tmp_path)
    hosts.vm_host(root)

    def broken(*args, **kwargs):
        raise RuntimeError("reader bug")

    monkeypatch.setattr(audit_cpu, "cpu_facts", broken)
    got = facts.collect(root)
    assert {"section": "cpu", "error": "RuntimeError: reader bug"} in got["errors"]
    assert got["gpus"]  # the other readers still ran


def test_a_fifo_where_a_file_should_be_is_named_in_errors(tmp_path):
    root = str(tmp_path)
    hosts.vm_host(root)
    path = os.path.join(root, "proc/cmdline")
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)
    got = facts.collect(root)  # returns: a FIFO is never opened
    assert any("cmdline" in e["error"] for e in got["errors"]), got["errors"]


@pytest.mark.parametrize("name", ["host_audit", "host_tune"])
def test_one_module_call_fills_and_checks_wanted_once(tmp_path, monkeypatch, name):
    """The wanted values are completed and checked once per module call: the module's
    rules, its run, the audits (tune's before and after) and the fact reading take the
    first result (before: 4 fills per host_audit call and 4-8 per host_tune call)."""
    modules = {"host_audit": host_audit, "host_tune": host_tune}
    hosts.seed_host(str(tmp_path))
    fills = []
    real = argspec.fill

    def counting(spec, params, internal=()):
        if set(spec) == set(facts.WANTED_KEYS):
            fills.append(1)
        return real(spec, params, internal)

    monkeypatch.setattr(argspec, "fill", counting)
    result = run_module(modules[name], hosts.as_wanted({"root": str(tmp_path), "host": "h"}),
                        check_mode=True)
    assert not result.get("failed"), result.get("msg")
    assert len(fills) == 1


def test_each_call_checks_the_values_it_is_given(tmp_path):
    # no memo between calls: a module checks them once in its rules and its run takes them
    # from check_module (test_validate), so a second call is a second check
    first = facts.wanted_values({"root": str(tmp_path), "wanted": {"mrrs_size": 512}})
    other = facts.wanted_values({"root": str(tmp_path), "wanted": {"mrrs_size": 1024}})
    assert first["mrrs_size"] == 512 and other["mrrs_size"] == 1024
    with pytest.raises(ValueError, match="bandwidth_min_pct"):
        facts.wanted_values({"root": str(tmp_path), "wanted": {"bandwidth_min_pct": 0}})
