"""platform/snapstore.py: the snapshot folder (original, snapshot-<time>, applied), its
documents and the ``files`` section, on trees under a tmp root (never this machine's)."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore

FILES = snapstore.FilesSection()

FOLDER = snapstore.SNAPSHOT_DIR


def _base(root):
    return os.path.join(str(root), FOLDER.lstrip("/"))


def test_the_first_before_is_the_original_then_only_a_changed_state_is_written(tmp_path):
    root = str(tmp_path)
    assert snapstore.write_if_new(root, "before", FOLDER, {"a": 1}, False) == os.path.join(
        FOLDER, "original.json")
    assert snapstore.write_if_new(root, "before", FOLDER, {"a": 1}, False) is None
    later = snapstore.write_if_new(root, "before", FOLDER, {"a": 2}, False)
    assert os.path.basename(later).startswith("snapshot-")
    with open(os.path.join(_base(root), "original.json")) as handle:
        doc = json.load(handle)
    assert (doc["schema"], doc["kind"], doc["state"]) == (snapstore.SCHEMA, "original",
                                                          {"a": 1})
    assert snapstore.listing(root) == ["original.json", os.path.basename(later)]


def test_applied_is_rewritten_only_when_it_differs_and_lists_last(tmp_path):
    root = str(tmp_path)
    snapstore.write_if_new(root, "before", FOLDER, {"a": 1}, False)
    assert snapstore.write_if_new(root, "applied", FOLDER, {"a": 9}, False).endswith(
        "applied.json")
    assert snapstore.write_if_new(root, "applied", FOLDER, {"a": 9}, False) is None
    assert snapstore.listing(root)[-1] == "applied.json"
    assert snapstore.last_recorded(root) == "applied.json"
    with pytest.raises(ValueError, match="invalid snapshot kind"):
        snapstore.write_if_new(root, "later", FOLDER, {}, False)


def test_check_mode_plans_the_original_and_writes_nothing(tmp_path):
    root = str(tmp_path)
    assert snapstore.write_if_new(root, "before", FOLDER, {"a": 1}, True).endswith(
        "original.json")
    assert not os.path.exists(_base(root))
    assert snapstore.last_recorded(root) is None


def test_resolve_names_and_refusals(tmp_path):
    root = str(tmp_path)
    snapstore.write_if_new(root, "before", FOLDER, {"a": 1}, False)
    assert snapstore.resolve(root, "original") == os.path.join(_base(root), "original.json")
    assert snapstore.resolve(root, "latest") == os.path.join(_base(root), "original.json")
    assert snapstore.resolve(root, "original.json") == snapstore.resolve(root, None)
    with pytest.raises(snapstore.SnapshotError, match="give original, latest"):
        snapstore.resolve(root, "..")
    with pytest.raises(snapstore.SnapshotError, match=r"not found .*original\.json"):
        snapstore.resolve(root, "nothing")
    with pytest.raises(snapstore.SnapshotError, match="outside root"):
        snapstore.resolve(root, "/../../etc/passwd")


def test_load_refuses_what_is_not_a_snapshot(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{")
    with pytest.raises(snapstore.SnapshotError, match="is not valid JSON"):
        snapstore.load(str(path))
    path.write_text(json.dumps({"schema": 99, "state": {}}))
    with pytest.raises(snapstore.SnapshotError, match="not a gpuhost.tuning snapshot"):
        snapstore.load(str(path))
    path.write_text(json.dumps({"schema": snapstore.SCHEMA, "state": []}))
    with pytest.raises(snapstore.SnapshotError, match="damaged or was edited: state is not"):
        snapstore.load(str(path))


def test_record_file_of_each_type_and_same_file(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "etc/sysctl.d"))
    with open(os.path.join(root, "etc/sysctl.d/90-gpu.conf"), "w") as handle:
        handle.write("vm.swappiness = 10\n")
    os.chmod(os.path.join(root, "etc/sysctl.d/90-gpu.conf"), 0o640)
    os.symlink("90-gpu.conf", os.path.join(root, "etc/sysctl.d/link.conf"))
    rec = snapstore.record_file(root, "/etc/sysctl.d/90-gpu.conf")
    assert (rec["type"], rec["mode"], rec["content_b64"]) == (
        "file", "0640", "dm0uc3dhcHBpbmVzcyA9IDEwCg==")
    assert snapstore.record_file(root, "/etc/sysctl.d/link.conf")["target"] == "90-gpu.conf"
    assert snapstore.record_file(root, "/etc/sysctl.d")["type"] == "dir"
    assert snapstore.record_file(root, "/etc/modprobe.d/x/y.conf") == {
        "type": "absent", "parent": "/etc"}
    assert snapstore.same_file(rec, dict(rec))
    assert not snapstore.same_file(rec, dict(rec, mode="0644"))
    assert snapstore.same_file(rec, {"type": "file"})  # an older record without the fields


def test_the_files_section_puts_a_changed_file_back_and_removes_a_created_one(tmp_path):
    root = str(tmp_path)
    conf = os.path.join(root, "etc/sysctl.d/90-gpu.conf")
    os.makedirs(os.path.dirname(conf))
    with open(conf, "w") as handle:
        handle.write("old\n")

    class Ctx(object):
        check_mode = False
    ctx = Ctx()
    ctx.root = root
    ctx.params = {"files": ["/etc/sysctl.d/90-gpu.conf", "/etc/new.d/a.conf"]}
    recorded = FILES.record(ctx)
    assert FILES.summary(recorded) == {"files": {
        "/etc/sysctl.d/90-gpu.conf": "file", "/etc/new.d/a.conf": "absent"}}
    with open(conf, "w") as handle:
        handle.write("new\n")
    os.makedirs(os.path.join(root, "etc/new.d"))
    with open(os.path.join(root, "etc/new.d/a.conf"), "w") as handle:
        handle.write("made by a part\n")
    items, failures = FILES.restore(ctx, recorded)
    assert failures == []
    # the folder a part created for its file goes with it
    assert sorted(i["path"] for i in items if i["status"] == "changed") == [
        "/etc/new.d", "/etc/new.d/a.conf", "/etc/sysctl.d/90-gpu.conf"]
    with open(conf) as handle:
        assert handle.read() == "old\n"
    assert not os.path.exists(os.path.join(root, "etc/new.d"))
    again, _failures = FILES.restore(ctx, recorded)
    assert not [i for i in again if i["status"] == "changed"]
