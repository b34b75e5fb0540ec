# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpuhost.tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_audit's CPU per host on the seed tree, two versions of the collection side by side.

  python bench/audit_cpu.py [--runs 10] [--python /usr/bin/python3] --ansible-path DIR REV...

Each REV (a commit, or "." for the working tree) is exported with `git archive` and zipped
with the ansible package (ansible-core) as source,
the way AnsiballZ ships a module (no bytecode: the host's zipimport compiles every
imported file, twice on 3.11 and 3.13), and the module is run from that zip as a host runs
it: `PYTHON -m ansible_collections.gpuhost.tuning.plugins.modules.host_audit args.json`
with the zip alone on PYTHONPATH and PYTHONDONTWRITEBYTECODE=1, against one seed tree
(tests/fixtures/hosts.py seed_host) as `root`. The versions alternate (A, B, A, B, ...) so
both see the same drift of a shared machine. Per
run: user+sys CPU of the child (getrusage), wall time, the load average. Prints one JSON
document: per REV the runs, the median and the minimum CPU.

PYTHON needs ansible-core importable (the venv's python, or the system python with
PYTHONPATH naming an ansible-core tree: --ansible-path). With --chroot DIR (a Debian 13
root from scripts/trixie-root.sh, for Python 3.13: `--chroot ROOT --python /usr/bin/python3
--ansible-path ROOT/opt/next-venv/lib/python3.13/site-packages`) the zips and the seed tree
are put under DIR/tmp and PYTHON (a path inside DIR) runs inside `chroot DIR` (no /proc or
/sys mounted there: the audit reads the seed tree only).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from fixtures.hosts import seed_host  # noqa: E402


def export(rev, dest):
    target = os.path.join(dest, "ansible_collections", "gpuhost", "tuning")
    os.makedirs(target)
    if rev == ".":
        files = subprocess.run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard",
                                "plugins"], capture_output=True, text=True,
                               check=True).stdout.split()
        subprocess.run(["tar", "-C", REPO, "-cf", os.path.join(dest, "t.tar")] + files,
                       check=True)
        subprocess.run(["tar", "-C", target, "-xf", os.path.join(dest, "t.tar")], check=True)
    else:
        archive = subprocess.run(["git", "-C", REPO, "archive", rev, "plugins"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-C", target, "-xf", "-"], input=archive, check=True)
    for sub in ("", "gpuhost"):
        open(os.path.join(dest, "ansible_collections", sub, "__init__.py"), "a").close()
    open(os.path.join(target, "__init__.py"), "a").close()
    return dest


def pack(dest, ansible_path, zip_path):
    """One zip as AnsiballZ's payload: the collection's plugins and the ansible package's
    .py files (AnsiballZ ships only the module_utils a module imports; a file that is never
    imported costs nothing here either)."""
    import zipfile
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as zf:
        for base, top in ((dest, "ansible_collections"), (ansible_path, "ansible")):
            for folder, _dirs, names in os.walk(os.path.join(base, top)):
                rel = os.path.relpath(folder, base)
                if "__pycache__" in rel:
                    continue
                if "__init__.py" not in names:     # zipimport wants them (AnsiballZ adds them)
                    zf.writestr(os.path.join(rel, "__init__.py"), "")
                for name in names:      # only what the module imports is compiled
                    if name.endswith(".py"):
                        zf.write(os.path.join(folder, name), os.path.join(rel, name))
    return zip_path


def one(python, path, args, env_extra, chroot=""):
    env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", **env_extra)
    inner = (lambda p: p[len(chroot):]) if chroot else (lambda p: p)  # noqa: E731
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.monotonic()
    env["PYTHONPATH"] = inner(path)
    out = subprocess.run((["chroot", chroot] if chroot else []) + [
        python, "-m", "ansible_collections.gpuhost.tuning.plugins.modules.host_audit",
        inner(args)], capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        result = json.loads(out.stdout)
    except ValueError:
        raise SystemExit("host_audit printed no result (rc %s): %s" % (
            out.returncode, out.stderr.strip()[-2000:]))
    if result.get("failed"):
        raise SystemExit("host_audit failed: %s" % result.get("msg"))
    return {"cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                           4), "wall_s": round(wall, 4), "load": load,
            "findings": len(result["audit"]["findings"])}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    parser.add_argument("--ansible-path", required=True,
                        help="the folder holding the ansible package (ansible-core) whose "
                             "module_utils go into the zip (a path outside any --chroot)")
    parser.add_argument("--chroot", default="")
    parser.add_argument("revs", nargs="+")
    args = parser.parse_args()
    chroot = os.path.abspath(args.chroot) if args.chroot else ""
    work = tempfile.mkdtemp(prefix="gpuhost-auditcpu.",
                            dir=os.path.join(chroot, "tmp") if chroot else None)
    inner = (lambda p: p[len(chroot):]) if chroot else (lambda p: p)  # noqa: E731
    try:
        root = os.path.join(work, "seed")
        seed_host(root)
        argfile = os.path.join(work, "args.json")
        with open(argfile, "w") as handle:
            json.dump({"ANSIBLE_MODULE_ARGS": {"root": inner(root)}}, handle)
        paths = {}
        for index, rev in enumerate(args.revs):
            path = export(rev, os.path.join(work, "rev%d" % index))
            paths[rev] = pack(path, args.ansible_path, path + ".zip")
        runs = dict((rev, []) for rev in args.revs)
        for rev in args.revs:                       # one warm-up each (page cache)
            one(args.python, paths[rev], argfile, {}, chroot)
        for _run in range(args.runs):
            for rev in args.revs:
                runs[rev].append(one(args.python, paths[rev], argfile, {}, chroot))
        version = subprocess.run((["chroot", chroot] if chroot else []) + [
            args.python, "--version"], capture_output=True, text=True, check=False).stdout.strip()
        report = {"python": version, "chroot": chroot, "runs_each": args.runs, "revs": {}}
        for rev, items in runs.items():
            cpus = [r["cpu_s"] for r in items]
            report["revs"][rev] = {
                "commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short",
                                          "HEAD" if rev == "." else rev],
                                         capture_output=True, text=True,
                                         check=False).stdout.strip(),
                "cpu_median_s": round(statistics.median(cpus), 4),
                "cpu_min_s": min(cpus), "cpu_max_s": max(cpus),
                "load_range": [min(r["load"] for r in items), max(r["load"] for r in items)],
                "findings": items[0]["findings"], "runs": items}
        print(json.dumps(report, indent=1))
    finally:
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
