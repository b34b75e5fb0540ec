"""engines/tune/sections.py: a snapshot taken and restored over the sections of the registry
(here the files section and a stand-in section), and the snapshot tune parts before and
after the others; trees under a tmp root."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import sections
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import snapstore
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import validate

FILES = snapstore.FilesSection()

FOLDER = snapstore.SNAPSHOT_DIR
CONF = "/etc/sysctl.d/90-gpu.conf"


class Knob(object):
    """A section as a tune part declares one: one value kept in ``state`` by the test."""

    name = snapshot_key = "knob"
    label = "{name}"
    restore_report = (("knobs put back", "changed", "name"),)

    def __init__(self):
        self.value = "4096"
        self.refuse = False

    def record(self, ctx):
        return {"value": self.value}

    def restore(self, ctx, recorded):
        if self.refuse:
            return [{"name": "knob", "status": "failed"}], ["knob: refused"]
        if recorded["value"] == self.value:
            return [{"name": "knob", "status": "ok"}], []
        before, self.value = self.value, recorded["value"]
        return [{"name": "knob", "status": "changed", "before": before,
                 "after": self.value}], []

    def check(self, recorded, bad, root):
        if not isinstance((recorded or {}).get("value"), str):
            bad("knob value is not text")

    def summary(self, recorded):
        return {"knob": (recorded or {}).get("value")}

    def diff_lines(self, item):
        return ("knob: %s" % item["before"], "knob: %s" % item["after"])


def _tree(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "etc/sysctl.d"))
    with open(os.path.join(root, CONF.lstrip("/")), "w") as handle:
        handle.write("vm.swappiness = 60\n")
    return root


def _ctx(root, check_mode=False):
    return sections.SnapshotContext(root, {"dir": FOLDER, "files": [CONF]}, check_mode)


def test_take_collects_every_section_and_writes_the_original_once(tmp_path):
    root, knob = _tree(tmp_path), Knob()
    both = (knob, FILES)
    taken = sections.take(both, _ctx(root))
    assert taken["changed"] and taken["path"] == os.path.join(FOLDER, "original.json")
    assert sorted(taken["state"]) == ["files", "knob"]
    assert sections.summarize(both, taken["state"]) == {"knob": "4096",
                                                        "files": {CONF: "file"}}
    assert sections.take(both, _ctx(root))["changed"] is False


def test_restore_puts_each_section_back_and_reports_it(tmp_path):
    root, knob = _tree(tmp_path), Knob()
    both = (knob, FILES)
    sections.take(both, _ctx(root))
    knob.value = "512"
    with open(os.path.join(root, CONF.lstrip("/")), "w") as handle:
        handle.write("vm.swappiness = 10\n")
    done = sections.restore(both, _ctx(root))
    assert done["changed"] and done["failures"] == []
    assert knob.value == "4096"
    assert done["differs"] == ["knob knob", "files %s" % CONF]
    assert done["report"] == ["knobs put back: knob", "files put back: %s" % CONF]
    diff = sections.restore_diff(both, done)
    assert diff["before"].startswith("knob: 512\n") and diff["after"].startswith("knob: 4096\n")
    assert diff["after_header"] == os.path.join(FOLDER, "original.json")


def test_a_full_restore_removes_the_applied_state_and_a_partial_one_keeps_it(tmp_path):
    root, knob = _tree(tmp_path), Knob()
    both = (knob, FILES)
    sections.take(both, _ctx(root))
    knob.value = "512"
    sections.take(both, _ctx(root), kind="applied")
    assert snapstore.listing(root)[-1] == "applied.json"
    partial = sections.restore(both, _ctx(root), parts=["knob"])
    assert "removed" not in partial and snapstore.listing(root)[-1] == "applied.json"
    planned = sections.restore(both, _ctx(root, check_mode=True))
    assert planned["removed"] == os.path.join(FOLDER, "applied.json") and planned["changed"]
    assert snapstore.listing(root)[-1] == "applied.json"
    done = sections.restore(both, _ctx(root))
    assert done["removed"] == os.path.join(FOLDER, "applied.json")
    assert snapstore.listing(root) == ["original.json"]


def test_restore_of_some_parts_only_and_a_refusal_is_a_failure(tmp_path):
    root, knob = _tree(tmp_path), Knob()
    both = (knob, FILES)
    sections.take(both, _ctx(root))
    knob.value = "512"
    only_files = sections.restore(both, _ctx(root), parts=["files"])
    assert only_files["knob"] == [] and knob.value == "512"
    knob.refuse = True
    assert sections.restore(both, _ctx(root))["failures"] == ["knob: refused"]


def test_a_damaged_section_is_refused_before_anything_is_restored(tmp_path):
    root, knob = _tree(tmp_path), Knob()
    knob.value = 4096  # not text: the section's check refuses the recorded document
    sections.take((knob, FILES), _ctx(root))
    knob.value = "512"
    with pytest.raises(snapstore.SnapshotError, match="knob value is not text"):
        sections.restore((knob, FILES), _ctx(root))
    assert knob.value == "512"


class TuneCtx(object):
    """What host_tune gives its parts, as far as the snapshot parts read it."""

    def __init__(self, root, check_mode=False, changed=True):
        self.root = root
        self.check_mode = check_mode
        self.changed = changed
        self.params = {"snapshot_dir": FOLDER, "sysctl": {}, "lxc_config_dir": "/etc/pve/lxc"}
        self.selection = {}
        self.files = [CONF]
        self.sections = (FILES,)


def test_the_before_part_records_and_the_applied_part_only_after_a_change(tmp_path):
    root = _tree(tmp_path)
    out = sections.BEFORE_PART.run(TuneCtx(root))
    assert out["changed"] and out["fields"]["snapshot"] == os.path.join(FOLDER, "original.json")
    again = sections.BEFORE_PART.run(TuneCtx(root))
    assert again["fields"]["snapshot"].startswith("unchanged since the last recorded state")
    assert sections.APPLIED_PART.run(TuneCtx(root, changed=False)) == {}
    planned = sections.APPLIED_PART.run(TuneCtx(root, check_mode=True))
    assert planned["detail"]["snapshot_applied"]["msg"] == (
        "check mode: applied state not recorded")
    assert "applied.json" not in snapstore.listing(root)
    sections.APPLIED_PART.run(TuneCtx(root))
    assert snapstore.listing(root)[-1] == "applied.json"


def test_the_before_part_failing_says_nothing_was_changed(tmp_path):
    root = _tree(tmp_path)
    ctx = TuneCtx(root)
    ctx.params["snapshot_dir"] = "/../../outside"
    out = sections.BEFORE_PART.run(ctx)
    assert out["failures"][0].startswith("snapshot: ")
    assert out["failures"][0].endswith("(nothing was changed)")


def test_the_snapshot_folder_is_declared_once_and_must_stay_under_the_root(tmp_path):
    declared = sections.OPTIONS["snapshot_dir"]
    assert (declared["type"], declared["default"], declared["role_var"]) == (
        "path", snapstore.SNAPSHOT_DIR, "gpuhost_tune_snapshot_dir")
    assert "O(root)" in declared["description"]  # host_tune's words
    assert "gpuhost_root" in declared["role_description"]  # the role's
    assert sections.BEFORE_PART.rules is sections.APPLIED_PART.rules is sections.rules
    root = str(tmp_path)
    sections.rules({"root": root, "snapshot_dir": "/var/lib/gpuhost"})
    sections.rules({"root": root})  # not given: the spec's default
    with pytest.raises(validate.ValidationError, match="/../../outside resolves to .*outside root"):
        sections.rules({"root": root, "snapshot_dir": "/../../outside"})
    for bad in ("", 7):
        with pytest.raises(validate.ValidationError, match="a non-empty host path"):
            sections.rules({"root": root, "snapshot_dir": bad})
