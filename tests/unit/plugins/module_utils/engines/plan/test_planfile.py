"""engines/plan/planfile: the plan document of host_tune check-mode results (grouping,
outliers first, refused and unreachable hosts, batches), its digest, load refusing an
edited, foreign or broken plan, and the Markdown and HTML pages (the HTML at 1,000 hosts)."""

import json
import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import planfile

META = {"collection_version": "0.2.0", "created_at": "2026-12-05T17:10:00Z",
        "created_by": "ops@ctl", "parts": ["snapshot", "sysctl", "pcie"],
        "wanted": {"host": "x", "sysctl": {"kernel.numa_balancing": "0"}}}


def row(part, item, before, after, status="changed"):
    return {"part": part, "item": item, "before": before, "after": after, "status": status,
            "note": ""}


def seed_result(address="0000:01:00.0", numa="1"):
    return {"changed": True, "failures": [], "rows": [
        row("sysctl", "kernel.numa_balancing", numa, "0", "changed" if numa != "0" else "ok"),
        row("pcie", address + " endpoint MRRS", 512, 4096),
        row("boot_service", "gpuhost-tuning.service", "", "enabled")]}


def fleet():
    results = dict(("gpu%02d" % i, seed_result("0000:%02x:00.0" % i)) for i in range(1, 9))
    results["gpu05"] = seed_result(numa="0")  # changed by hand: a group of its own
    results["gpu06"] = {"failed": True, "msg": "gpu06: tune pass not started: a guest"}
    results["gpu07"] = {"unreachable": True, "msg": "ssh: connect to host gpu07: refused"}
    results["gpu08"] = None  # no result at all
    return results


def test_build_groups_outliers_first():
    doc = planfile.build(fleet(), META)
    assert doc["schema"] == planfile.SCHEMA and doc["digest"] == planfile.digest(doc)
    assert list(doc["hosts"]) == ["gpu%02d" % i for i in range(1, 9)]
    groups = [g["hosts"] for g in doc["groups"]]
    assert groups == [["gpu05"], ["gpu06"], ["gpu07"], ["gpu08"],
                      ["gpu01", "gpu02", "gpu03", "gpu04"]]
    assert doc["groups"][0]["summary"] == ["MRRS 512 -> 4096 on 1 device",
                                           "gpuhost-tuning.service enabled"]
    assert doc["groups"][-1]["summary"][0] == "kernel.numa_balancing 1 -> 0"
    assert doc["groups"][1]["summary"] == ["refused: gpu06: tune pass not started: a guest"]
    # what makes the outlier one: against the largest group
    assert doc["groups"][0]["versus"] == {"group": doc["groups"][-1]["key"], "only_here": [],
                                          "not_here": ["kernel.numa_balancing 1 -> 0"]}
    assert doc["groups"][1]["versus"] is None and doc["groups"][-1]["versus"] is None
    assert doc["hosts"]["gpu06"]["status"] == "refused"
    assert doc["hosts"]["gpu07"]["status"] == "unreachable"
    assert doc["hosts"]["gpu08"]["status"] == "not reached"
    assert doc["hosts"]["gpu01"]["status"] == "planned"
    one, two = doc["hosts"]["gpu01"], doc["hosts"]["gpu02"]
    assert one["group"] == two["group"] and one["fingerprint"] != two["fingerprint"]
    assert one["fingerprint"] == changeset.fingerprint(one["changes"])
    assert doc["options"]["wanted_digest"] == changeset.sha256(changeset.canonical(
        {"sysctl": {"kernel.numa_balancing": "0"}}))  # the host name left out
    assert doc["batches"] == [list(doc["hosts"])]
    assert not any(e["reboot"] for e in doc["hosts"].values())


def test_hosts_refused_alike_share_a_group():
    results = {"a1": {"unreachable": True, "msg": "ssh to a1: timed out"},
               "b2": {"unreachable": True, "msg": "ssh to b2: timed out"}}
    doc = planfile.build(results, META)
    assert len(doc["groups"]) == 1
    assert doc["groups"][0]["summary"] == ["refused: unreachable: ssh to <host>: timed out"]


def test_unreachable_hosts_are_one_group_whatever_their_messages():
    # Ansible's message names each host's own address: 40 unreachable hosts are one group
    results = dict(("h%02d" % i, {"unreachable": True, "msg": "Failed to connect to the host "
                                  "via ssh: connect to host 10.0.0.%d port 22" % i})
                   for i in range(40))
    results["ok"] = seed_result()
    doc = planfile.build(results, META)
    assert [len(g["hosts"]) for g in doc["groups"]] == [1, 40]
    assert doc["groups"][1]["summary"][0].startswith("refused: unreachable (each host's own")
    assert doc["hosts"]["h07"]["refused"].endswith("10.0.0.7 port 22")
    assert planfile.headline(doc).startswith("41 hosts in 2 groups: 1 to change")
    one = planfile.build({"solo": seed_result()}, META)
    assert planfile.headline(one).startswith("1 host in 1 group: 1 to change")


def test_batches_as_ansible_serial_makes_them():
    hosts = ["h%d" % i for i in range(10)]
    assert planfile.batches(hosts) == [hosts]
    assert planfile.batches(hosts, 4) == [hosts[:4], hosts[4:8], hosts[8:]]
    assert planfile.batches(hosts, [1, "25%"]) == [hosts[:1], hosts[1:3], hosts[3:5],
                                                   hosts[5:7], hosts[7:9], hosts[9:]]
    assert planfile.batches(hosts[:2], "10%") == [["h0"], ["h1"]]  # at least one
    with pytest.raises(ValueError):
        planfile.batches(hosts, 0)
    doc = planfile.build(fleet(), dict(META, serial=[1, "50%"]))
    assert [len(b) for b in doc["batches"]] == [1, 4, 3]
    assert doc["options"]["serial"] == [1, "50%"]
    assert planfile.headline(doc).endswith("; 3 rollout batches (1, 4, 3)")
    many = planfile.build(dict(("h%02d" % i, {"rows": []}) for i in range(12)),
                          dict(META, serial=[1, 5]))
    assert planfile.headline(many).endswith("; 4 rollout batches (1, 5 x 2, 1)")
    assert "12 hosts in 1 group: 0 to change, 12 with nothing to change" in planfile.headline(
        many)
    assert many["groups"][0]["summary"] == ["nothing to change"]


def test_load_refuses_an_edited_foreign_or_broken_plan(tmp_path):
    doc = planfile.build(fleet(), META)
    path = str(tmp_path / planfile.file_name(doc))
    with open(path, "w") as handle:
        json.dump(doc, handle, indent=1)
    assert planfile.load(path) == doc
    assert os.path.basename(path) == "plan-%s.json" % doc["digest"][:12]
    edited = json.loads(json.dumps(doc))
    edited["hosts"]["gpu01"]["changes"][0]["after"] = "1"
    with open(path, "w") as handle:
        json.dump(edited, handle)
    with pytest.raises(ValueError, match="the plan was edited after it was made"):
        planfile.load(path)
    other = dict(doc, schema="gpuhost.tuning/plan/0")
    other["digest"] = planfile.digest(other)
    with open(path, "w") as handle:
        json.dump(other, handle)
    with pytest.raises(ValueError, match="schema 'gpuhost.tuning/plan/0'"):
        planfile.load(path)
    with open(path, "w") as handle:
        handle.write("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        planfile.load(path)
    with pytest.raises(ValueError, match="does not exist"):
        planfile.load(str(tmp_path / "gone.json"))
    os.mkfifo(str(tmp_path / "fifo"))
    with pytest.raises(ValueError, match="not a regular file"):
        planfile.load(str(tmp_path / "fifo"))


def test_load_reads_no_more_than_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(planfile.files, "PREVIOUS_MAX", 100)
    path = str(tmp_path / "big.json")
    with open(path, "w") as handle:
        handle.write(" " * 101)
    with pytest.raises(ValueError, match="larger than 100 bytes"):
        planfile.load(path)


def test_markdown_first_line_is_the_digest():
    doc = planfile.build(fleet(), META)
    lines = planfile.markdown(doc).splitlines()
    assert lines[0] == "# Plan %s" % doc["digest"]
    text = "\n".join(lines)
    assert "### Group 1: 1 host, 2 changes, 0 reboots" in text
    assert "### Group 5: 4 hosts, 3 changes, 0 reboots" in text
    assert text.index("## Groups") < text.index("## Hosts per group")
    assert "gpu01, gpu02, gpu03, gpu04" in text
    assert ("**Differs against group 5 (4 hosts): not here: kernel.numa_balancing 1 -> 0**"
            in text)
    assert "gpuhost_plan=%s" % planfile.file_name(doc) in text


def test_html_is_readable_at_a_thousand_hosts():
    results = dict(("gpu%04d" % i, seed_result("0000:%02x:00.0" % (i % 200)))
                   for i in range(1000))
    results["gpu0500"] = seed_result(numa="0")
    doc = planfile.build(results, dict(META, serial=[1, "10%"]))
    page = planfile.html(doc)
    assert page.count("<section") == 2 and page.count("<details>") == 2  # collapsed
    assert page.count("<details open>") == 1  # the outlier's host named at once
    assert page.index("gpu0500") < page.index("gpu0001")  # the outlier first
    assert "<script" not in page and "src=" not in page and "@import" not in page
    assert "max-width:1080px" in page and 'name="viewport"' in page
    assert len(page) < 200000
    assert planfile.html(dict(doc, created_by="<b>x</b>")).count("<b>x</b>") == 0


def test_collection_version_from_galaxy_or_manifest(tmp_path):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))))
    assert planfile.collection_version(repo)[0].isdigit()
    with open(str(tmp_path / "MANIFEST.json"), "w") as handle:
        json.dump({"collection_info": {"version": "9.8.7"}}, handle)
    assert planfile.collection_version(str(tmp_path)) == "9.8.7"
    assert planfile.collection_version(str(tmp_path / "none")) is None
