"""The opt-in numa_pin tune part through host_tune: pins the GPU containers the audit finds
on the wrong NUMA node, leaves the others, keeps every other byte of their configs, plans
without writing in check mode, runs a second time without a change, and the snapshot's
restore puts the exact bytes back. Trees from tests/fixtures/health.py (GPUs 4-7 on node 1;
container 131 pinned to node 0, 132 unpinned with cores: 16, 129 with all eight GPUs)."""

import os

import pytest
from conftest import tree_snapshot
from fixtures import health, hosts, lxc
from modrun import run_module

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import snapshot, tune
from ansible_collections.gpuhost.tuning.plugins.modules import host_tune, tuning_snapshot

NODE1 = "lxc.cgroup2.cpuset.cpus: 32-63,96-127\nlxc.cgroup2.cpuset.mems: 1\n"
# An operator's hand-written line: the "=" form and trailing blanks a rewrite could lose.
OWN_131 = "lxc.cgroup2.cpuset.cpus = 0-15  \n"
SNAP_SECTION = ("\n[before-upgrade]\narch: amd64\ncores: 16\nlxc.cgroup2.cpuset.cpus: 0-7\n"
                "snaptime: 1764000000\n")


def _conf(root, vmid):
    return os.path.join(str(root), "etc/pve/lxc/%d.conf" % vmid)


def _read(root, vmid):
    with open(_conf(root, vmid), "rb") as handle:
        return handle.read()


def _configs(root):
    return dict((v, (_read(root, v), os.stat(_conf(root, v)).st_mode & 0o7777))
                for v in (129, 131, 132, 133))


@pytest.fixture
def host(tmp_path):
    """gpu_host plus: 131's cpuset written by hand (``=`` form) and a snapshot section
    with its own cpuset line; 133 with GPU 7 already on node 1 (well placed, narrower)."""
    root = str(tmp_path)
    health.gpu_host(root)
    text = health.gpu_container_text(131, [4, 5], mems="0")
    text = text.replace("lxc.cgroup2.cpuset.mems: 0\n", OWN_131 + "lxc.cgroup2.cpuset.mems: 0\n")
    lxc.write_config(root, 131, text + SNAP_SECTION)
    lxc.write_config(root, 133, health.gpu_container_text(133, [7], cpuset="32-47", mems="1"))
    return root


def _tune(root, check_mode=False, parts=("snapshot", "numa_pin", "verify"), **args):
    params = dict(root=root, host="gpu03", parts=list(parts))
    params.update(args)
    return run_module(host_tune, hosts.as_wanted(params), check_mode=check_mode, diff=True)


def _rows(result):
    return dict((r["item"], r) for r in result["rows"] if r["part"] == "numa_pin")


def test_off_by_default(host):
    before = _configs(host)
    done = tune.tune_run({"root": host, "host": "gpu03", "parts": list(tune.DEFAULT_PARTS)})
    assert "numa_pin" not in done["parts_on"] and "numa_pin" not in done["parts"]
    assert "numa_pin" not in run_module(host_tune, {"root": host}, check_mode=True)["parts_on"]
    assert _configs(host) == before


def test_pins_the_misplaced_keeps_every_other_byte_then_changes_nothing(host):
    before = _configs(host)
    done = _tune(host)
    assert done["changed"] and not done.get("failed"), done.get("msg")
    rows = _rows(done)
    for vmid in (131, 132):
        assert rows["lxc %d" % vmid]["status"] == "changed"
        assert rows["lxc %d" % vmid]["after"] == "cpus 32-63,96-127, mems 1"
        assert "applied at the container's next start" in rows["lxc %d" % vmid]["note"]
    assert rows["lxc 131"]["before"] == "cpus 0-15, mems 0"
    assert rows["lxc 132"]["before"] == "unpinned"
    assert rows["lxc 129"]["status"] == "skipped"   # its GPUs sit on both nodes
    assert (rows["lxc 133"]["status"], rows["lxc 133"]["note"]) \
        == ("skipped", "already on its GPUs' nodes")
    after = _configs(host)
    assert after[129] == before[129] and after[133] == before[133]
    # 131: the hand-set line rewritten in its place and form, the snapshot section as it was
    assert after[131][0] == before[131][0].replace(
        OWN_131.encode(), b"lxc.cgroup2.cpuset.cpus = 32-63,96-127\n").replace(
        b"lxc.cgroup2.cpuset.mems: 0\n", b"lxc.cgroup2.cpuset.mems: 1\n")
    assert after[131][0].endswith(SNAP_SECTION.encode())
    # 132 (devN entries, no lxc.* line): the two keys added at the end of its live section
    assert after[132][0] == before[132][0] + NODE1.encode()
    assert after[131][1] == after[132][1] == 0o640
    # the verifying audit finds neither container misplaced any more
    assert done["verified"] and done["findings_after"] == []
    assert sorted((f["id"], f["subject"]) for f in done["findings_before"]
                  if f["subject"].startswith("lxc")) \
        == [("gpu_container_unpinned", "lxc 132"), ("gpu_numa_mismatch", "lxc 131")]
    # the diff shows each config's change
    diffs = dict((d["before_header"], d) for d in done["diff"] if "before_header" in d)
    assert "cpuset.mems: 1" in diffs["/etc/pve/lxc/132.conf"]["after"]
    # a second run changes nothing (snapshot included)
    again = _tune(host)
    assert again["changed"] is False and _configs(host) == after
    assert _rows(again)["lxc 131"]["note"] == "already on its GPUs' nodes"


def test_check_mode_writes_nothing_and_shows_the_diff(host):
    tree = tree_snapshot(host)
    planned = _tune(host, check_mode=True)
    assert planned["changed"] and tree_snapshot(host) == tree
    assert _rows(planned)["lxc 132"]["after"] == "cpus 32-63,96-127, mems 1"
    diff = [d for d in planned["diff"] if d.get("before_header") == "/etc/pve/lxc/132.conf"]
    assert diff and diff[0]["after"].endswith(NODE1)


def test_revert_restores_the_exact_bytes_and_mode(host):
    os.chmod(_conf(host, 132), 0o600)
    before = _configs(host)
    assert not _tune(host).get("failed")
    assert _configs(host) != before
    planned = run_module(tuning_snapshot, {"root": host, "state": "restore"},
                         check_mode=True, diff=True)
    assert planned["changed"] and "lxc 131: lxc.cgroup2.cpuset.cpus = 0-15  " \
        in planned["diff"]["after"]
    restored = run_module(tuning_snapshot, {"root": host, "state": "restore"})
    assert not restored.get("failed"), restored.get("msg")
    assert sorted(r["vmid"] for r in restored["placement"] if r["status"] == "changed") \
        == [131, 132]
    assert _configs(host) == before
    again = run_module(tuning_snapshot, {"root": host, "state": "restore"}, check_mode=True)
    assert again["changed"] is False


def test_revert_of_a_snapshot_older_than_the_container_uses_the_next_one(host):
    """original.json without the container (taken before it had a GPU, or by a release that
    did not record cpusets): the later before-snapshot that holds it is used."""
    before = _configs(host)
    os.rename(_conf(host, 132), _conf(host, 132) + ".away")
    assert not _tune(host, parts=["snapshot"]).get("failed")   # original: no 132
    os.rename(_conf(host, 132) + ".away", _conf(host, 132))
    assert not _tune(host).get("failed")                       # later snapshot holds 132
    assert b"cpuset.mems: 1" in _read(host, 132)
    assert not snapshot.restore(host)["failures"]
    assert _configs(host) == before


@pytest.mark.parametrize("vmids, message", [
    ([140], "numa_pin_vmids: 140 is not allowed: no container config /etc/pve/lxc/140.conf "
            "(containers there: 129, 130, 131, 132, 133)"),
    ([130], "numa_pin_vmids: 130 is not allowed: its live config passes in no /dev/nvidiaN"),
])
def test_a_listed_vmid_that_cannot_be_pinned_is_refused_before_any_write(host, vmids,
                                                                         message):
    before = _configs(host)
    done = _tune(host, numa_pin_vmids=[132] + vmids)
    assert done["failed"] and message in done["msg"] and "nothing was written" in done["msg"]
    assert _configs(host) == before
    bad = run_module(host_tune, {"root": host, "parts": ["numa_pin"], "numa_pin_vmids": [7]})
    assert bad["failed"] and "numa_pin_vmids: 7 is not allowed: an integer from 100" \
        in bad["msg"]


def test_only_listed_containers_are_pinned(host):
    before = _configs(host)
    done = _tune(host, numa_pin_vmids=[132])
    assert not done.get("failed"), done.get("msg")   # 131 left on purpose: no verify failure
    assert _rows(done)["lxc 131"]["note"] == "not in numa_pin_vmids"
    assert _configs(host)[131] == before[131] and _configs(host)[132] != before[132]


def test_refuses_what_a_revert_could_not_undo_or_that_is_ambiguous(host):
    # without the snapshot part no snapshot holds the lines it would replace
    before = _configs(host)
    done = _tune(host, parts=["numa_pin"])
    assert done["failed"] and _configs(host) == before
    assert "lxc 131 (/etc/pve/lxc/131.conf): not pinned: no snapshot holds its cpuset lines " \
           "(lxc.cgroup2.cpuset.cpus = 0-15   | lxc.cgroup2.cpuset.mems: 0)" in done["msg"]
    assert "gpuhost_tune_snapshot: true" in done["msg"]
    # the same key twice in the live section: which one the operator means is unclear
    text = _read(host, 131).decode().replace(
        OWN_131, OWN_131 + "lxc.cgroup2.cpuset.cpus: 8-15\n", 1)
    lxc.write_config(host, 131, text)
    twice = _tune(host)
    assert twice["failed"] and "lxc.cgroup2.cpuset.cpus is set on 2 live lines" in twice["msg"]
    assert _read(host, 131).decode() == text
    assert _rows(twice)["lxc 132"]["status"] == "changed"      # the others still run


def test_a_cpuset_set_after_the_original_snapshot_is_the_operators(host):
    assert not _tune(host, parts=["snapshot"]).get("failed")     # original.json
    text = _read(host, 131).decode().replace(OWN_131, "lxc.cgroup2.cpuset.cpus: 0-7\n")
    lxc.write_config(host, 131, text)                              # set by hand afterwards
    done = _tune(host, parts=["numa_pin"])   # no snapshot part: the original decides
    assert done["failed"] and _read(host, 131).decode() == text
    assert ("lxc 131 (/etc/pve/lxc/131.conf): not pinned: its cpuset lines "
            "(lxc.cgroup2.cpuset.cpus: 0-7 | lxc.cgroup2.cpuset.mems: 0) were set after the "
            "snapshot a revert uses (/var/lib/gpuhost/original.json holds "
            "lxc.cgroup2.cpuset.cpus = 0-15   | lxc.cgroup2.cpuset.mems: 0)") in done["msg"]
    # 132's (no cpuset line) is as the original holds it: pinned, and a revert unpins it
    assert _rows(done)["lxc 132"]["status"] == "changed"
    assert not snapshot.restore(host)["failures"]
    assert b"cpuset" not in _read(host, 132)


def test_the_revert_leaves_a_cpuset_set_after_the_tune_and_says_so(host):
    assert not _tune(host).get("failed")                  # pins 131 and 132
    pinned_131 = _read(host, 131)
    text = _read(host, 132).decode().replace("cpuset.cpus: 32-63,96-127", "cpuset.cpus: 40-47")
    assert text != _read(host, 132).decode()
    lxc.write_config(host, 132, text)                     # the operator's, after the tune
    restored = run_module(tuning_snapshot, {"root": host, "state": "restore"})
    assert restored["failed"] is True
    assert ("lxc 132: not reverted: its cpuset lines (lxc.cgroup2.cpuset.cpus: 40-47 | "
            "lxc.cgroup2.cpuset.mems: 1) were changed after the tune, which left "
            "lxc.cgroup2.cpuset.cpus: 32-63,96-127 | lxc.cgroup2.cpuset.mems: 1, so they are "
            "the operator's; set them by hand (the original: none)") in restored["msg"]
    assert _read(host, 132).decode() == text              # left as the operator set it
    rows = dict((r["vmid"], r) for r in restored["placement"])
    assert rows[132]["status"] == "failed" and rows[131]["status"] == "changed"
    assert _read(host, 131) != pinned_131                 # the tune's own lines reverted
    assert b"32-63" not in _read(host, 131)
    # the operator drops the line: the container is as the original was, nothing refused
    lxc.write_config(host, 132, text.replace("lxc.cgroup2.cpuset.cpus: 40-47\n", "")
                     .replace("lxc.cgroup2.cpuset.mems: 1\n", ""))
    again = run_module(tuning_snapshot, {"root": host, "state": "restore"})
    assert not again.get("failed"), again.get("msg")
