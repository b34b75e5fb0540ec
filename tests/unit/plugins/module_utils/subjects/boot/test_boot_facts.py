"""subjects/boot/boot_facts.py: the audit's kernel facts on the seed host of
tests/fixtures/hosts.py, and the one next-boot rule the driver gate shares
(driver_state.next_kernel)."""

from fixtures import hosts

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_facts
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_state


def test_kernel_facts_of_the_seed_host(tmp_path):
    hosts.seed_host(tmp_path)
    kern = boot_facts.kernel_facts(str(tmp_path))
    assert kern["running"] and kern["running"] in kern["installed"]
    assert kern["next_boot"] in kern["installed"] and kern["next_boot_source"]
    assert set(kern["headers"]) >= set([kern["running"]])
    assert driver_state.next_kernel(str(tmp_path)) == kern["next_boot"]


def test_an_empty_root_has_no_kernel_and_no_crash(tmp_path):
    kern = boot_facts.kernel_facts(str(tmp_path))
    assert kern["installed"] == [] and kern["next_boot"] is None
