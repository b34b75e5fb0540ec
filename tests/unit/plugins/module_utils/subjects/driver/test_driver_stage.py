"""driver_stage's rollout rows: the driver before and after each host, in the summary's
lines and its markdown table. The readers of apt-cache, df and the .run header are
driver_stage_files' (test_driver_stage_files.py)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import rollout


def test_rollout_rows_name_the_driver_before_and_after():
    doc = rollout.summarize(["a", "b"], {
        "a": {"status": "done", "reason": None,
              "driver": {"before": "580.95.05", "after": "590.48.01"}},
        "b": {"status": "stopped", "reason": "gate", "driver": {"before": "580.95.05",
                                                                "after": None}}},
        "driver_upgrade")
    assert doc["hosts"][0]["driver"] == {"before": "580.95.05", "after": "590.48.01"}
    assert rollout.lines(doc)[1:] == ["a  done (driver 580.95.05 -> 590.48.01)",
                                      "b  stopped (driver 580.95.05 -> ?): gate"]
    md = rollout.render_markdown(doc)
    assert "| a | done | 580.95.05 -> 590.48.01 |  |" in md
    # a rollout without drivers keeps its three columns
    plain = rollout.render_markdown(rollout.summarize(["a"], {"a": {"status": "done"}}))
    assert "| Host | Status | Why |" in plain
