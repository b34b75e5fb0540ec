"""What the audit compiles on every host, on every run.

AnsiballZ sends a module's module_utils as source in a zip, and the zipimport of Python 3.11
(the hosts' Python on Proxmox VE 8) compiles each imported file twice: once to name its path
(``get_filename``) and once to run it. At 64 hosts that is most of what separates the audit's
module round trip from ``ansible -m ping``. So the read-only audit imports only the code that
reads and judges: what changes a host lives in the ``writers`` and ``parts`` packages (and
the boot-time program's two writers in ``onhost``), and the tune-only modules stay out
(docs/architecture.md, "What the audit imports").

Each module runs in a fresh interpreter on the seed host, so lazy imports count too.
"""

import json
import subprocess
import sys

import pytest

from conftest import LINKS, TESTS
from fixtures.hosts import seed_host

PKG = "ansible_collections.gpuhost.tuning.plugins.module_utils."

SCRIPT = r"""
import importlib, json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from modrun import run_module
module = importlib.import_module(
    "ansible_collections.gpuhost.tuning.plugins.modules." + sys.argv[3])
result = run_module(module, json.loads(sys.argv[4]), check_mode=True)
print(json.dumps({"failed": bool(result.get("failed")), "msg": result.get("msg"),
                  "modules": sorted(name for name in sys.modules
                                    if name.startswith("ansible_collections.gpuhost"))}))
"""

# What changes a host: the packages whole, and the write side the boot-time program needs
# (it lives in onhost, beside the readers it shares with the audit).
WRITERS = ("writers.", "parts.")
WRITE_FILES = ("subjects.pcie.setpci_maxreadreq", "subjects.cpu.cpuidle_state")
# Files of other packages that only a tune, a snapshot or the boot-time service need.
TUNE_ONLY = ("engines.tune.boot_program", "platform.run_lock", "engines.audit.host_capture", "subjects.cuda.cuda",  # noqa: E501
             "subjects.cuda.cuda_driver", "subjects.cuda.cuda_child")


def _imports(module, args):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, LINKS, TESTS, module,
         json.dumps(args)], capture_output=True, text=True, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["failed"], out["msg"]
    return [name[len(PKG):] for name in out["modules"] if name.startswith(PKG)]


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("seed"))
    seed_host(root)
    return root


def test_audit_imports_no_writer_and_no_tune_only_module(seed):
    used = _imports("host_audit", {"root": seed})
    assert "engines.audit.facts" in used and "subjects.pcie.pcie_mrrs_check" in used  # it did run the audit  # noqa: E501
    assert [name for name in used if name.startswith(WRITERS) or name in WRITE_FILES] == []
    assert [name for name in used if name in TUNE_ONLY] == []


def test_a_tune_does_import_the_writers(seed):
    """The same measurement sees a writer when one is imported (the test above can fail)."""
    used = _imports("host_tune", {"root": seed, "host": "seed"})
    assert "subjects.sysctl.sysctl_settings" in used and "platform.snapstore" in used
    assert "subjects.pcie.setpci_maxreadreq" in used and "subjects.cpu.cpuidle_state" in used
