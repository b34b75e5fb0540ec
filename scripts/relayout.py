"""Move plugins/module_utils into layers and subjects, and rewrite every reference.

    python3 scripts/relayout.py --check   # print what it would do, change nothing
    python3 scripts/relayout.py           # do it (git mv, then rewrite files in place)

The layout (docs/architecture.md, "Layout"): ``platform`` <- ``subjects/<subject>`` <-
``engines/<engine>`` <- ``programs`` <- modules and plugins. MAPPING places every file of
the old layout; LAYOUT describes each package of the new one.

Re-runnable: a file already at its new place stays, and every reference to an old place is
rewritten wherever it is found (a branch merged later brings old imports back; run it
again). It fails (exit 2, naming them) when plugins/module_utils holds a file of an old
package that MAPPING does not place, or a move whose target is already taken.

What is rewritten, in the text files of plugins/, tests/, scripts/, bench/, lab/,
molecule/, extensions/, roles/, playbooks/, docs/, changelogs/fragments/, README.md and
Makefile (this script, its test and the goldens under tests/unit/golden are left alone):

- Python imports of module_utils files (read with ``ast``): each ``from <package> import
  <file>`` and ``from <package>.<file> import <name>`` becomes the import of the file's new
  place; a file imported as a module is bound under its own (new) name, never an alias:
  an old alias or an old file name is renamed in the code that uses it (``tokenize``: the
  names not after a dot and not a keyword argument). Where the new name is already used for
  something else in that file the alias stays, and the script says so (exit 0: fix by hand);
- dotted names ``module_utils.<old package>.<old file>`` (``mock.patch`` and
  ``monkeypatch`` strings, ``python3 -m``, prose) and paths ``module_utils/<old>.py``;
- test files that mirror a module_utils file move with it
  (``tests/unit/plugins/module_utils/<new folder>/test_<new stem>.py``), and TEST_MOVES
  places the others; each test folder is a package.
"""

import argparse
import ast
import io
import keyword
import os
import re
import subprocess
import sys
import tokenize

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UTILS = "plugins/module_utils"
TESTS = "tests/unit/plugins/module_utils"
COLLECTION = "ansible_collections.gpuhost.tuning.plugins"
UTILS_DOTTED = COLLECTION + ".module_utils"

# The packages of the new layout, by layer, with what each holds (each one's __init__.py
# docstring). A subject is one folder: what the host is (its readers), what the audit says
# of it (its checks, ``*_check.py``), what changes it (its writers and tune parts).
LAYOUT = {
    "platform": "what every layer uses: host file access under a root (hostfs), the "
                "command runner and command outputs, bounded reads, argument specs and "
                "validation, the findings vocabulary, unit install, the run lock, the "
                "snapshot store",
    "subjects": "one folder per subject of the host: its readers, its checks (*_check.py), "
                "its writers and tune parts; a subject imports platform and lower subjects",
    "subjects/pcie": "PCIe: config space, MRRS, AER, peer-to-peer paths, device owners",
    "subjects/cpu": "CPU: frequency drivers, idle states, NUMA balancing",
    "subjects/sysctl": "kernel sysctl settings",
    "subjects/host": "what the host is: procfs, system info, guest or node, failed readers",
    "subjects/lxc": "LXC container configs and their GPU device rules",
    "subjects/device_nodes": "the /dev nodes GPU containers bind, and their boot-time unit",
    "subjects/placement": "GPU NUMA placement of containers",
    "subjects/passthrough": "GPUs passed to VMs: VM configs, vfio, verification",
    "subjects/boot": "kernels, the kernel command line, boot entries, initramfs",
    "subjects/dkms": "DKMS modules and their builds",
    "subjects/driver": "the NVIDIA driver on the host and in containers, and its upgrade",
    "subjects/fabric_manager": "NVIDIA Fabric Manager",
    "subjects/nvlink": "NVLink state and errors",
    "subjects/peermem": "nvidia_peermem and the NVIDIA module settings",
    "subjects/cuda": "the CUDA probe, its measured tune parts, CUDA inside containers",
    "subjects/health": "GPU and host health: nvidia-smi, the kernel log, XIDs, EDAC",
    "engines": "what runs the subjects: the audit, the tune, the fleet checks, the reports",
    "engines/audit": "the audit: the facts read once, the check registry, the run, capture",
    "engines/tune": "the tune: the part registry, the loop, the snapshot, the boot program",
    "engines/fleet": "the fleet checks over one report's documents",
    "engines/report": "reports, metrics and the rollout summary: rendering and writing",
    "programs": "the host-side programs that run the engines without Ansible (the "
                "scheduled audit) and their installers",
}

# old path below module_utils -> new path below module_utils
MAPPING = {
    # platform
    "onhost/hostfs.py": "platform/hostfs.py",
    "onhost/hostfs_base.py": "platform/hostfs_base.py",
    "onhost/hostfs_root.py": "platform/hostfs_root.py",
    "onhost/hostfs_write.py": "platform/hostfs_write.py",
    "core/runner.py": "platform/runner.py",
    "core/cmdout.py": "platform/cmdout.py",
    "core/bounded.py": "platform/bounded.py",
    "core/deprecated.py": "platform/deprecated.py",
    "core/zipload.py": "platform/zipload.py",
    "core/run_lock.py": "platform/run_lock.py",
    "core/argspec.py": "platform/argspec.py",
    "core/validate.py": "platform/validate.py",
    "writers/unitinstall.py": "platform/unitinstall.py",
    "checks/base.py": "platform/findings.py",
    "fleet/base.py": "platform/fleet_findings.py",
    "parts/snapstore.py": "platform/snapstore.py",
    "readers/capture_unpack.py": "platform/capture_unpack.py",
    # subjects
    "onhost/pci.py": "subjects/pcie/pci.py",
    "onhost/setpci_maxreadreq.py": "subjects/pcie/setpci_maxreadreq.py",
    "onhost/passthrough.py": "subjects/pcie/device_owner.py",
    "readers/aer.py": "subjects/pcie/aer.py",
    "readers/pci_p2p.py": "subjects/pcie/pci_p2p.py",
    "readers/p2p.py": "subjects/pcie/p2p.py",
    "checks/pcie_aer.py": "subjects/pcie/pcie_aer_check.py",
    "checks/pcie_link.py": "subjects/pcie/pcie_link_check.py",
    "checks/pcie_mrrs.py": "subjects/pcie/pcie_mrrs_check.py",
    "checks/p2p.py": "subjects/pcie/p2p_check.py",
    "checks/gpu_driver.py": "subjects/pcie/gpu_driver_check.py",
    "fleet/aer_change.py": "subjects/pcie/aer_change.py",
    "onhost/cpu.py": "subjects/cpu/cpu.py",
    "onhost/cpuidle_state.py": "subjects/cpu/cpuidle_state.py",
    "checks/cpufreq.py": "subjects/cpu/cpufreq_check.py",
    "checks/cpuidle.py": "subjects/cpu/cpuidle_check.py",
    "checks/numa_balancing.py": "subjects/cpu/numa_balancing_check.py",
    "readers/sysctl.py": "subjects/sysctl/sysctl.py",
    "writers/sysctl_settings.py": "subjects/sysctl/sysctl_settings.py",
    "checks/sysctl.py": "subjects/sysctl/sysctl_check.py",
    "readers/procfs.py": "subjects/host/procfs.py",
    "readers/sysinfo.py": "subjects/host/sysinfo.py",
    "readers/virt.py": "subjects/host/virt.py",
    "checks/guest.py": "subjects/host/guest_check.py",
    "checks/errors.py": "subjects/host/errors_check.py",
    "readers/lxc.py": "subjects/lxc/lxc.py",
    "writers/lxc.py": "subjects/lxc/lxc_write.py",
    "checks/lxc.py": "subjects/lxc/lxc_check.py",
    "readers/device_nodes.py": "subjects/device_nodes/device_nodes.py",
    "parts/device_nodes.py": "subjects/device_nodes/device_nodes_part.py",
    "checks/device_nodes.py": "subjects/device_nodes/device_nodes_check.py",
    "readers/placement.py": "subjects/placement/placement.py",
    "writers/placement.py": "subjects/placement/placement_write.py",
    "checks/gpu_numa.py": "subjects/placement/gpu_numa_check.py",
    "checks/passthrough.py": "subjects/passthrough/passthrough_check.py",
    "readers/vmgpu.py": "subjects/passthrough/vmgpu.py",
    "readers/vm_verify.py": "subjects/passthrough/vm_verify.py",
    "readers/kernels.py": "subjects/boot/kernels.py",
    "readers/kernel_cmdline.py": "subjects/boot/kernel_cmdline.py",
    "writers/kernel_cmdline.py": "subjects/boot/kernel_cmdline_write.py",
    "readers/boot_entries.py": "subjects/boot/boot_entries.py",
    "readers/boot_entries_run.py": "subjects/boot/boot_entries_run.py",
    "readers/boot_grub.py": "subjects/boot/boot_grub.py",
    "readers/boot_sdboot.py": "subjects/boot/boot_sdboot.py",
    "readers/initramfs_check.py": "subjects/boot/initramfs_images.py",
    "readers/post_boot_verify.py": "subjects/boot/post_boot_verify.py",
    "checks/kernel.py": "subjects/boot/kernel_check.py",
    "readers/dkms.py": "subjects/dkms/dkms.py",
    "readers/dkms_conf.py": "subjects/dkms/dkms_conf.py",
    "writers/dkms_build.py": "subjects/dkms/dkms_build.py",
    "checks/dkms.py": "subjects/dkms/dkms_check.py",
    "readers/container_driver.py": "subjects/driver/container_driver.py",
    "readers/driver_records.py": "subjects/driver/driver_records.py",
    "readers/driver_state.py": "subjects/driver/driver_state.py",
    "readers/driver_kernel.py": "subjects/driver/driver_kernel.py",
    "readers/kernel_state.py": "subjects/driver/kernel_state.py",
    "readers/kmod_info.py": "subjects/driver/kmod_info.py",
    "writers/driver_stage.py": "subjects/driver/driver_stage.py",
    "writers/driver_stage_ct.py": "subjects/driver/driver_stage_ct.py",
    "writers/driver_stage_files.py": "subjects/driver/driver_stage_files.py",
    "fleet/drift.py": "subjects/driver/driver_drift.py",
    "readers/fabric_manager.py": "subjects/fabric_manager/fabric_manager.py",
    "checks/fabric_manager.py": "subjects/fabric_manager/fabric_manager_check.py",
    "readers/nvlink.py": "subjects/nvlink/nvlink.py",
    "checks/nvlink.py": "subjects/nvlink/nvlink_check.py",
    "parts/peermem.py": "subjects/peermem/peermem_part.py",
    "checks/nvidia.py": "subjects/peermem/nvidia_check.py",
    "readers/cuda.py": "subjects/cuda/cuda.py",
    "readers/cuda_child.py": "subjects/cuda/cuda_child.py",
    "readers/cuda_driver.py": "subjects/cuda/cuda_driver.py",
    "checks/cuda.py": "subjects/cuda/cuda_check.py",
    "parts/bandwidth.py": "subjects/cuda/bandwidth_part.py",
    "parts/latency.py": "subjects/cuda/latency_part.py",
    "parts/measured.py": "subjects/cuda/measured.py",
    "writers/container.py": "subjects/cuda/container.py",
    "readers/gpu_health.py": "subjects/health/gpu_health.py",
    "readers/nvsmi.py": "subjects/health/nvsmi.py",
    "readers/gpu_use.py": "subjects/health/gpu_use.py",
    "readers/host_health.py": "subjects/health/host_health.py",
    "readers/kernel_log.py": "subjects/health/kernel_log.py",
    "readers/xid.py": "subjects/health/xid.py",
    "core/policy.py": "subjects/health/policy.py",
    "checks/gpu_xid.py": "subjects/health/gpu_xid_check.py",
    "checks/gpu_state.py": "subjects/health/gpu_state_check.py",
    "checks/gpu_memory.py": "subjects/health/gpu_memory_check.py",
    "checks/gpu_use.py": "subjects/health/gpu_use_check.py",
    "checks/gpu_count.py": "subjects/health/gpu_count_check.py",
    "checks/host_health.py": "subjects/health/host_health_check.py",
    # engines
    "readers/facts.py": "engines/audit/facts.py",
    "checks/run.py": "engines/audit/audit.py",
    "checks/__init__.py": "engines/audit/check_registry.py",
    "readers/host_capture.py": "engines/audit/host_capture.py",
    "core/text.py": "engines/audit/text.py",
    "fleet/__init__.py": "engines/fleet/fleet_registry.py",
    "fleet/run.py": "engines/fleet/fleet_run.py",
    "parts/registry.py": "engines/tune/tune_registry.py",
    "parts/tune.py": "engines/tune/tune.py",
    "parts/sections.py": "engines/tune/sections.py",
    "parts/snapshot.py": "engines/tune/snapshot.py",
    "parts/verify.py": "engines/tune/verify_part.py",
    "onhost/boot_program.py": "engines/tune/boot_program.py",
    "writers/boot_service.py": "engines/tune/boot_service.py",
    "output/documents.py": "engines/report/documents.py",
    "output/files.py": "engines/report/files.py",
    "output/merge.py": "engines/report/merge.py",
    "output/merged.py": "engines/report/merged.py",
    "output/metrics.py": "engines/report/metrics.py",
    "output/page.py": "engines/report/page.py",
    "output/page_templates.py": "engines/report/page_templates.py",
    "output/reboot.py": "engines/report/reboot.py",
    "output/render.py": "engines/report/render.py",
    "output/report.py": "engines/report/report.py",
    "output/rollout.py": "engines/report/rollout.py",
    "output/summary.py": "engines/report/summary.py",
    "output/templates.py": "engines/report/templates.py",
    "output/tune.py": "engines/report/tune_doc.py",
    "output/views.py": "engines/report/views.py",
    # programs
    "onhost/audit_program.py": "programs/audit_program.py",
    "writers/audit_timer.py": "programs/audit_timer.py",
}
# The old packages: their markers go once every file is placed.
OLD_PACKAGES = ("checks", "core", "fleet", "onhost", "output", "parts", "readers", "writers")

# Test files that mirror no module_utils file of the old layout, and the old folders'
# conftest.py files (merged by hand into the module_utils test folder's conftest.py).
TEST_MOVES = {
    "output/test_not_audited.py": "engines/report/test_not_audited.py",
    "readers/test_driver_kernel_gates.py": "subjects/driver/test_driver_kernel_gates.py",
    "readers/test_driver_nvidia590.py": "subjects/driver/test_driver_nvidia590.py",
    "readers/test_kernels_pve92.py": "subjects/boot/test_kernels_pve92.py",
    "writers/test_driver_stage_nvidia590.py": "subjects/driver/test_driver_stage_nvidia590.py",
}

ROOTS = ("plugins", "tests", "scripts", "bench", "lab", "molecule", "extensions", "roles",
         "playbooks", "docs", "changelogs/fragments", "README.md", "Makefile")
SKIP = ("tests/output", "tests/unit/golden", "scripts/relayout.py",
        "tests/unit/test_relayout.py", "bench/out", "bench/results-peers")
TEXT_EXT = (".py", ".md", ".rst", ".yml", ".yaml", ".sh", ".j2", ".txt", ".cfg", ".ini",
            ".nhc", ".toml")
MAX_TEXT = 4 << 20
LINE = 100


class Failure(Exception):
    pass


def stem(rel):
    return os.path.basename(rel)[:-3]


def dotted(rel):
    """``a/b/c.py`` -> ``a.b.c``; ``a/__init__.py`` -> ``a``."""
    name = rel[:-3].replace("/", ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def git(*args):
    subprocess.run(["git"] + list(args), cwd=REPO, check=True, timeout=120)


# ---------------------------------------------------------------------------------------
# what is where


def unplaced():
    """Files of the old packages that MAPPING does not place."""
    problems = []
    for pkg in OLD_PACKAGES:
        folder = os.path.join(REPO, UTILS, pkg)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            rel = pkg + "/" + name
            if name.endswith(".py") and rel not in MAPPING and name != "__init__.py":
                problems.append("%s/%s: not placed by MAPPING (add it)" % (UTILS, rel))
    return problems


def _test_target(old, new):
    return "%s/%s/test_%s.py" % (TESTS, os.path.dirname(new), stem(new))


def moves():
    """``[(old, new)]`` repo-relative paths still to move: module_utils files and the test
    files that mirror them."""
    out, problems = [], []
    pairs = []
    for old, new in sorted(MAPPING.items()):
        pairs.append((UTILS + "/" + old, UTILS + "/" + new))
        if not old.endswith("__init__.py"):
            pairs.append(("%s/%s/test_%s.py" % (TESTS, os.path.dirname(old), stem(old)),
                          _test_target(old, new)))
    for old, new in sorted(TEST_MOVES.items()):
        pairs.append((TESTS + "/" + old, TESTS + "/" + new))
    for src, dst in pairs:
        if not os.path.lexists(os.path.join(REPO, src)):
            continue
        if os.path.lexists(os.path.join(REPO, dst)):
            problems.append("%s -> %s: the target exists already" % (src, dst))
            continue
        out.append((src, dst))
    return out, problems


def markers(planned):
    """Package markers still missing: every package of LAYOUT, and the test folders
    that tests move into."""
    out = []
    for pkg in LAYOUT:
        path = "%s/%s/__init__.py" % (UTILS, pkg)
        if not os.path.exists(os.path.join(REPO, path)):
            out.append(path)
    for _src, dst in planned:
        if not dst.startswith(TESTS + "/"):
            continue
        folder = os.path.dirname(dst)
        while folder != TESTS:
            path = folder + "/__init__.py"
            if not os.path.exists(os.path.join(REPO, path)) and path not in out:
                out.append(path)
            folder = os.path.dirname(folder)
    return out


# ---------------------------------------------------------------------------------------
# rewriting

# old dotted name below module_utils -> new one
_DOTTED_MAP = dict((dotted(old), dotted(new)) for old, new in MAPPING.items())
_DOTTED_OLD = sorted(_DOTTED_MAP, key=len, reverse=True)
_DOTTED_RE = re.compile(r"(?<![\w])module_utils\.(%s)(?![\w])"
                        % "|".join(re.escape(n) for n in _DOTTED_OLD))
_PATH_MAP = dict((old[:-3], new[:-3]) for old, new in MAPPING.items()
                 if not old.endswith("__init__.py"))
_PATH_RE = re.compile(r"(?<![\w])module_utils/(%s)\.py(?![\w])"
                      % "|".join(re.escape(n) for n in sorted(_PATH_MAP, key=len,
                                                              reverse=True)))
# short forms: ``onhost/pci.py`` and ``onhost.pci`` (not after a word, a dot or a slash)
_SHORT_PATH_RE = re.compile(r"(?<![\w/.-])(%s)\.py(?![\w])" % "|".join(
    re.escape(n) for n in sorted(_PATH_MAP, key=len, reverse=True)))
_SHORT_DOTTED_RE = re.compile(r"(?<![\w./-])(%s)(?![\w])" % "|".join(
    re.escape(n) for n in _DOTTED_OLD if "." in n))
_TEST_MAP = {}
for _old, _new in MAPPING.items():
    if not _old.endswith("__init__.py"):
        _TEST_MAP["%s/test_%s.py" % (os.path.dirname(_old), stem(_old))] = \
            _test_target(_old, _new)[len(TESTS) + 1:]
for _old, _new in TEST_MOVES.items():
    _TEST_MAP[_old] = _new
_TEST_RE = re.compile(r"(?<![\w])%s/(%s)(?![\w])" % (
    re.escape(TESTS), "|".join(re.escape(n) for n in sorted(_TEST_MAP, key=len,
                                                            reverse=True))))


def _module_of(base, name):
    """For ``from <base> import <name>`` (dotted names below module_utils): ``(new module
    dotted, None)`` when ``name`` is a file of the old layout, ``(new module dotted, name)``
    when it is an attribute of the old module ``base``; None when neither is old."""
    full = base + "." + name if base else name
    if full in _DOTTED_MAP and not MAPPING.get(full.replace(".", "/") + "/__init__.py"):
        return _DOTTED_MAP[full], None
    if full in _DOTTED_MAP:     # a package of the old layout imported as a module
        return _DOTTED_MAP[full], None
    if base in _DOTTED_MAP:
        return _DOTTED_MAP[base], name
    return None


def _statement(indent, mod, words, comment):
    """One ``from mod import ...``: on one line when it fits, else one name per line."""
    note = "  " + comment if comment else ""
    line = "%sfrom %s import %s%s" % (indent, mod, ", ".join(words), note)
    if len(line) - (len(note) if comment.startswith("# noqa") else 0) <= LINE:
        return line
    body = "\n".join("%s    %s," % (indent, w) for w in words)
    return "%sfrom %s import (%s\n%s\n%s)" % (indent, mod, note, body, indent)


def _resolve_base(node, own):
    """The dotted name below module_utils that ``node`` (an ImportFrom) imports from, or
    None when it is no module_utils import. ``own``: the file's dotted name below
    module_utils (for relative imports)."""
    if node.level:
        if own is None:
            return None
        package = own.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        return ".".join(package + ([node.module] if node.module else []))
    mod = node.module or ""
    if mod == UTILS_DOTTED:
        return ""
    if mod.startswith(UTILS_DOTTED + "."):
        return mod[len(UTILS_DOTTED) + 1:]
    return None


def _comment(lines, node):
    for number in range(node.lineno - 1, node.end_lineno):
        if "#" in lines[number]:
            return "#" + lines[number].split("#", 1)[1].rstrip()
    return ""


def rewrite_imports(text, own=None):
    """``(text, renames, kept)``: the module_utils imports of Python ``text`` rewritten to
    the new layout, ``renames`` ``{old binding: new binding}`` to apply to the code, and
    ``kept`` ``[(old binding, new name)]``: the aliases left because the new name is
    already used in the file for something else."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text, {}, []
    used = _used_names(text)
    kept = []
    lines = text.split("\n")
    edits = []
    renames = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = _resolve_base(node, own)
        if base is None:
            continue
        groups = {}
        changed = False
        for alias in node.names:
            where = _module_of(base, alias.name)
            if where is None:
                groups.setdefault(base, []).append((alias.name, alias.asname))
                continue
            changed = True
            new_mod, attr = where
            if attr is None:
                parent, new_stem = new_mod.rsplit(".", 1)
                binding = alias.asname or alias.name
                if binding != new_stem and new_stem in used:
                    kept.append((binding, new_stem))
                    groups.setdefault(parent, []).append((new_stem, binding))
                    continue
                if binding != new_stem:
                    renames[binding] = new_stem
                groups.setdefault(parent, []).append((new_stem, None))
            else:
                groups.setdefault(new_mod, []).append((attr, alias.asname))
        if not changed:
            continue
        line = lines[node.lineno - 1]
        indent = line[:len(line) - len(line.lstrip())]
        comment = _comment(lines, node)
        out = []
        for mod in sorted(groups):
            words = ["%s as %s" % (n, a) if a and a != n else n for n, a in groups[mod]]
            full = UTILS_DOTTED + ("." + mod if mod else "")
            out.append(_statement(indent, full, words, comment))
        edits.append((node.lineno, node.end_lineno, "\n".join(out)))
    for first, last, new in sorted(edits, reverse=True):
        lines[first - 1:last] = new.split("\n")
    return "\n".join(lines), renames, kept


def _used_names(text):
    names = set()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def rename_names(text, renames):
    """``renames`` applied to the NAME tokens of ``text`` that are not after a dot, not a
    keyword argument's name and not in an import statement."""
    if not renames:
        return text
    active = renames
    skip = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    lines = text.split("\n")
    changes = []
    for index, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or tok.string not in active or keyword.iskeyword(
                tok.string) or tok.start[0] in skip:
            continue
        prev = next((t for t in reversed(tokens[:index]) if t.type not in (
            tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
            tokenize.DEDENT)), None)
        nxt = next((t for t in tokens[index + 1:] if t.type not in (
            tokenize.NL, tokenize.COMMENT)), None)
        if prev is not None and prev.string == ".":
            continue
        if nxt is not None and nxt.string == "=" and prev is not None and prev.string in (
                "(", ","):
            continue
        changes.append((tok.start, tok.end, active[tok.string]))
    for (row, col), (_erow, ecol), new in sorted(changes, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[ecol:]
    return "\n".join(lines)


def rewrite(text, rel):
    """``(text, kept)``: the text of repo file ``rel`` with every old reference rewritten."""
    out = text
    kept = []
    if rel.endswith(".py"):
        own = None
        if rel.startswith(UTILS + "/"):
            own = dotted(rel[len(UTILS) + 1:])
            # a file of the new layout: its relative imports were written at its old place
            for old, new in MAPPING.items():
                if new == rel[len(UTILS) + 1:]:
                    own = dotted(old)
                    if old.endswith("__init__.py"):
                        own += ".__init__"
        out, renames, kept = rewrite_imports(out, own)
        out = rename_names(out, renames)
    out = _TEST_RE.sub(lambda m: "%s/%s" % (TESTS, _TEST_MAP[m.group(1)]), out)
    out = _DOTTED_RE.sub(lambda m: "module_utils." + _DOTTED_MAP[m.group(1)], out)
    out = _PATH_RE.sub(lambda m: "module_utils/" + _PATH_MAP[m.group(1)] + ".py", out)
    out = _SHORT_PATH_RE.sub(lambda m: _PATH_MAP[m.group(1)] + ".py", out)
    out = _SHORT_DOTTED_RE.sub(lambda m: _DOTTED_MAP[m.group(1)], out)
    return out, kept


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
    new_markers = markers(planned)
    prefix = "would " if args.check else ""
    for path in new_markers:
        print("%screate %s" % (prefix, path))
        if not args.check:
            os.makedirs(os.path.dirname(os.path.join(REPO, path)), exist_ok=True)
            with open(os.path.join(REPO, path), "w") as handle:
                if path.startswith(UTILS):
                    pkg = path[len(UTILS) + 1:-len("/__init__.py")]
                    handle.write('"""%s."""\n' % (LAYOUT[pkg][0].upper() + LAYOUT[pkg][1:]))
    for src, dst in planned:
        print("%sgit mv %s %s" % (prefix, src, dst))
        if not args.check:
            os.makedirs(os.path.join(REPO, os.path.dirname(dst)), exist_ok=True)
            git("mv", src, dst)
    for pkg in OLD_PACKAGES:      # an old package left with its marker only
        for top in (UTILS, TESTS):
            folder = os.path.join(REPO, top, pkg)
            if not os.path.isdir(folder):
                continue
            left = [n for n in os.listdir(folder) if n.endswith(".py") and n not in (
                "__init__.py", "conftest.py")]
            if not left and (args.check or os.path.exists(os.path.join(folder, "__init__.py"))):
                print("%sgit rm %s/%s/__init__.py" % (prefix, top, pkg))
                if not args.check:
                    git("rm", "-q", "%s/%s/__init__.py" % (top, pkg))
    where = dict(planned) if args.check else {}
    changed = 0
    for rel in text_files():
        text = read_text(rel)
        if text is None:
            continue
        new, kept = rewrite(text, where.get(rel, rel))
        for old, name in kept:
            print("%s: alias %s kept: %s is used for something else there"
                  % (where.get(rel, rel), old, name))
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
