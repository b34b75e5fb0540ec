"""driver_records: what records an NVIDIA driver install leaves, read offline under a root:
the version rule, Debian package versions, dpkg's status (bounded), nvidia-installer's
backup log and the libraries as the loader finds them (ld.so.conf includes followed, links
resolved inside the root). Trees from tests/fixtures/driver.py, whose docstring names the
sources of each format."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_records
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from fixtures import driver as drv


@pytest.mark.parametrize("value", ["590.48.01", "580.95", "470.256.02"])
def test_check_version_accepts_driver_versions(value):
    assert driver_records.check_version("version", value) == value


@pytest.mark.parametrize("value", ["590", "590.48.01-1", "latest", "590.48.1", None, 590.48])
def test_check_version_refuses_naming_the_option(value):
    with pytest.raises(driver_records.DriverStateError, match="^target_version: .* is not an NVIDIA"):  # noqa: E501
        driver_records.check_version("target_version", value)


@pytest.mark.parametrize("given,want", [("590.48.01-1~deb12u1", "590.48.01"),
                                        ("1:580.95.05-1", "580.95.05"),
                                        ("590.48.01", "590.48.01"),
                                        ("5.2.15-2+b7", None), ("", None), (None, None)])
def test_upstream_version(given, want):
    assert driver_records.upstream_version(given) == want


def test_so_version():
    assert driver_records.so_version("libcuda.so.590.48.01") == "590.48.01"
    assert driver_records.so_version("libcuda.so.1") is None and driver_records.so_version(None) is None  # noqa: E501


def test_dpkg_packages_lists_installed_ones_with_their_source(tmp_path):
    root = str(tmp_path)
    drv.dpkg_status(root, [
        drv.stanza("nvidia-driver", "590.48.01-1", drv.NVIDIA_MAINTAINER,
                   "nvidia-graphics-drivers (590.48.01-1)"),
        drv.stanza("nvidia-smi", "580.95.05-1", drv.NVIDIA_MAINTAINER,
                   status="deinstall ok config-files")])
    found = driver_records.dpkg_packages(root)
    by = dict((p["name"], p) for p in found)
    assert by["nvidia-driver"]["source"] == "nvidia-graphics-drivers"
    assert by["nvidia-driver"]["version"] == "590.48.01-1"
    assert "nvidia-smi" not in by and "bash" in by
    assert driver_records.dpkg_packages(str(tmp_path / "none")) is None


def test_a_dpkg_status_over_the_cap_is_an_error_not_a_partial_list(tmp_path, monkeypatch):
    root = str(tmp_path)
    drv.dpkg_status(root, [])
    monkeypatch.setattr(hostfs, "OUTPUT_LIMIT", 32)
    with pytest.raises(OSError):
        driver_records.dpkg_packages(root)


def test_run_record_reads_the_installers_backup_log(tmp_path):
    root = str(tmp_path)
    drv.run_log(root, "590.48.01", kernel_modules=["6.8.12-9-pve"])
    rec = driver_records.run_record(root)
    assert rec["version"] == "590.48.01" and rec["kernel_modules"] is True
    assert rec["path"] == driver_records.RUN_LOG and rec["description"].startswith("NVIDIA")
    assert driver_records.run_record(str(tmp_path / "none")) is None


def test_run_record_without_kernel_modules(tmp_path):
    root = str(tmp_path)
    drv.run_log(root, "580.95.05")
    assert driver_records.run_record(root)["kernel_modules"] is False


def test_libraries_through_debian_alternatives_resolved_inside_the_root(tmp_path):
    root = str(tmp_path)
    drv.debian_libs(root, "590.48.01")
    libs = driver_records.libraries(root)
    version, path, final = libs["libcuda.so.1"]
    assert version == "590.48.01" and path.endswith("/libcuda.so.1")
    assert final.startswith("/") and not final.startswith(root)
    assert final.endswith("nvidia/current/libcuda.so.590.48.01")


def test_loader_dirs_follow_ld_so_conf_includes_first_and_stop_at_loops(tmp_path):
    root = str(tmp_path)
    conf = os.path.join(root, "etc")
    os.makedirs(os.path.join(conf, "ld.so.conf.d"))
    with open(os.path.join(conf, "ld.so.conf"), "w") as handle:
        handle.write("include /etc/ld.so.conf.d/*.conf\n")
    with open(os.path.join(conf, "ld.so.conf.d", "cuda.conf"), "w") as handle:
        handle.write("# CUDA\n/usr/local/cuda/lib64/\ninclude /etc/ld.so.conf\n")
    dirs = driver_records.loader_dirs(root)
    assert dirs[0] == "/usr/local/cuda/lib64"
    assert dirs[1:] == list(driver_records.LOADER_DIRS) + list(driver_records.PRIVATE_DIRS)


def test_loader_dirs_list_each_folder_once_and_refuse_over_their_caps(tmp_path):
    root = str(tmp_path)
    conf = os.path.join(root, "etc/ld.so.conf")
    os.makedirs(os.path.dirname(conf))
    with open(conf, "w") as handle:
        handle.write("/opt/a\n/opt/a/\n/usr/lib/x86_64-linux-gnu\n" * 100)
    dirs = driver_records.loader_dirs(root)
    assert dirs[:2] == ["/opt/a", "/usr/lib/x86_64-linux-gnu"] and len(dirs) == len(set(dirs))
    with open(conf, "w") as handle:
        handle.write("".join("/opt/%d\n" % i for i in range(driver_records.LD_SO_CONF_DIRS + 1)))
    with pytest.raises(hostfs.HostFileError, match="etc/ld.so.conf: more than 256 folders"):
        driver_records.loader_dirs(root)
    with open(conf, "w") as handle:
        handle.write("#" * (driver_records.LD_SO_CONF_BYTES + 1))
    with pytest.raises(hostfs.HostFileError, match="etc/ld.so.conf: over 64 KiB"):
        driver_records.loader_dirs(root)


def test_nvidia_libraries_follow_soname_links_and_lone_versioned_files(tmp_path):
    root = str(tmp_path)
    lib = drv.libs(root, drv.NEW)
    with open(os.path.join(lib, "libnvidia-gpucomp.so.%s" % drv.NEW), "wb") as handle:
        handle.write(b"\x7fELF stand-in")
    for stale in ("libcuda.so.%s" % drv.OLD, "libnvidia-tls.so.%s" % drv.OLD,
                  "libnvidia-tls.so.%s" % drv.NEW, "libnvidia-egl-wayland.so.1.1.13"):
        with open(os.path.join(lib, stale), "wb") as handle:
            handle.write(b"\x7fELF stand-in")
    found = dict((x["name"], x["version"]) for x in driver_records.nvidia_libraries(root))
    assert found == {"libcuda.so.1": drv.NEW, "libnvidia-ml.so.1": drv.NEW,
                     "libnvidia-gpucomp.so.%s" % drv.NEW: drv.NEW}


def test_driver_packages_leave_out_their_own_version_streams():
    packages = [{"name": n, "version": v} for n, v in (
        ("libcuda1", "590.48.01-1"), ("nvidia-settings", "535.171.04-1"),
        ("cuda-compat-13-0", "580.95.05-1"), ("libnvidia-egl-wayland1", "1:1.1.13-1"),
        ("nvidia-utils-580", "580.95.05-0ubuntu1"))]
    assert [(p["name"], p["upstream"]) for p in driver_records.driver_packages(packages)] == [
        ("libcuda1", "590.48.01"), ("nvidia-utils-580", "580.95.05")]
