"""engines/report/merged.py: the files report_merge writes for tune and rollout reports: each
host's newest tune result and the summary naming the folder it came from."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import merged

TUNE = {"root": "/", "rows": [], "findings_before": [], "findings_after": [],
        "verified": True, "failures": [], "snapshot": "original.json"}


def test_the_newest_tune_of_a_host_wins_by_time_then_folder():
    entries = {"gpu01": [(dict(TUNE, snapshot="old"), "a/gpu01-tune.json", 10, 0),
                         (dict(TUNE, snapshot="new"), "b/gpu01-tune.json", 20, 1),
                         (dict(TUNE, snapshot="same time, later folder"),
                          "c/gpu01-tune.json", 20, 2)]}
    doc, path = merged.newest_tunes(entries)["gpu01"]
    assert (doc["snapshot"], path) == ("same time, later folder", "c/gpu01-tune.json")


def test_tune_merge_files_put_failed_hosts_first_in_the_summary():
    entries = {"gpu01": [(TUNE, "a/gpu01-tune.json", 1, 0)],
               "gpu02": [(dict(TUNE, failures=["boom | x"]), "b/gpu02-tune.json", 1, 0)]}
    files, info = merged.tune_merge_files(entries, "2026-01-01 00:00:00Z")
    assert sorted(files) == ["gpu01-tune.json", "gpu01-tune.md", "gpu02-tune.json",
                             "gpu02-tune.md", "tune-summary.md"]
    assert info == {"hosts": {"gpu01": "a/gpu01-tune.json", "gpu02": "b/gpu02-tune.json"},
                    "failed": ["gpu02"], "summary": "tune-summary.md"}
    lines = files["tune-summary.md"].splitlines()
    assert lines[0] == "# GPU host tuning: 2 host(s), 1 failed"
    assert lines[6].startswith("| gpu02 | FAILED: boom \\| x | 0 | 0 |")
    assert lines[7] == "| gpu01 | ok | 0 | 0 | original.json | a/gpu01-tune.json |"


def test_rollout_merge_files_join_the_hosts_of_every_folder_newest_rows_winning():
    older = {"title": "driver", "generated_at": "2026-01-01", "counts": {},
             "hosts": [{"host": "gpu01", "status": "failed", "reason": "x"},
                       {"host": "gpu02", "status": "done"}]}
    newer = {"title": "driver", "generated_at": "2026-01-02", "counts": {},
             "hosts": [{"host": "gpu01", "status": "done"}]}
    files, counts = merged.rollout_merge_files(
        {"rollout": [(older, "a/rollout.json", 0), (newer, "b/rollout.json", 1)]}, "now")
    assert sorted(files) == ["rollout.json", "rollout.md"]
    # gpu01 failed in the older run and was done in the newer one: done twice, none failed
    assert counts == {"rollout": {"done": 2, "stopped": 0, "not reached": 0}}


def test_a_tune_file_or_rollout_summary_dated_in_the_future_ranks_below_past_ones():
    warnings = []
    entries = {"gpu01": [(dict(TUNE, snapshot="past"), "a/gpu01-tune.json", 900, 0),
                         (dict(TUNE, snapshot="2100"), "b/gpu01-tune.json", 4102444800, 1)]}
    doc, path = merged.newest_tunes(entries, 1000, warnings)["gpu01"]
    assert path == "a/gpu01-tune.json" and "b/gpu01-tune.json is dated 2100" in warnings[0]
    past = {"title": "t", "generated_at": "2026-01-01 00:00:00Z", "counts": {},
            "hosts": [{"host": "gpu01", "status": "done"}]}
    future = dict(past, generated_at="2099-01-01 00:00:00Z",
                  hosts=[{"host": "gpu01", "status": "stopped", "reason": "x"}])
    _files, counts = merged.rollout_merge_files(
        {"rollout": [(past, "a/rollout.json", 0), (future, "b/rollout.json", 1)]}, "now",
        1767225600 + 86400, warnings)
    assert counts["rollout"]["done"] == 1
    assert "b/rollout.json is dated 2099-01-01 00:00:00Z" in warnings[1]
