# -*- coding: utf-8 -*-
"""Copy role common's shared options into the argument spec of every role that depends on it.

Role common holds the wanted values every other role reads (gpuhost_root, gpuhost_mrrs_size,
gpuhost_sysctl, ...). Its options are written once, in roles/common/meta/argument_specs.yml
under the entry point ``shared``. Each dependent role validates them as part of its own
entry point's spec: one argument check per host per role, where a ``main`` spec in common would
add a second one to every play (ansible-core validates each role of the play, dependencies
included, once per host). So this script writes common's options, byte for byte, between two
marker comments at the end of each dependent role's entry points' options, replacing the block it
wrote before and any hand-written entry of the same name. ``ansible-doc -t role`` then shows
every variable a role reads.

    python3 scripts/role-specs.py           rewrite the dependent roles' specs
    python3 scripts/role-specs.py --check   exit 1 (naming the files) when one is out of date
"""

import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLES = os.path.join(REPO, "roles")
SOURCE = os.path.join("roles", "common", "meta", "argument_specs.yml")
BEGIN = ("      # >>> role common's shared options, written by scripts/role-specs.py from\n"
         "      # %s: edit them there, then run the script\n" % SOURCE)
END = "      # <<< end of role common's shared options\n"
OPTION = re.compile(r"^      ([A-Za-z0-9_]+):")


def entry_options(lines, entry):
    """(start, end) line indexes of the option lines of ``entry``'s ``options:`` block, or
    None when it has none of its own (an alias of another entry point's, or none at all)."""
    inside = False
    for index, line in enumerate(lines):
        if re.match(r"^  %s:\s*$" % re.escape(entry), line):
            inside = True
        elif inside and re.match(r"^  \S", line):
            break
        elif inside and re.match(r"^    options:(\s*&\S+)?\s*$", line):
            start = end = index + 1
            while end < len(lines) and (not lines[end].strip() or lines[end].startswith("      ")):
                end += 1
            while end > start and not lines[end - 1].strip():
                end -= 1
            return start, end
    return None


def drop_block(lines):
    """The lines without the block this script wrote before."""
    text = "".join(lines)
    text = re.sub(r"(?ms)^      # >>> role common's shared options.*?^      # <<< [^\n]*\n", "",
                  text)
    return text.splitlines(True)


def updated(path, shared_lines, names):
    """The spec with the shared options at the end of every entry point's own options (an
    entry point whose options are a YAML alias of another's gets them through that one)."""
    with open(path) as handle:
        lines = drop_block(handle.readlines())
    entries = [m.group(1) for m in (re.match(r"^  ([A-Za-z0-9_]+):\s*$", line) for line in lines)
               if m]
    for entry in reversed(entries):
        span = entry_options(lines, entry)
        if span is None:
            continue
        start, end = span
        kept, skipping = [], False
        for line in lines[start:end]:
            match = OPTION.match(line)
            if match:
                skipping = match.group(1) in names
            if not skipping:
                kept.append(line)
        while kept and not kept[-1].strip():
            kept.pop()
        lines = lines[:start] + kept + [BEGIN] + shared_lines + [END] + lines[end:]
    return "".join(lines)


def dependents():
    out = []
    for role in sorted(os.listdir(ROLES)):
        meta = os.path.join(ROLES, role, "meta", "main.yml")
        spec = os.path.join(ROLES, role, "meta", "argument_specs.yml")
        if role != "common" and os.path.exists(spec) and os.path.exists(meta):
            with open(meta) as handle:
                if re.search(r"role:\s*gpuhost\.tuning\.common\b", handle.read()):
                    out.append(spec)
    return out


def main(argv):
    check = "--check" in argv
    with open(os.path.join(REPO, SOURCE)) as handle:
        source = handle.readlines()
    span = entry_options(source, "shared")
    if span is None:
        raise SystemExit("role-specs.py: no shared.options in %s" % SOURCE)
    shared = source[span[0]:span[1]]
    names = set(m.group(1) for m in map(OPTION.match, shared) if m)
    stale = []
    for path in dependents():
        text = updated(path, shared, names)
        with open(path) as handle:
            if handle.read() == text:
                continue
        stale.append(os.path.relpath(path, REPO))
        if not check:
            with open(path, "w") as handle:
                handle.write(text)
    if check and stale:
        sys.stderr.write("role-specs.py: out of date (run python3 scripts/role-specs.py): %s\n"
                         % ", ".join(stale))
        return 1
    for path in stale:
        print("rewrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
