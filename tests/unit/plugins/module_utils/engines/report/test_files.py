"""engines/report/files.py: report file names from host names (moved from test_report.py), the
writes (only what differs, check mode writes nothing) and the bounded read of a previous
report, in a tmp folder."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import (
    files as files_mod,
)


@pytest.mark.parametrize("names", [
    ("a/b", "a_b", "a\\b", "a\x00b", "a\nb"), (".x", "x", "..x"), ("", "_", "."),
    ("h" * 300, "h" * 301), ("gpu\udcff", "gpu\udcfe")])
def test_host_names_that_had_to_change_never_share_a_file(names):
    files = [files_mod.safe_name(n) for n in names]
    assert len(set(files)) == len(names), files
    for name in files:
        assert "/" not in name and not name.startswith(".") and len(name.encode(
            "utf-8", "backslashreplace")) <= 211


def test_a_safe_name_is_itself_and_another_gets_a_hash():
    assert files_mod.safe_name("pve-gpu01.lab_2") == "pve-gpu01.lab_2"
    assert files_mod.safe_name("../evil/host").startswith("_evil_host-")


def test_two_hosts_that_would_share_a_file_are_refused():
    files_mod.check_file_names(["gpu01", "gpu02"])
    taken = files_mod.safe_name("a/b")
    with pytest.raises(files_mod.ReportError, match="would both write the report"):
        files_mod.check_file_names(["a/b", taken])


def test_write_files_writes_only_what_differs_and_check_mode_nothing(tmp_path):
    dest = str(tmp_path / "reports")
    files = {"a.json": "{}\n", "summary.md": "# x\n"}
    paths, written = files_mod.write_files(dest, files, check_mode=True)
    assert written == paths and not os.path.exists(dest)
    paths, written = files_mod.write_files(dest, files)
    assert sorted(os.listdir(dest)) == ["a.json", "summary.md"] and written == paths
    assert files_mod.write_files(dest, files)[1] == []
    changed = files_mod.write_files(dest, dict(files, **{"a.json": "{\"x\": 1}\n"}))[1]
    assert changed == [os.path.join(dest, "a.json")]
    os.mkfifo(os.path.join(dest, "fifo.json"))  # never opened for reading blocking
    assert files_mod.write_files(dest, {"fifo.json": "{}\n"})[1] == [
        os.path.join(dest, "fifo.json")]


def test_write_reports_names_the_folder_and_the_setting(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(files_mod.ReportError) as err:
        files_mod.write_reports("audit_report", str(tmp_path / "a-file"), {"x": "y"}, False,
                                "gpuhost_report_dir")
    assert str(err.value).startswith("audit_report: cannot write reports in %s: " % (
        tmp_path / "a-file"))
    assert str(err.value).endswith("(pick a writable folder with gpuhost_report_dir)")


def test_read_report_text_none_missing_refuses_a_fifo_and_too_large(tmp_path, monkeypatch):
    assert files_mod.read_report_text(str(tmp_path / "none.json")) is None
    (tmp_path / "ok.json").write_text("{}\n")
    assert files_mod.read_report_text(str(tmp_path / "ok.json")) == "{}\n"
    os.mkfifo(str(tmp_path / "fifo.json"))
    with pytest.raises(ValueError, match="is not a regular file"):
        files_mod.read_report_text(str(tmp_path / "fifo.json"))
    monkeypatch.setattr(files_mod, "PREVIOUS_MAX", 2)
    with pytest.raises(ValueError, match="is larger than 2 bytes"):
        files_mod.read_report_text(str(tmp_path / "ok.json"))


@pytest.mark.parametrize("name, hosts, why", [
    ("summary", [], "fleet files"), ("INDEX", [], "fleet files"),
    ("gpuhost", [], "fleet files"), ("tune-summary", [], "fleet files"),
    ("gpu01", ["gpu01"], "host gpu01's audit report"),
    ("gpu01-tune", ["gpu01"], "host gpu01's tune report"),
    ("gpu01-reboot", ["gpu01"], "host gpu01's reboot report"),
    ("a_b-c14cddc033", ["a/b"], "host a/b's audit report")])
def test_a_rollout_name_clashing_with_the_fleet_or_a_hosts_files_is_named(name, hosts, why):
    assert why in files_mod.report_name_clash(name, hosts)


@pytest.mark.parametrize("name", ["rollout", "driver-580", "summary2", "gpu01-tune.md"])
def test_other_rollout_names_are_free(name):
    assert files_mod.report_name_clash(name, ["gpu01", "gpu02"]) is None


def test_host_files_are_the_writers_suffixes_after_the_safe_name():
    assert [files_mod.host_file("a/b", "tune", i) for i in (0, 1)] == [
        files_mod.safe_name("a/b") + "-tune.md", files_mod.safe_name("a/b") + "-tune.json"]
    assert files_mod.host_file("lab-tune", "audit") == "lab-tune.json"


def test_a_name_with_a_lone_surrogate_is_made_safe_and_utf8():
    name = files_mod.safe_name("gpu\udcff")
    assert name != "gpu\udcff" and name.startswith("gpu_-")
    name.encode("utf-8")  # strict: a page can link to it
