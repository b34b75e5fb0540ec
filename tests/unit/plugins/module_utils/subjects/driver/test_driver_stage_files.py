"""driver_stage_files' readers of apt-cache, df and the .run header (formats: apt-cache
madison and show as apt 2.6 prints them, df -P as POSIX and coreutils print it, the
makeself header fields of NVIDIA's NVIDIA-Linux-x86_64-<version>.run)."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import (
    driver_stage_files,
)

MADISON = (" nvidia-kernel-dkms | 590.48.01-1~deb12u1 | http://deb.debian.org/debian "
           "bookworm-backports/non-free amd64 Packages\n"
           " nvidia-kernel-dkms | 580.95.05-1 | http://deb.debian.org/debian bookworm/"
           "non-free amd64 Packages\n"
           "   libcuda1 | 580.95.05-1 | http://deb.debian.org/debian bookworm/non-free amd64 "
           "Packages\n")


def test_madison_candidates_by_driver_version():
    found = driver_stage_files.parse_madison(MADISON)
    assert found == {"nvidia-kernel-dkms": ["590.48.01-1~deb12u1", "580.95.05-1"],
                     "libcuda1": ["580.95.05-1"]}
    chosen, missing = driver_stage_files.pick_versions(found, ["nvidia-kernel-dkms", "libcuda1"], "590.48.01")  # noqa: E501
    assert chosen == {"nvidia-kernel-dkms": "590.48.01-1~deb12u1"}
    assert missing == ["libcuda1 590.48.01 (apt knows 580.95.05)"]
    # a version that is a prefix of another is not it
    assert driver_stage_files.pick_versions({"x": ["590.48.011-1"]}, ["x"], "590.48.01")[0] == {}


def test_sizes_and_free_space():
    show = ("Package: libcuda1\nVersion: 590.48.01-1\nInstalled-Size: 70000\nSize: 2048\n\n"
            "Package: nvidia-smi\nInstalled-Size: 1000\nSize: 1\n\n")
    assert driver_stage_files.parse_show_sizes(show) == 70000 + 2 + 1000 + 1
    df = ("Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
          "rpool/data/subvol-129-disk-0  67108864 1048576  66060288       2% /\n")
    assert driver_stage_files.parse_df_free(df) == 66060288
    assert driver_stage_files.parse_df_free("df: /: No such file or directory\n") is None


def _write(tmp_path, text):
    path = tmp_path / "root" / "x.run"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1"))
    return str(tmp_path / "root"), "/x.run"


HEADER = ('#!/bin/sh\n# This script was generated using Makeself 2.1.5\nCRCsum="1"\n'
          'label="NVIDIA Accelerated Graphics Driver for Linux-x86_64 590.48.01"\n'
          'script="./nvidia-installer"\n')


def test_run_header(tmp_path):
    root, path = _write(tmp_path, HEADER + "\x00\xff" * 100)
    info = driver_stage_files.run_header(root, path, "590.48.01")
    assert info["arch"] == "x86_64" and info["version"] == "590.48.01"
    with pytest.raises(driver_stage_files.StageError, match="installs NVIDIA 590.48.01, not the target "  # noqa: E501
                                            "580.95.05"):
        driver_stage_files.run_header(root, path, "580.95.05")
    root, path = _write(tmp_path, "#!/bin/sh\necho hello\n")
    with pytest.raises(driver_stage_files.StageError, match="not an NVIDIA .run installer: no makeself"):  # noqa: E501
        driver_stage_files.run_header(root, path, "590.48.01")
    root, path = _write(tmp_path, "#!/bin/sh\n# Makeself 2.4\nlabel=\"Some tool\"\n")
    with pytest.raises(driver_stage_files.StageError, match="makeself archive but not NVIDIA's driver"):  # noqa: E501
        driver_stage_files.run_header(root, path, "590.48.01")


def test_container_deb_files_from_dpkg_query():
    # dpkg-query -W -f QUERY_FORMAT as dpkg 1.21 prints it; a package of another version or
    # not installed (no line) is not the previous one's file; a status stanza without
    # Installed-Size prints an empty field (the last line)
    assert driver_stage_files.QUERY_FORMAT == "${Package} ${Version} ${Architecture} ${Installed-Size}\n"  # noqa: E501
    out = ("libcuda1 580.95.05-1 amd64 48213\nnvidia-smi 580.95.05-1 amd64 1650\n"
           "nvidia-kernel-common 1:580.95.05-1 all 214\nlibnvidia-ml1 590.48.01-1 amd64 2210\n"
           "nvidia-persistenced 580.95.05-1 amd64 \n")
    wanted = {"libcuda1": "580.95.05-1", "nvidia-smi": "580.95.05-1",
              "nvidia-kernel-common": "1:580.95.05-1", "libnvidia-ml1": "580.95.05-1",
              "nvidia-persistenced": "580.95.05-1"}
    mib = 1024 * 1024
    assert driver_stage_files.parse_query_files(out, wanted) == {
        "libcuda1_580.95.05-1_amd64.deb": 2 * 48213 * 1024 + mib,
        "nvidia-kernel-common_1%3a580.95.05-1_all.deb": 2 * 214 * 1024 + mib,
        "nvidia-smi_580.95.05-1_amd64.deb": 2 * 1650 * 1024 + mib,
        "nvidia-persistenced_580.95.05-1_amd64.deb": 512 * mib}
    assert driver_stage_files.kept_ct_debs(129) == "/var/lib/gpuhost-tuning/driver/containers/129/debs"  # noqa: E501


def test_a_deb_is_capped_at_twice_its_installed_size_and_a_mib():
    # Debian 12 non-free's Packages (2026-12-02), its 216 NVIDIA packages: no .deb over its
    # Installed-Size (at most 0.9995 of it), so none over half its cap. The closest:
    # nvidia-kernel-source 535.261.03-1, Installed-Size 43976, Size 45004248 (a tarball in
    # it); libcuda1 535.261.03-1, Installed-Size 28906, Size 3002088
    assert driver_stage_files.deb_cap(43976) == 91111424 and 45004248 < driver_stage_files.deb_cap(43976) // 2  # noqa: E501
    assert 3002088 < driver_stage_files.deb_cap(28906)
    assert driver_stage_files.deb_cap(0) == 1024 * 1024          # a meta package: its .deb is a few KiB  # noqa: E501
    assert driver_stage_files.deb_cap(None) == driver_stage_files.DEB_CAP_UNKNOWN == driver_stage_files.DEB_CAP_CEILING == 512 << 20  # noqa: E501


def test_the_cap_comes_from_the_host_never_from_the_tenant_alone(tmp_path, monkeypatch):
    # a tenant's dpkg status claiming 1 TiB of KiB (2 PiB): the fixed ceiling; 5,000 digits or
    # Arabic-Indic digits: no figure (the ceiling too), never a crash
    out = ("libcuda1 580.95.05-1 amd64 1099511627776\nnvidia-smi 580.95.05-1 amd64 %s\n"
           "libnvidia-ml1 580.95.05-1 amd64 \u0663\u0663\n" % ("9" * 5000))
    wanted = {"libcuda1": "580.95.05-1", "nvidia-smi": "580.95.05-1",
              "libnvidia-ml1": "580.95.05-1"}
    assert set(driver_stage_files.parse_query_files(out, wanted).values()) == {driver_stage_files.DEB_CAP_CEILING}  # noqa: E501
    # and never more than the keep folder's free space less the margin (statvfs, the host's)
    monkeypatch.setattr(driver_stage_files, "free_bytes", lambda folder: driver_stage_files.HOST_FREE_MARGIN + 5 * 1024 * 1024)  # noqa: E501
    assert driver_stage_files.pull_cap(str(tmp_path), driver_stage_files.DEB_CAP_CEILING) == 5 * 1024 * 1024  # noqa: E501
    monkeypatch.setattr(driver_stage_files, "free_bytes", lambda folder: 10)
    assert driver_stage_files.pull_cap(str(tmp_path), driver_stage_files.DEB_CAP_CEILING) == 0
    monkeypatch.undo()
    st = os.statvfs(str(tmp_path))
    assert driver_stage_files.free_bytes(str(tmp_path)) == st.f_bavail * st.f_frsize


def test_sizes_of_a_tenant_apt_are_read_bounded():
    show = "Installed-Size: %s\nSize: 12\nInstalled-Size: 100\n" % ("1" * 5000)
    assert driver_stage_files.parse_show_sizes(show) == 1 + 100
    assert driver_stage_files.parse_df_free("h\nfs 1 2 %s 1%% /\n" % ("7" * 5000)) is None


def test_a_pulled_file_is_kept_only_when_it_is_a_deb(tmp_path):
    part, dest = str(tmp_path / ".x.deb.part"), str(tmp_path / "x.deb")
    (tmp_path / ".x.deb.part").write_bytes(b"!<arch>\ndebian-binary   ")
    assert driver_stage_files.keep_part(part, dest) is True
    assert open(dest, "rb").read(8) == b"!<arch>\n" and not (tmp_path / ".x.deb.part").exists()
    # an error page, or a pull that failed part way: removed, nothing at dest
    (tmp_path / ".y.deb.part").write_bytes(b"<html>404</html>")
    assert driver_stage_files.keep_part(str(tmp_path / ".y.deb.part"), str(tmp_path / "y.deb")) is False  # noqa: E501
    (tmp_path / ".z.deb.part").write_bytes(b"!<arch>\n")
    assert driver_stage_files.keep_part(str(tmp_path / ".z.deb.part"), str(tmp_path / "z.deb"),
                                        ok=False) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.deb"]


def test_apt_pins_in_name_order_and_one_install_line_for_host_and_containers():
    assert driver_stage_files.pinned({"nvidia-smi": "590.48.01-1", "libcuda1": "1:590.48.01-1",
                                      "libnvidia-ml1": None}) == ["libcuda1=1:590.48.01-1",
                                                                  "nvidia-smi=590.48.01-1"]
    assert driver_stage_files.APT_INSTALL[:3] == ["install", "-y", "--allow-downgrades"]
