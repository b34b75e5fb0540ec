"""The README's install and quick-start commands, run as written.

Every fenced block that follows a ``<!-- quickstart -->`` line of README.md is run, in README
order, in one bash shell (``set -euo pipefail``) in a temporary folder with its own HOME: a
virtualenv with ansible-core from the package index, the collection built from this checkout
and installed into ``~/.ansible/collections``, the first audit, the report, tune in check mode
then for real, the audit again, revert. Two things are substituted, as the README says: the
inventory (``hosts.yml`` names ``gpu01`` with the local connection and ``gpuhost_root`` set
to the seed host tree, a Proxmox node with 8 GPUs and every problem tune fixes) and the
checkout (linked as ``gpuhost.tuning``, where the user's ``git clone`` puts it). After each
command the test records the tree (a digest of every file) to check what each step did.
26 s on this 2-core machine (pip from the local wheel cache: 5 s of it)."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from fixtures import hosts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "<!-- quickstart -->"
MANAGED = {"pcie_mrrs", "numa_balancing", "cpuidle_deep_state", "sysctl"}

HOOK = r'''
import hashlib, json, os, shutil, sys
root, out, n = sys.argv[1], sys.argv[2], sys.argv[3]
tree = {}
for folder, dirs, files in os.walk(root):
    for name in dirs + files:
        path = os.path.join(folder, name)
        rel = os.path.relpath(path, root)
        if os.path.islink(path):
            tree[rel] = "-> " + os.readlink(path)
        elif os.path.isfile(path):
            with open(path, "rb") as handle:
                data = handle.read()
            if rel.startswith(("sys/", "proc/")) and name != "config":
                data = data.rstrip(b"\n")   # a pseudo file reads back as the kernel formats it
            tree[rel] = hashlib.sha256(data).hexdigest()
with open(os.path.join(out, "tree-%s.json" % n), "w") as handle:
    json.dump(tree, handle)
report = os.path.join(os.getcwd(), "gpuhost-reports", "gpu01.json")
if os.path.isfile(report):
    shutil.copy(report, os.path.join(out, "report-%s.json" % n))
'''


def quickstart_blocks(text):
    """The fenced blocks after each ``<!-- quickstart -->`` line, in order."""
    blocks = re.findall(r"^%s\n```[a-z]*\n(.*?)^```$" % re.escape(MARK), text, re.M | re.S)
    assert len(blocks) == text.count(MARK), "a quickstart mark not followed by a fenced block"
    return blocks


def commands(block):
    """The block's commands, one per entry: lines joined where they end in a backslash."""
    out, current = [], ""
    for line in block.splitlines():
        current += line + "\n"
        if not line.endswith("\\"):
            if current.strip():
                out.append(current.rstrip("\n"))
            current = ""
    assert not current, "a command ends in a backslash"
    return out


def test_blocks_are_found_and_split():
    text = "a\n%s\n```\ncmd one \\\n  --x\n\ncmd two\n```\n%s\n```yaml\nx\n```\n" % (MARK, MARK)
    blocks = quickstart_blocks(text)
    assert commands(blocks[0]) == ["cmd one \\\n  --x", "cmd two"] and blocks[1] == "x\n"
    with pytest.raises(AssertionError):
        quickstart_blocks("%s\ntext, no fence\n" % MARK)


def _env(home):
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON")))
    env.update(HOME=home, PATH="/usr/local/bin:/usr/bin:/bin", ANSIBLE_NOCOLOR="1")
    return env


def test_readme_quickstart_runs_as_written(tmp_path):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        blocks = quickstart_blocks(handle.read())
    cmds = [c for block in blocks for c in commands(block)]
    names = [" ".join(c.split()[:3]) for c in cmds]
    # The steps the README promises, in its order.
    for step in ("pip install", "ansible-galaxy collection build",
                 "ansible-galaxy collection install", "ansible-playbook gpuhost.tuning.audit",
                 "cat gpuhost-reports/summary.md", "ansible-playbook gpuhost.tuning.tune",
                 "ansible-playbook gpuhost.tuning.revert"):
        assert any(n.startswith(step) for n in names), step
    assert any("--check" in c for c in cmds if "gpuhost.tuning.tune" in c)

    home, work, out = (str(tmp_path / n) for n in ("home", "work", "out"))
    for folder in (home, work, out):
        os.makedirs(folder)
    pip_conf = os.path.expanduser("~/.config/pip")   # this machine's package index, if any
    if os.path.isdir(pip_conf):
        shutil.copytree(pip_conf, os.path.join(home, ".config", "pip"))
    os.symlink(REPO, os.path.join(work, "gpuhost.tuning"))
    root = str(tmp_path / "seed")
    hosts.seed_host(root)
    with open(os.path.join(work, "hosts.yml"), "w") as handle:
        json.dump({"all": {"children": {"gpuhosts": {"hosts": {"gpu01": {
            "ansible_connection": "local", "gpuhost_root": root,
            "ansible_python_interpreter": sys.executable}}}}}}, handle)
    with open(os.path.join(out, "hook.py"), "w") as handle:
        handle.write(HOOK)

    script = ["set -euo pipefail",
              '__qs_after() { "%s" "%s" "%s" "%s" "$1"; }' % (
                  sys.executable, os.path.join(out, "hook.py"), root, out),
              "__qs_after start"]
    for n, cmd in enumerate(cmds):
        script += ["echo '>>> step %d'" % n, cmd, "__qs_after %d" % n]
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=_env(home),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]

    def tree(n):
        with open(os.path.join(out, "tree-%s.json" % n)) as handle:
            return json.load(handle)

    def managed(n):
        with open(os.path.join(out, "report-%s.json" % n)) as handle:
            return {f["id"] for f in json.load(handle)["findings"]} & MANAGED

    def step(prefix, check=None):
        found = [n for n, c in enumerate(cmds) if c.startswith(prefix)
                 and (check is None or ("--check" in c) == check)]
        assert found, prefix
        return found

    # The collection came from the tarball built from this checkout, into HOME.
    installed = glob.glob(os.path.join(home, ".ansible/collections/ansible_collections/"
                                             "gpuhost/tuning/MANIFEST.json"))
    assert installed, proc.stdout[-3000:]
    audits = step("ansible-playbook gpuhost.tuning.audit")
    first_audit, last_audit = audits[0], audits[-1]
    check_tune = step("ansible-playbook gpuhost.tuning.tune", check=True)[0]
    tune = step("ansible-playbook gpuhost.tuning.tune", check=False)[0]
    revert = step("ansible-playbook gpuhost.tuning.revert")[0]
    assert first_audit < check_tune < tune < last_audit < revert
    assert tree(first_audit) == tree("start")                # the audit reads only
    assert managed(first_audit) == MANAGED
    assert "gpu01" in proc.stdout and "summary" not in proc.stderr
    assert tree(check_tune) == tree(first_audit)             # check mode changes nothing
    assert "+kernel.numa_balancing = 0" in proc.stdout       # ... and shows the diff
    assert tree(tune) != tree(check_tune)
    assert os.path.isfile(os.path.join(work, "gpuhost-reports", "gpu01-tune.md"))
    assert managed(last_audit) == set()                     # tune fixed what it manages
    after = tree(revert)
    start = tree("start")
    # revert: every file the fixture had, as it had it; what is left is the snapshot store
    assert {k: v for k, v in after.items() if k in start} == start
    assert sorted(set(after) - set(start)) == ["var/lib/gpuhost/original.json"]


def test_readme_git_install_runs_as_written(tmp_path):
    """The README's install from the git repository, with its URL placeholder replaced by this
    checkout as a ``file://`` URL (the project has no public one): what a committed ``main``
    holds, built and installed by ansible-galaxy."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    lines = re.findall(r"^ansible-galaxy collection install 'git\+<the repository's URL>,"
                       r"([\w.-]+)'$", text, re.M)
    assert len(lines) == 1, "the README's git install line"
    branch = lines[0]
    heads = subprocess.run(["git", "-C", REPO, "branch", "--list", branch],
                           capture_output=True, text=True, timeout=30, check=False).stdout
    if not heads.strip():
        pytest.skip("this checkout has no branch %s" % branch)
    home = str(tmp_path / "home")
    os.makedirs(home)
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    proc = subprocess.run([galaxy, "collection", "install", "git+file://%s,%s" % (REPO, branch)],
                          cwd=home, env=dict(_env(home), PATH=os.path.dirname(sys.executable)
                                             + os.pathsep + "/usr/bin:/bin"),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert os.path.isfile(os.path.join(home, ".ansible/collections/ansible_collections/gpuhost/"
                                             "tuning/MANIFEST.json"))


def _anchors(text):
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped)."""
    out = set()
    for title in re.findall(r"^#+ (.+)$", text, re.M):
        out.add(re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-"))
    return out


def test_readme_and_docs_links_resolve():
    """Every relative link of the README and docs/*.md names a file that exists and, with
    ``#anchor``, a heading of it: the sections moved to docs/ are found where they are said."""
    wrong = []
    for path in [os.path.join(REPO, "README.md")] + sorted(
            glob.glob(os.path.join(REPO, "docs", "*.md"))):
        with open(path, encoding="utf-8") as handle:
            text = re.sub(r"^```.*?^```$", "", handle.read(), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            name, _sep, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
            if not os.path.exists(full):
                wrong.append((os.path.relpath(path, REPO), target))
            elif anchor and full.endswith(".md"):
                with open(full, encoding="utf-8") as handle:
                    if anchor not in _anchors(handle.read()):
                        wrong.append((os.path.relpath(path, REPO), target))
    assert wrong == []
