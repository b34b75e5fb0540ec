# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan document (``build``), its digest, reading it back (``load``) and its pages
(``markdown``, ``html``).

A plan holds each host's planned change set (``engines/plan/changeset.py``) with its
fingerprint and group, the groups (hosts making the same change; outliers first: the
fewest hosts first; of as many, planned before refused, the larger change first), the
rollout batches the apply would use, and ``digest``: sha256 of the canonical JSON of
everything else. The
digest names the plan's file and the first line of its Markdown: a plan edited after it was
made no longer matches it, and ``load`` refuses it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.plan import changeset
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import files
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import rollout

SCHEMA = "gpuhost.tuning/plan/1"
MAX_BYTES = files.PREVIOUS_MAX  # 64 MiB: a plan is read no further
DIGEST_CHARS = 12  # of the digest in the plan's file name
FEW = 3  # a group of this many hosts or fewer: its hosts named beside its lines, marked
# a host's status in the plan: its changes planned, or why not
STATUSES = ("planned", "refused", "unreachable", "not reached")
# keys of a host's result that say a change needs a reboot to take (host_tune's changes
# take effect live: none of its parts sets one today)
REBOOT_KEYS = ("reboot_required",)


def digest(doc):
    """sha256 hex of the canonical JSON of ``doc`` without its ``digest``."""
    return changeset.sha256(changeset.canonical(
        dict((k, v) for k, v in doc.items() if k != "digest")))


def file_name(doc):
    """``plan-<first 12 of the digest>.json``."""
    return "plan-%s.json" % doc["digest"][:DIGEST_CHARS]


def collection_version(collection_root):
    """The collection's version: ``MANIFEST.json`` of an installed collection, else
    ``galaxy.yml`` of a source tree; None when neither says."""
    try:
        with open(os.path.join(collection_root, "MANIFEST.json")) as handle:
            return str(json.load(handle)["collection_info"]["version"])
    except (IOError, OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(collection_root, "galaxy.yml")) as handle:
            for line in handle:
                match = re.match(r"^version:\s*['\"]?([^'\"\s#]+)", line)
                if match:
                    return match.group(1)
    except (IOError, OSError):
        pass
    return None


def batches(hosts, serial=None):
    """The rollout batches of ``hosts`` (in order) as Ansible's ``serial`` makes them:
    ``serial`` None is every host in one batch; else ``rollout.serial_batches`` forms
    (ValueError otherwise), a percentage of all the hosts (at least 1), the last size
    repeated."""
    hosts = list(hosts)
    if serial is None:
        return [hosts] if hosts else []
    sizes = rollout.serial_batches(serial)
    out, start = [], 0
    while start < len(hosts):
        size = sizes[min(len(out), len(sizes) - 1)]
        if isinstance(size, str):
            size = int(len(hosts) * int(size[:-1]) / 100.0) or 1
        out.append(hosts[start:start + size])
        start += size
    return out


def _status(result, refused):
    if not refused:
        return "planned"
    if isinstance(result, dict) and result.get("unreachable"):
        return "unreachable"
    return "not reached" if not result else "refused"


def host_entry(host, result):
    """One host's entry from its host_tune check-mode result (None or ``{}``: none)."""
    refused = changeset.refusal(result)
    changes = changeset.changes(result)
    status = _status(result, refused)
    if status == "unreachable":
        # one group, whatever each message says (Ansible's names the host's own address)
        group = changeset.sha256(changeset.canonical(["unreachable"]))
    elif refused:
        # the reason without the host's own name, so hosts refused alike group together
        group = changeset.sha256(changeset.canonical(
            ["refused: " + refused.replace(str(host), "<host>")]))
    else:
        group = changeset.group_key(changes)
    return {"status": status, "changes": changes,
            "fingerprint": changeset.fingerprint(changes), "group": group,
            "refused": refused,
            "reboot": bool(isinstance(result, dict) and any(result.get(k)
                                                            for k in REBOOT_KEYS))}


def _group(key, members, entries):
    first = entries[members[0]]
    refused = first["refused"]
    alike = set(entries[h]["refused"].replace(h, "<host>") for h in members) if refused else ()
    if len(alike) > 1:      # unreachable hosts whose messages differ (their addresses)
        lines = ["refused: unreachable (each host's own message is in its entry of the "
                 "plan's JSON; the first: %s)" % refused]
    elif refused:
        lines = ["refused: " + refused.replace(members[0], "<host>") if len(members) > 1
                 else "refused: " + refused]
    else:
        lines = changeset.summary(first["changes"]) or ["nothing to change"]
    reboots = len([h for h in members if entries[h]["reboot"]])
    return {"key": key, "hosts": members, "summary": lines, "refused": bool(refused),
            "changes": len(first["changes"]), "reboot": bool(reboots), "reboots": reboots}


def group_order(group):
    """Outliers first: the fewest hosts first; of as many, the planned ones (they will
    change) before the refused ones (they will not), the larger change first; then the
    first host's name."""
    return (len(group["hosts"]), group["refused"], -group["changes"], group["hosts"][0])


def compare(groups):
    """Set ``versus`` of each planned group but the largest planned one (in place): what
    makes it an outlier, ``{"group": the largest's key, "only_here": [its lines the largest
    has not], "not_here": [the largest's lines it has not]}``; None for the others."""
    planned = [g for g in groups if not g["refused"]]
    largest = max(planned, key=lambda g: len(g["hosts"])) if planned else None
    for group in groups:
        group["versus"] = None
        if group["refused"] or largest is None or group is largest:
            continue
        group["versus"] = {
            "group": largest["key"],
            "only_here": [line for line in group["summary"] if line not in largest["summary"]],
            "not_here": [line for line in largest["summary"] if line not in group["summary"]]}


def _versus(group, groups):
    """The line saying how ``group`` differs from the largest group, or None."""
    versus = group.get("versus")
    if not versus:
        return None
    index = [g["key"] for g in groups].index(versus["group"]) + 1
    parts = []
    if versus["only_here"]:
        parts.append("only here: " + "; ".join(versus["only_here"]))
    if versus["not_here"]:
        parts.append("not here: " + "; ".join(versus["not_here"]))
    return "against group %d (%d hosts): %s" % (
        index, len(groups[index - 1]["hosts"]), ", ".join(parts) or "the same lines")


def grouped(order, entries):
    """The groups of host ``entries`` (host -> its entry), each group's hosts in ``order``:
    outliers first (``group_order``), each compared with the largest (``compare``)."""
    members = {}
    for host in order:
        members.setdefault(entries[host]["group"], []).append(host)
    groups = sorted((_group(key, hosts, entries) for key, hosts in members.items()),
                    key=group_order)
    compare(groups)
    return groups


def build(results, meta):
    """The plan document of ``results`` (host -> its host_tune check-mode result; None or
    ``{}`` for a host that gave none) and ``meta``: ``collection_version``, ``created_at``
    (UTC ISO), ``created_by`` (user@host), ``hosts`` (the play's order; default sorted),
    ``parts`` (the tune parts on), ``wanted`` (the wanted values: only their digest is
    kept), ``serial`` (gpuhost_serial; None: one batch)."""
    order = list(meta.get("hosts") or sorted(results))
    order += sorted(h for h in results if h not in order)
    entries = dict((host, host_entry(host, results.get(host))) for host in order)
    wanted = dict((k, v) for k, v in (meta.get("wanted") or {}).items() if k != "host")
    doc = {"schema": SCHEMA, "collection_version": meta.get("collection_version"),
           "created_at": meta.get("created_at"), "created_by": meta.get("created_by"),
           "options": {"parts": list(meta.get("parts") or []),
                       "wanted_digest": changeset.sha256(changeset.canonical(wanted)),
                       "serial": meta.get("serial")},
           "hosts": entries, "groups": grouped(order, entries),
           "batches": batches(order, meta.get("serial"))}
    doc["digest"] = digest(doc)
    return doc


def text(data, origin="the plan"):
    """The plan document in ``data`` (JSON text), checked: ValueError naming the problem
    when it is no JSON object, its schema is another, or its digest does not match."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ValueError("%s is not JSON (%s)" % (origin, exc))
    return checked(doc, origin)


def checked(doc, origin="the plan"):
    """``doc`` (parsed JSON) when it is a plan whose digest matches; ValueError as ``text``
    says otherwise."""
    if not isinstance(doc, dict):
        raise ValueError("%s is not a plan: a JSON object with schema %s" % (origin, SCHEMA))
    if doc.get("schema") != SCHEMA:
        raise ValueError("%s has schema %r, not %s: make a new plan with this collection"
                         % (origin, doc.get("schema"), SCHEMA))
    got = digest(doc)
    if doc.get("digest") != got:
        raise ValueError("the plan was edited after it was made: %s says digest %s, its "
                         "content has %s" % (origin, doc.get("digest"), got))
    return doc


def load(path):
    """The plan document in file ``path`` (read at most ``MAX_BYTES``), checked as
    ``text`` does; ValueError naming the problem (and the path)."""
    try:
        data = files.read_report_text(path)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError("the plan %s %s" % (path, exc))
    if data is None:
        raise ValueError("the plan %s does not exist" % path)
    return text(data, "the plan %s" % path)


def counts(doc):
    """``{status: number of hosts}`` of ``STATUSES``."""
    out = dict((s, 0) for s in STATUSES)
    for entry in doc["hosts"].values():
        out[entry["status"]] = out.get(entry["status"], 0) + 1
    return out


def headline(doc):
    """One line: hosts, groups, refused, reboots, batches."""
    n = counts(doc)
    reboots = len([e for e in doc["hosts"].values() if e["reboot"]])
    change = len([e for e in doc["hosts"].values() if e["changes"] and not e["refused"]])
    sizes = []  # runs of one batch size folded: "1, 100 x 9, 99"
    for batch in doc["batches"]:
        if sizes and sizes[-1][0] == len(batch):
            sizes[-1][1] += 1
        else:
            sizes.append([len(batch), 1])
    return ("%d host%s in %d group%s: %d to change, %d with nothing to change, %d refused, "
            "%d unreachable, %d not reached; %d reboot%s; %d rollout batch%s (%s)"
            % (len(doc["hosts"]), "" if len(doc["hosts"]) == 1 else "s",
               len(doc["groups"]), "" if len(doc["groups"]) == 1 else "s",
               change, n["planned"] - change,
               n["refused"], n["unreachable"], n["not reached"], reboots,
               "" if reboots == 1 else "s", len(doc["batches"]),
               "" if len(doc["batches"]) == 1 else "es",
               ", ".join("%d x %d" % (size, times) if times > 1 else str(size)
                         for size, times in sizes) or "none"))


def _title(index, group):
    what = "refused" if group["refused"] else ("%d change%s" % (
        group["changes"], "" if group["changes"] == 1 else "s"))
    return "Group %d: %d host%s, %s, %d reboot%s" % (
        index, len(group["hosts"]), "" if len(group["hosts"]) == 1 else "s", what,
        group["reboots"], "" if group["reboots"] == 1 else "s")


def _md(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def merged_line(doc):
    """The line naming the slice plans a merged plan (report_merge) was made of, or None."""
    parts = doc.get("merged_from")
    parts = [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    if not parts:
        return None
    return "Merged by %s from %d slice plans: %s" % (
        doc.get("merged_by") or "report_merge", len(parts), ", ".join(
            "%s (%s, %s hosts, made %s)" % (p.get("file"), p.get("folder"), p.get("hosts"),
                                            p.get("created_at")) for p in parts))


def markdown(doc):
    """plan.md: the digest on the first line; the groups, outliers first (host count,
    summary lines, reboots); then the hosts of each group."""
    out = ["# Plan %s" % doc["digest"], "",
           "Made %s by %s with gpuhost.tuning %s; tune parts: %s." % (
               doc["created_at"], doc["created_by"], doc["collection_version"],
               ", ".join(doc["options"]["parts"]) or "(default)"),
           "", headline(doc) + ".", ""]
    if merged_line(doc):
        out += [_md(merged_line(doc)) + ".", ""]
    out += ["Apply exactly this plan: `ansible-playbook gpuhost.tuning.apply -e "
            "gpuhost_plan=%s`." % file_name(doc), "", "## Groups (outliers first)"]
    for index, group in enumerate(doc["groups"], 1):
        out += ["", "### %s" % _title(index, group), ""]
        out += ["- %s" % _md(line) for line in group["summary"]]
        versus = _versus(group, doc["groups"])
        if versus:
            out += ["", "**Differs %s**" % _md(versus)]
        if len(group["hosts"]) <= FEW:
            out += ["", "Hosts: %s" % ", ".join(_md(h) for h in group["hosts"])]
    out += ["", "## Hosts per group"]
    for index, group in enumerate(doc["groups"], 1):
        out += ["", "### Group %d (%s, %d host%s)" % (
            index, group["key"][:DIGEST_CHARS], len(group["hosts"]),
            "" if len(group["hosts"]) == 1 else "s"), ""]
        out.append(", ".join(_md(h) for h in group["hosts"]))
    out += ["", "## Rollout batches", ""]
    out += ["%d. %s" % (i, ", ".join(_md(h) for h in batch))
            for i, batch in enumerate(doc["batches"], 1)] or ["none"]
    return "\n".join(out) + "\n"


def _esc(value):
    return (str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em;max-width:1080px;
color:#1b1b1b;background:#fff}
h1{font-size:1.3em;overflow-wrap:anywhere}h2{font-size:1.15em;margin-top:1.6em}
section{border:1px solid #ccc;border-radius:6px;padding:.2em 1em .8em;margin:1em 0}
section.refused{border-color:#b00020;background:#fff5f5}
section.few{border-color:#b26a00;background:#fffaf0}
h3{font-size:1.05em;margin:.6em 0}ul{margin:.3em 0;padding-left:1.3em}
details{margin-top:.4em}summary{cursor:pointer}
.hosts{columns:24em;font-family:ui-monospace,monospace;font-size:.9em;margin:.4em 0}
.hosts span{display:block;overflow-wrap:anywhere}.meta{color:#555}
.batch span{white-space:nowrap}
code{overflow-wrap:anywhere}.versus{font-weight:600;overflow-wrap:anywhere}
"""


def html(doc, few=None):
    """plan.html: one section per group (outliers first; a group of ``few`` hosts or
    fewer marked, its hosts listed open), its summary lines, what sets it apart from the
    largest group, and its hosts in a collapsed list; no external assets, readable below
    1,100 px at 1,000 hosts."""
    few = FEW if few is None else few
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Plan %s</title><style>%s</style></head><body>" % (
               _esc(doc["digest"][:DIGEST_CHARS]), _STYLE),
           "<h1>Plan <code>%s</code></h1>" % _esc(doc["digest"]),
           '<p class="meta">Made %s by %s with gpuhost.tuning %s; tune parts: %s.</p>' % (
               _esc(doc["created_at"]), _esc(doc["created_by"]),
               _esc(doc["collection_version"]),
               _esc(", ".join(doc["options"]["parts"]) or "(default)")),
           "<p>%s.</p>" % _esc(headline(doc))]
    if merged_line(doc):
        out.append('<p class="meta">%s.</p>' % _esc(merged_line(doc)))
    out += ["<p>Apply: <code>ansible-playbook gpuhost.tuning.apply -e gpuhost_plan=%s</code>"
            "</p>" % _esc(file_name(doc)), "<h2>Groups (outliers first)</h2>"]
    for index, group in enumerate(doc["groups"], 1):
        kind = "refused" if group["refused"] else (
            "few" if len(group["hosts"]) <= few else "many")
        out.append('<section class="%s" id="g%d"><h3>%s</h3><ul>%s</ul>' % (
            kind, index, _esc(_title(index, group)),
            "".join("<li>%s</li>" % _esc(line) for line in group["summary"])))
        versus = _versus(group, doc["groups"])
        if versus:
            out.append('<p class="versus">Differs %s</p>' % _esc(versus))
        out.append('<details%s><summary>%d host%s (group %s)</summary><div class="hosts">%s'
                   "</div></details></section>" % (
                       " open" if len(group["hosts"]) <= few else "", len(group["hosts"]),
                       "" if len(group["hosts"]) == 1 else "s",
                       _esc(group["key"][:DIGEST_CHARS]),
                       "".join("<span>%s</span>" % _esc(h) for h in group["hosts"])))
    # each host name whole on its line (a name breaks at its hyphens otherwise)
    items = "".join('<li class="batch">%d host%s: %s</li>' % (
        len(b), "" if len(b) == 1 else "s",
        " ".join("<span>%s%s</span>" % (_esc(h), "," if i < len(b) - 1 else "")
                 for i, h in enumerate(b))) for b in doc["batches"])
    out.append("<h2>Rollout batches</h2><details><summary>%d batch%s</summary><ol>%s</ol>"
               "</details>" % (len(doc["batches"]), "" if len(doc["batches"]) == 1 else "es",
                               items))
    out.append("</body></html>")
    return "\n".join(out) + "\n"
