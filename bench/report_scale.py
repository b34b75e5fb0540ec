# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpuhost.tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTML report at fleet scale: size and render time of 1,000 and 10,000 host documents.

  .venv/bin/python bench/report_scale.py [--hosts 1000 10000] [--out DIR] [--chromium]

The documents are the test fixtures' real audits (tests/fixtures/hosts.py: the seed host
before tuning, the tuned host, the H200 VM host; audited by engines.audit.audit.audit exactly as
host_audit does), cloned under fleet names: per 100 hosts 70 tuned, 20 seed, 5 VM hosts,
3 unreachable, 1 failed and 1 skipped (documents.not_audited_document, with Ansible's own
messages), spread over 4 clusters and 40 racks (inventory groups). Per size it prints one
JSON line: the Python render of page.html_files (seconds, best of --repeat), the size of
index.html, of the largest and of all host pages, and with --chromium the time headless
Chromium takes to load index.html at 1,400 px: from navigation start to the page parsed,
styled and laid out (measured in the page), and the wall time of the whole browser run
(best of --repeat). --out DIR keeps the files of the largest size (DIR/<hosts>/).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TESTS = os.path.join(REPO, "tests")
LINKS = os.path.join(TESTS, "output", "pathlink")


def _importable():
    """The collection importable from this checkout (the link tests/conftest.py makes)."""
    link = os.path.join(LINKS, "ansible_collections", "gpuhost", "tuning")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        try:
            os.symlink(REPO, link)
        except FileExistsError:
            pass
    for path in (LINKS, TESTS):
        if path not in sys.path:
            sys.path.insert(0, path)


UNREACHABLE = ("Failed to connect to the host via ssh: ssh: connect to host %s port 22: "
               "Connection timed out")
FAILED = ("gpuhost.tuning.host_audit: cannot read %s/sys/bus/pci/devices: [Errno 5] "
          "Input/output error")
SKIPPED = "skipped: gpuhost_audit_enabled is false for this host"


def fixture_documents(workdir):
    """``{kind: document}`` of the three fixture hosts, audited once."""
    _importable()
    from fixtures import hosts  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit  # noqa
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import documents  # noqa
    wanted = hosts.common_wanted()
    out = {}
    for kind, build in (("seed", hosts.seed_host), ("tuned", hosts.tuned_host),
                        ("vm", hosts.vm_host)):
        root = os.path.join(workdir, kind)
        os.makedirs(root)
        build(root)
        out[kind] = documents.host_document(kind, audit.audit(root, dict(wanted, host=kind)))
    return out


PLAN = ["tuned"] * 70 + ["seed"] * 20 + ["vm"] * 5 + ["unreachable"] * 3 + ["failed", "skipped"]


def fleet_documents(base, count):
    """``count`` documents: the fixture ones under fleet names, mixed as ``PLAN`` says."""
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import documents  # noqa
    out = []
    for index in range(count):
        kind = PLAN[(index * 37) % len(PLAN)]  # spread, not in blocks
        host = "pve-c%d-gpu%05d.dc1.example.net" % (index % 4, index)
        groups = ["gpuhosts", "cluster_%d" % (index % 4), "rack_%02d" % (index % 40)]
        if kind in base:
            doc = dict(base[kind], host=host, groups=groups)
            doc["findings"] = [dict(f) for f in base[kind]["findings"]]
        else:
            error = {"unreachable": UNREACHABLE % ("10.20.%d.%d" % (index // 250, index % 250)),
                     "failed": FAILED % "/", "skipped": SKIPPED}[kind]
            doc = documents.not_audited_document(
                host, {"status": kind, "error": error, "last_seen": "2026-12-04T03:10:00Z"},
                groups={host: groups}, attempted_at="2026-12-05T03:10:00Z")
        out.append(doc)
    return out


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_args(profile, width=1400, height=1000):
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--user-data-dir=%s" % profile, "--window-size=%d,%d" % (width, height)]


# Appended to a copy of the page: the time from navigation start to the page parsed, styled
# and laid out (reading a layout value forces it), in milliseconds, written into the DOM.
TIMING = ("<script>document.body.getBoundingClientRect();var t=document.createElement('pre');"
          "t.id='timing';t.textContent=Math.round(performance.now());"
          "document.body.appendChild(t);</script></body>")


def load_time(browser, path, workdir):
    """``(in_page, wall)`` seconds of headless Chromium loading ``path`` at 1,400 px:
    navigation start to laid out (measured in the page), and the wall time of the whole
    --dump-dom run (browser start included)."""
    copy = os.path.join(workdir, "timed-" + os.path.basename(path))
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(copy, "w", encoding="utf-8") as handle:
        handle.write(text.replace("</body>", TIMING))
    start = time.monotonic()
    proc = subprocess.run([browser] + chromium_args(os.path.join(workdir, "profile")) +
                          ["--dump-dom", "file://%s" % copy],
                          capture_output=True, text=True, check=False, timeout=600)
    wall = time.monotonic() - start
    os.unlink(copy)
    found = re.search(r'<pre id="timing">(\d+)</pre>', proc.stdout)
    return (int(found.group(1)) / 1000.0 if found else None), wall


def measure(base, count, repeat, browser, workdir, keep=None):
    from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import page  # noqa
    docs = fleet_documents(base, count)
    best = None
    for _run in range(repeat):
        start = time.monotonic()
        files = page.html_files(docs, "2026-12-05 03:12:00Z", 4096)
        took = time.monotonic() - start
        best = took if best is None else min(best, took)
    sizes = dict((name, len(text.encode("utf-8"))) for name, text in files.items())
    index = sizes.pop("index.html")
    row = {"hosts": count, "render_s": round(best, 2), "files": len(files),
           "index_bytes": index, "host_page_max_bytes": max(sizes.values()),
           "host_pages_bytes": sum(sizes.values())}
    folder = keep or os.path.join(workdir, "report-%d" % count)
    os.makedirs(folder, exist_ok=True)
    start = time.monotonic()
    for name, text in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    row["write_s"] = round(time.monotonic() - start, 2)
    if browser:
        runs = [load_time(browser, os.path.join(folder, "index.html"), workdir)
                for _run in range(repeat)]
        row["chromium_index_laid_out_s"] = min(run[0] for run in runs)
        row["chromium_index_wall_s"] = round(min(run[1] for run in runs), 2)
    if not keep:
        shutil.rmtree(folder)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chromium", action="store_true", help="also time Chromium's load")
    parser.add_argument("--out", help="keep the files of the largest size here")
    args = parser.parse_args(argv)
    browser = chromium() if args.chromium else None
    if args.chromium and not browser:
        parser.error("chromium is not installed (scripts/apt-ensure.sh chromium)")
    workdir = tempfile.mkdtemp(prefix="report-scale-")
    try:
        base = fixture_documents(workdir)
        for count in args.hosts:
            keep = None
            if args.out and count == max(args.hosts):
                keep = os.path.join(args.out, str(count))
            print(json.dumps(measure(base, count, args.repeat, browser, workdir, keep)),
                  flush=True)
    finally:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
