"""What the module_utils mirror tests share: the fixture hosts of tests/fixtures/hosts.py
(real-format trees, each builder names where its formats came from) audited once per
session or module (``audited``, ``fleet``), one check run alone (``run_check``), and for
hostfs a small tree with a file outside it and a 10 s alarm (``host_tree``,
``never_hang``)."""

import copy
import importlib
import signal

import pytest
from auditcase import WANTED, judge
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit


@pytest.fixture(scope="session")
def audited(tmp_path_factory):
    """``audited(builder)``: a deep copy of ``audit.audit`` (facts, findings, checks) of
    the host ``hosts.<builder>`` builds (or ``fixtures.<module>.<builder>`` for a dotted
    name), each host built and audited once per session."""
    cache = {}

    def get(name):
        if name not in cache:
            module, _dot, func = name.rpartition(".")
            builder = getattr(importlib.import_module("fixtures." + module) if module
                              else hosts, func)
            root = tmp_path_factory.mktemp(name.replace(".", "-"))
            builder(str(root))
            cache[name] = audit.audit(str(root), WANTED)
        return copy.deepcopy(cache[name])
    return get


@pytest.fixture(scope="session")
def run_check():
    return judge


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    audits = {}
    for name, build in (("pve-gpu01", hosts.seed_host), ("pve-gpu02", hosts.tuned_host),
                        ("h200-vm", hosts.vm_host)):
        root = tmp_path_factory.mktemp(name)
        build(root)
        audits[name] = audit.audit(str(root), dict(hosts.common_wanted(), host=name))
    return audits


@pytest.fixture
def never_hang():
    def boom(_sig, _frame):
        raise AssertionError("blocked: the call did not return in 10 s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def host_tree(tmp_path):
    """``(root, outside)``: ``<tmp>/host`` with proc/cmdline and etc/, and ``<tmp>/outside``
    holding ``secret`` ("outside text")."""
    root = tmp_path / "host"
    (root / "proc").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=ZFS=rpool\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("outside text\n")
    return str(root), str(outside)
