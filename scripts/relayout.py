"""Move plugins/module_utils into its sub-packages by layer and rewrite every reference.

    python3 scripts/relayout.py --check   # print what it would do, change nothing
    python3 scripts/relayout.py           # do it (git mv, then rewrite files in place)

Re-runnable: a file already at its new place stays, and every reference to an old place
is rewritten wherever it is found (a branch merged later brings old imports back; run it
again). It fails (exit 2, naming them) when plugins/module_utils holds a flat file that
MAPPING does not place, a sub-folder that is no package of PACKAGES, or a move whose target
is already taken: a file added by another branch is never silently left flat.

What is rewritten, in the text files of plugins/, tests/, scripts/, bench/, lab/,
molecule/, extensions/, roles/, playbooks/, docs/, changelogs/fragments/, README.md and
Makefile (this script, its test and the goldens under tests/unit/golden are left alone:
regenerate those):

- ``from <collection>.plugins.module_utils import a, b as c`` (also ``from
  ..module_utils import``): split per new package, a renamed file imported under its old
  name (``from ...module_utils.readers import kernel_log as kernlog``) so code using it
  is unchanged;
- dotted names ``module_utils.<old>`` (imports, ``mock.patch``/``monkeypatch`` strings,
  ``importlib`` and ``python3 -m`` strings, the import graph test's node names);
- paths ``module_utils/<old>.py``; in Python a string literal that is just ``"<old>.py"``
  (the import graph test's OVERSIZE keys and the tests' paths below module_utils); a bare
  ``<old>.py`` in prose only where no file of the new layout has that name (``kernlog.py``
  yes, ``facts.py`` no: it may name the moved file);
- a one-line ``from`` import that became longer than 100 characters is wrapped;
- inside the package ONHOST (the host-side programs) imports of its own files become
  relative (``from . import hostfs``), so its byte-for-byte copies need no fallbacks;
- a test file that mirrors a module_utils file,
  ``tests/unit/plugins/module_utils/test_<old stem>.py``, moves to
  ``tests/unit/plugins/module_utils/<package>/test_<new stem>.py`` (derived from MAPPING;
  each such test folder is a package, so its names may repeat those of
  tests/unit/plugins/modules), and references to its path are rewritten.
"""

import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UTILS = "plugins/module_utils"
TESTS = "tests/unit/plugins/module_utils"
COLLECTION = "ansible_collections.gpuhost.tuning.plugins"

# The packages of module_utils, by layer (docs/architecture.md, "Layout").
PACKAGES = {
    "core": "what every layer uses: the command runner, option specs and checks, the run "
            "lock, policy, command outputs, the console text",
    "onhost": "the host-side programs that run without Ansible (the boot-time program, "
              "the scheduled audit) and the stdlib-only files the boot program imports; "
              "its files import each other relatively",
    "readers": "what a host is: read-only readers of sysfs, procfs, config files and "
               "command outputs, and the audit's facts",
    "checks": "the audit's checks, one file per report column, and the audit run",
    "writers": "what changes a host outside the tune parts: the modules' write paths and "
               "the unit installers",
    "parts": "the tune parts, their registry, the tune pass and the snapshot",
    "fleet": "the fleet checks, run once per report over the documents",
    "output": "reports, metrics and the rollout summary: rendering and writing",
}
# The package whose files import each other relatively.
ONHOST = "onhost"

# old path below module_utils -> new path below module_utils
MAPPING = {
    # core
    "argspec.py": "core/argspec.py",
    "cmdout.py": "core/cmdout.py",
    "policy.py": "core/policy.py",
    "runlock.py": "core/run_lock.py",
    "runner.py": "core/runner.py",
    "text.py": "core/text.py",
    "validate.py": "core/validate.py",
    "deprecated.py": "core/deprecated.py",
    "zipload.py": "core/zipload.py",
    # the host-side programs and what the boot-time program imports
    "audit_program.py": "onhost/audit_program.py",
    "bootapply.py": "onhost/boot_program.py",
    "cpu.py": "onhost/cpu.py",
    "cpu_write.py": "onhost/cpuidle_state.py",
    "hostfs.py": "onhost/hostfs.py",
    "hostfs_base.py": "onhost/hostfs_base.py",
    "hostfs_root.py": "onhost/hostfs_root.py",
    "hostfs_write.py": "onhost/hostfs_write.py",
    "passthrough.py": "onhost/passthrough.py",
    "pci.py": "onhost/pci.py",
    "pci_write.py": "onhost/setpci_maxreadreq.py",
    # readers
    "aer.py": "readers/aer.py",
    "bootcfg.py": "readers/kernel_cmdline.py",
    "bootloader.py": "readers/boot_entries.py",
    "bootloader_entries.py": "readers/boot_entries_run.py",
    "bootloader_grub.py": "readers/boot_grub.py",
    "bootloader_sdboot.py": "readers/boot_sdboot.py",
    "capture.py": "readers/host_capture.py",
    "cuda.py": "readers/cuda.py",
    "cuda_child.py": "readers/cuda_child.py",
    "cuda_driver.py": "readers/cuda_driver.py",
    "pci_p2p.py": "readers/pci_p2p.py",
    "devnodes.py": "readers/device_nodes.py",
    "dkms.py": "readers/dkms.py",
    "dkms_conf.py": "readers/dkms_conf.py",
    "drift.py": "readers/container_driver.py",
    "driver_records.py": "readers/driver_records.py",
    "driver_state.py": "readers/driver_state.py",
    "fabric.py": "readers/fabric_manager.py",
    "facts.py": "readers/facts.py",
    "gpuhealth.py": "readers/gpu_health.py",
    "gpuuse.py": "readers/gpu_use.py",
    "hostlog.py": "readers/host_health.py",
    "initramfs.py": "readers/initramfs_check.py",
    "kernel.py": "readers/kernels.py",
    "kernelstate.py": "readers/kernel_state.py",
    "kernlog.py": "readers/kernel_log.py",
    "lxc.py": "readers/lxc.py",
    "nvlink.py": "readers/nvlink.py",
    "nvsmi.py": "readers/nvsmi.py",
    "p2p.py": "readers/p2p.py",
    "placement.py": "readers/placement.py",
    "procfs.py": "readers/procfs.py",
    "sysctl.py": "readers/sysctl.py",
    "sysinfo.py": "readers/sysinfo.py",
    "unpack.py": "readers/capture_unpack.py",
    "verify.py": "readers/post_boot_verify.py",
    "vmgpu.py": "readers/vmgpu.py",
    "vmverify.py": "readers/vm_verify.py",
    "xid.py": "readers/xid.py",
    # the audit run, beside its checks
    "audit.py": "checks/run.py",
    # writers
    "audittimer.py": "writers/audit_timer.py",
    "bootcfg_write.py": "writers/kernel_cmdline.py",
    "bootservice.py": "writers/boot_service.py",
    "container.py": "writers/container.py",
    "dkms_write.py": "writers/dkms_build.py",
    "driver_stage.py": "writers/driver_stage.py",
    "driver_stage_files.py": "writers/driver_stage_files.py",
    "lxc_write.py": "writers/lxc.py",
    "placement_write.py": "writers/placement.py",
    "sysctl_write.py": "writers/sysctl_settings.py",
    "unitinstall.py": "writers/unitinstall.py",
    # tune parts
    "bandwidth.py": "parts/bandwidth.py",
    "devnodes_write.py": "parts/device_nodes.py",
    "latency.py": "parts/latency.py",
    "measured.py": "parts/measured.py",
    "peermem.py": "parts/peermem.py",
    "snapshot.py": "parts/snapshot.py",
    "tune.py": "parts/tune.py",
    # output
    "metrics.py": "output/metrics.py",
    "report.py": "output/report.py",
    "rollout.py": "output/rollout.py",
}

# Where references are rewritten (folders walked, files as they are).
ROOTS = ("plugins", "tests", "scripts", "bench", "lab", "molecule", "extensions", "roles",
         "playbooks", "docs", "changelogs/fragments", "README.md", "Makefile")
SKIP = ("tests/output", "tests/unit/golden", "scripts/relayout.py",
        "tests/unit/test_relayout.py")
TEXT_EXT = (".py", ".md", ".rst", ".yml", ".yaml", ".sh", ".j2", ".txt", ".cfg", ".ini",
            ".nhc", ".toml")
MAX_TEXT = 4 << 20
LINE = 100


class Failure(Exception):
    pass


def stem(rel):
    return os.path.basename(rel)[:-3]


def dotted(rel):
    return rel[:-3].replace("/", ".")


def git(*args):
    subprocess.run(["git"] + list(args), cwd=REPO, check=True, timeout=120)


# ---------------------------------------------------------------------------------------
# what is where


def unplaced():
    """Flat files MAPPING does not place, and sub-folders that are no package."""
    problems = []
    base = os.path.join(REPO, UTILS)
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if os.path.isdir(path):
            if name not in PACKAGES and name != "__pycache__":
                problems.append("%s/%s/: a folder that is no package of PACKAGES" % (UTILS, name))
        elif name.endswith(".py") and name != "__init__.py" and name not in MAPPING:
            problems.append("%s/%s: not placed by MAPPING (add it)" % (UTILS, name))
    return problems


def moves():
    """``[(old, new)]`` repo-relative paths still to move: module_utils files and the test
    files that mirror them."""
    out, problems = [], []
    for old, new in sorted(MAPPING.items()):
        pairs = [(UTILS + "/" + old, UTILS + "/" + new),
                 (TESTS + "/test_" + old,
                  "%s/%s/test_%s.py" % (TESTS, os.path.dirname(new), stem(new)))]
        for src, dst in pairs:
            if not os.path.lexists(os.path.join(REPO, src)):
                continue
            if os.path.lexists(os.path.join(REPO, dst)):
                problems.append("%s -> %s: the target exists already" % (src, dst))
                continue
            out.append((src, dst))
    return out, problems


def markers():
    """Package markers still missing: every package folder of module_utils that MAPPING
    fills, and the test folders that mirrored tests move into."""
    out = []
    for new in sorted(set(MAPPING.values())):
        folder = os.path.dirname(new)
        for path in (UTILS + "/" + folder + "/__init__.py",):
            if not os.path.exists(os.path.join(REPO, path)) and path not in out:
                out.append(path)
    return out


def test_markers(planned):
    out = []
    for _src, dst in planned:
        if dst.startswith(TESTS + "/"):
            path = os.path.dirname(dst) + "/__init__.py"
            if not os.path.exists(os.path.join(REPO, path)) and path not in out:
                out.append(path)
    return out


# ---------------------------------------------------------------------------------------
# rewriting

_OLD = dict((stem(old), new) for old, new in MAPPING.items())
_OLD_NAMES = "|".join(sorted((re.escape(s) for s in _OLD), key=len, reverse=True))
_FROM = re.compile(
    r"^(?P<indent>[ \t]*)from[ \t]+(?P<mod>(?:ansible_collections\.gpuhost\.tuning\.plugins"
    r"|\.+)\.?module_utils)[ \t]+import[ \t]+(?P<body>\([^)]*\)|[^\n]*)$", re.M)
_DOTTED = re.compile(r"(?<![\w])module_utils\.(%s)(?![\w])" % _OLD_NAMES)
_PATH = re.compile(r"(?<![\w])module_utils/(%s)\.py(?![\w])" % _OLD_NAMES)
_LITERAL = re.compile(r"""(?P<q>["'])(%s)\.py(?P=q)""" % _OLD_NAMES)


def _new_basenames():
    """File names in the new layout: MAPPING's targets and the package files on disk."""
    names = set(os.path.basename(new) for new in MAPPING.values())
    for pkg in PACKAGES:
        folder = os.path.join(REPO, UTILS, pkg)
        if os.path.isdir(folder):
            names.update(n for n in os.listdir(folder) if n.endswith(".py"))
    return names


# A bare ``<old>.py`` in prose is rewritten only where no file of the new layout has that
# name (``kernlog.py``, ``cpu_write.py``): ``facts.py`` or ``verify.py`` in a sentence may
# name a file of the new layout and is left as it is.
_RENAMED = sorted((s for s in _OLD if s + ".py" not in _new_basenames()), key=len,
                  reverse=True)
_BARE = re.compile(r"(?<![\w/.-])(%s)\.py(?![\w])" % "|".join(re.escape(s) for s in _RENAMED))
_TEST = re.compile(r"(?<![\w])%s/test_(%s)\.py(?![\w])" % (re.escape(TESTS), _OLD_NAMES))


def _names(body):
    """``(names, comment)`` of an import's body: ``[(name, alias or None)]`` and the first
    comment in it (``# noqa: F401`` is kept on every statement made from it)."""
    comment = ""
    items = []
    text = body.strip()
    if text.startswith("("):
        text = text[1:-1]
    for line in text.split("\n"):
        if "#" in line:
            line, note = line.split("#", 1)
            comment = comment or "#" + note.rstrip()
        for part in line.split(","):
            part = part.strip()
            if not part:
                continue
            if " as " in part:
                name, alias = [p.strip() for p in part.split(" as ", 1)]
            else:
                name, alias = part, None
            items.append((name, alias))
    return items, comment


def _statement(indent, mod, items, comment):
    """One ``from mod import ...``: on one line when it fits, else one name per line."""
    words = ["%s as %s" % (n, a) if a and a != n else n for n, a in items]
    note = "  " + comment if comment else ""
    line = "%sfrom %s import %s%s" % (indent, mod, ", ".join(words), note)
    if len(line) - (len(note) if comment.startswith("# noqa") else 0) <= LINE:
        return line     # a pragma does not count (ruff, pycodestyle)
    body = "\n".join("%s    %s," % (indent, w) for w in words)
    return "%sfrom %s import (%s\n%s\n%s)" % (indent, mod, note, body, indent)


def _split_from(match):
    indent, mod, body = match.group("indent"), match.group("mod"), match.group("body")
    if not body.strip().startswith("(") and body.rstrip().endswith("\\"):
        return match.group(0)
    items, comment = _names(body)
    if not any(name in _OLD for name, _alias in items):
        return match.group(0)
    keep, by_pkg = [], {}
    for name, alias in items:
        new = _OLD.get(name)
        if new is None:
            keep.append((name, alias))
            continue
        pkg, new_stem = os.path.dirname(new), stem(new)
        by_pkg.setdefault(pkg, []).append((new_stem, alias or name))
    out = []
    if keep:
        out.append(_statement(indent, mod, keep, comment))
    for pkg in sorted(by_pkg):
        out.append(_statement(indent, mod + "." + pkg, by_pkg[pkg], comment))
    return "\n".join(out)


_ONE_LINE = re.compile(r"^(?P<indent>[ \t]*)from[ \t]+(?P<mod>[\w.]+)[ \t]+import[ \t]+"
                       r"(?P<body>[^(\n][^\n]*)$", re.M)


def _wrap(match):
    """A one-line ``from`` import the rewrite made longer than LINE, one name per line."""
    items, comment = _names(match.group("body"))
    code = match.group(0)
    if comment.startswith("# noqa"):     # a pragma does not count (ruff, pycodestyle)
        code = code[:code.rindex("#")].rstrip()
    if len(code) <= LINE or match.group("body").rstrip().endswith("\\"):
        return match.group(0)
    return _statement(match.group("indent"), match.group("mod"), items, comment)


def _relative(text):
    """Inside ONHOST: its own files imported relatively."""
    absolute = COLLECTION + ".module_utils." + ONHOST
    text = re.sub(r"(?m)^([ \t]*)from[ \t]+%s\.(\w+)[ \t]+import" % re.escape(absolute),
                  r"\1from .\2 import", text)
    text = re.sub(r"(?m)^([ \t]*)from[ \t]+%s[ \t]+import" % re.escape(absolute),
                  r"\1from . import", text)
    return text


def rewrite(text, rel):
    """The text of repo file ``rel`` with every old reference rewritten."""
    out = text
    if rel.endswith(".py"):
        out = _FROM.sub(_split_from, out)
    out = _TEST.sub(lambda m: "%s/%s/test_%s.py" % (
        TESTS, os.path.dirname(_OLD[m.group(1)]), stem(_OLD[m.group(1)])), out)
    out = _DOTTED.sub(lambda m: "module_utils." + dotted(_OLD[m.group(1)]), out)
    out = _PATH.sub(lambda m: "module_utils/" + _OLD[m.group(1)], out)
    if rel.endswith(".py"):     # a path below module_utils as a string of its own
        out = _LITERAL.sub(lambda m: m.group("q") + _OLD[m.group(2)] + m.group("q"), out)
    out = _BARE.sub(lambda m: _OLD[m.group(1)], out)
    if rel.startswith("%s/%s/" % (UTILS, ONHOST)) and rel.endswith(".py"):
        out = _relative(out)
    if rel.endswith(".py") and out != text:
        out = _ONE_LINE.sub(_wrap, out)
    return out


def text_files():
    for top in ROOTS:
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield top
            continue
        for folder, dirs, names in os.walk(path):
            rel_folder = os.path.relpath(folder, REPO)
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", ".pytest_cache")
                             and not (rel_folder + "/" + d).startswith(SKIP))
            for name in sorted(names):
                rel = rel_folder + "/" + name
                if rel.startswith(SKIP) or os.path.islink(os.path.join(REPO, rel)):
                    continue
                if name.endswith(TEXT_EXT) or "." not in name:
                    yield rel


def read_text(rel):
    path = os.path.join(REPO, rel)
    if os.path.getsize(path) > MAX_TEXT:
        return None
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--check", action="store_true", help="print what it would do")
    args = parser.parse_args(argv)
    problems = unplaced()
    planned, conflicts = moves()
    problems += conflicts
    if problems:
        sys.stderr.write("relayout: nothing done:\n" + "".join("  %s\n" % p for p in problems))
        return 2
    new_markers = markers() + test_markers(planned)
    prefix = "would " if args.check else ""
    for path in new_markers:
        print("%screate %s" % (prefix, path))
        if not args.check:
            os.makedirs(os.path.dirname(os.path.join(REPO, path)), exist_ok=True)
            with open(os.path.join(REPO, path), "w") as handle:
                if path.startswith(UTILS):
                    handle.write('"""%s."""\n' % PACKAGES[path.split("/")[2]].capitalize())
    for src, dst in planned:
        print("%sgit mv %s %s" % (prefix, src, dst))
        if not args.check:
            os.makedirs(os.path.join(REPO, os.path.dirname(dst)), exist_ok=True)
            git("mv", src, dst)
    # after the moves the files are read where they are now; in --check where they were,
    # each rewritten as it will be at its new place
    where = dict(planned) if args.check else {}
    changed = 0
    for rel in text_files():
        text = read_text(rel)
        if text is None:
            continue
        new = rewrite(text, where.get(rel, rel))
        if new != text:
            changed += 1
            print("%srewrite %s" % (prefix, where.get(rel, rel)))
            if not args.check:
                with open(os.path.join(REPO, rel), "w", encoding="utf-8") as handle:
                    handle.write(new)
    if not planned and not changed and not new_markers:
        print("relayout: nothing to do (every file placed, no old reference left)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Failure, subprocess.CalledProcessError) as exc:
        sys.stderr.write("relayout: %s\n" % exc)
        sys.exit(2)
