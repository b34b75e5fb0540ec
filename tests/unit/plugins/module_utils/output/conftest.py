"""What the output files' mirror tests share: the seed, tuned and VM fixture hosts
(tests/fixtures/hosts.py) audited once per module, as the report renders them."""

import pytest
from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.checks import run as audit

WANTED = hosts.common_wanted()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    audits = {}
    for name, build in (("pve-gpu01", hosts.seed_host), ("pve-gpu02", hosts.tuned_host),
                        ("h200-vm", hosts.vm_host)):
        root = tmp_path_factory.mktemp(name)
        build(root)
        audits[name] = audit.audit(str(root), dict(WANTED, host=name))
    return audits
