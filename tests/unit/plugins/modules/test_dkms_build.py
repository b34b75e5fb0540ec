"""dkms_build main() against the seed tree with a dkms test double (tests/fixtures/dkms.py)."""

import os
import subprocess

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import (
    dkms_build as dkms_write,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner
from ansible_collections.gpuhost.tuning.plugins.modules import dkms_build
from fixtures import dkms as fx
from modrun import run_module

NEW = fx.SEED_NEW
RUNNING = fx.SEED_RUNNING


@pytest.fixture
def host(tmp_path):
    root = tmp_path / "host"
    fx.seed(root)
    return root


def _run(root, fake, check_mode=False, **args):
    params = {"name": "nvidia", "root": str(root), "executable": fake.path}
    params.update(args)
    return run_module(dkms_build, params, check_mode=check_mode)


def _install_headers(root, release):
    fx.kernel_tree(root, release, headers=True)


@pytest.mark.parametrize("dkms_version,rc", [("3.0.10", 1), ("3.1.5", 21)])
def test_missing_headers_fail_naming_package_and_nothing_runs(host, tmp_path, snapshot_tree,
                                                              dkms_version, rc):
    fake = fx.fake_dkms(tmp_path / "bin", host, version=dkms_version)
    before = snapshot_tree(str(host))
    result = _run(host, fake, kernel=NEW)
    assert result["failed"]
    assert result["msg"].startswith(
        "headers for kernel 6.14.11-5-bpo12-pve not found at "
        "/lib/modules/6.14.11-5-bpo12-pve/build")
    assert "install proxmox-headers-6.14.11-5-bpo12-pve" in result["msg"]
    assert "dangling link to /usr/src/linux-headers-6.14.11-5-bpo12-pve" in result["msg"]
    assert fake.commands() == ["status", "status"]  # no build, no install
    assert snapshot_tree(str(host)) == before


@pytest.mark.parametrize("dkms_version,rc", [("3.0.10", 1), ("3.1.5", 21)])
def test_dkms_missing_headers_exit_is_reported_even_past_our_check(host, tmp_path, monkeypatch,
                                                                   dkms_version, rc):
    # headers vanish between our check and dkms' own: dkms exits 1 (<= 3.1.4) or 21
    # (>= 3.1.5); the failure still names the package, and install never runs
    fake = fx.fake_dkms(tmp_path / "bin", host, version=dkms_version)
    monkeypatch.setattr(dkms_write, "headers_error", lambda root, kernel: None)
    runner = Runner(processes=subprocess)
    with pytest.raises(dkms.DkmsError) as err:
        dkms_write.ensure(runner, str(host), "nvidia", kernel=NEW, dkms=fake.path)
    assert "install proxmox-headers-6.14.11-5-bpo12-pve" in str(err.value)
    assert "cannot be found" in str(err.value)
    assert err.value.details["outputs"][0]["rc"] == rc
    assert fake.commands() == ["status", "status", "build", "status"]


def test_default_kernel_is_newest_and_version_the_only_one(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host)
    result = _run(host, fake)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert (result["kernel"], result["version"]) == (NEW, "590.48.01")
    assert result["state_before"] == "added" and result["state_after"] == "installed"
    assert result["commands"] == [
        [fake.path, "build", "-m", "nvidia", "-v", "590.48.01", "-k", NEW],
        [fake.path, "install", "-m", "nvidia", "-v", "590.48.01", "-k", NEW]]
    assert fake.commands() == ["status", "status", "build", "status", "install", "status"]
    assert sorted(os.path.basename(m) for m in result["modules"]) == sorted(
        m + ".ko" for m in fx.NVIDIA_MODULES)
    for module in result["modules"]:
        assert os.path.isfile(os.path.join(str(host), module.lstrip("/")))
    assert result["status_after"][0]["state"] == "installed"
    assert result["status_before"][0]["state"] == "added"


def test_second_run_changes_nothing(host, tmp_path, snapshot_tree):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host)
    assert _run(host, fake, kernel=NEW)["changed"] is True
    before = snapshot_tree(str(host))
    again = _run(host, fake, kernel=NEW)
    assert again["changed"] is False and again["commands"] == []
    assert len(again["modules"]) == 5
    assert snapshot_tree(str(host)) == before
    assert fake.commands()[-2:] == ["status", "status"]


def test_running_kernel_already_installed_is_unchanged_even_without_build_needed(
        host, tmp_path):
    fake = fx.fake_dkms(tmp_path / "bin", host)
    result = _run(host, fake, kernel=RUNNING)
    assert result["changed"] is False and result["state_before"] == "installed"
    assert fake.commands() == ["status", "status"]


def test_check_mode_runs_only_status_and_reports_commands(host, tmp_path, snapshot_tree):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host)
    before = snapshot_tree(str(host))
    result = _run(host, fake, check_mode=True, kernel=NEW)
    assert result["changed"] is True
    assert [c[1] for c in result["commands"]] == ["build", "install"]
    assert set(fake.commands()) == {"status"}
    assert snapshot_tree(str(host)) == before


def test_check_mode_with_missing_headers_fails_too(host, tmp_path):
    fake = fx.fake_dkms(tmp_path / "bin", host)
    result = _run(host, fake, check_mode=True, kernel=NEW)
    assert result["failed"] and "proxmox-headers-6.14.11-5-bpo12-pve" in result["msg"]


def test_state_built_only_builds(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host)
    result = _run(host, fake, kernel=NEW, state="built")
    assert result["changed"] and result["state_after"] == "built"
    assert [c[1] for c in result["commands"]] == ["build"]
    assert not os.path.exists(host / "lib/modules" / NEW / "updates")


def test_built_then_installed_runs_only_install(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host)
    _run(host, fake, kernel=NEW, state="built")
    result = _run(host, fake, kernel=NEW)
    assert [c[1] for c in result["commands"]] == ["install"]
    assert result["state_before"] == "built" and result["state_after"] == "installed"


def test_exit_zero_but_not_installed_is_a_failure(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host, misbehave="install_noop")
    result = _run(host, fake, kernel=NEW)
    assert result["failed"]
    assert "exited 0 but dkms status for nvidia/590.48.01 on 6.14.11-5-bpo12-pve says built" in (
        result["msg"])


def test_status_installed_but_ko_missing_is_a_failure(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host, misbehave="skip_ko_copy")
    result = _run(host, fake, kernel=NEW)
    assert result["failed"]
    assert "missing under /lib/modules/6.14.11-5-bpo12-pve" in result["msg"]
    assert "nvidia-uvm" in result["msg"]


def test_build_failure_reports_dkms_output(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host, misbehave="build_fails")
    result = _run(host, fake, kernel=NEW)
    assert result["failed"]
    assert "build" in result["msg"] and "exited 10" in result["msg"]
    assert "make.log" in result["msg"]
    assert fake.commands() == ["status", "status", "build", "status"]  # no install after


def test_old_status_format_dkms_2_8(host, tmp_path):
    _install_headers(host, NEW)
    fake = fx.fake_dkms(tmp_path / "bin", host, version="2.8.4")
    result = _run(host, fake, kernel=NEW)
    assert not result.get("failed"), result.get("msg")
    assert result["state_after"] == "installed"
    assert _run(host, fake, kernel=NEW)["changed"] is False


def test_unknown_module_fails_clearly(host, tmp_path):
    fake = fx.fake_dkms(tmp_path / "bin", host)
    result = _run(host, fake, name="nvidia-current", kernel=RUNNING)
    assert result["failed"] and "dkms does not know module nvidia-current" in result["msg"]


def test_newest_of_several_versions(host, tmp_path):
    fx.dkms_tree(host, "nvidia", "580.159.04", built=[RUNNING])
    fake = fx.fake_dkms(tmp_path / "bin", host)
    result = _run(host, fake, kernel=RUNNING)
    assert result["version"] == "590.48.01" and result["changed"] is False


def test_other_root_without_executable_fails(host):
    result = run_module(dkms_build, {"name": "nvidia", "root": str(host)})
    assert result["failed"] and result["msg"].startswith("dkms_build needs root=/")


def test_status_warning_is_passed_on(host, tmp_path):
    fake = fx.fake_dkms(tmp_path / "bin", host,
                        warning_suffix=" (WARNING! Diff between built and installed module!)")
    result = _run(host, fake, kernel=RUNNING)
    assert result["changed"] is False
    assert result["status_after"][0]["warning"] == (
        "WARNING! Diff between built and installed module!")
    assert "Diff between built and installed" in str(result["warnings"])
