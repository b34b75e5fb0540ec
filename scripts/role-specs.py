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

It also writes, from the tune part registry (plugins/module_utils/engines/tune/tune_registry.py),
host_tune's DOCUMENTATION of ``parts`` and of every part's options (each option's declaration:
its spec and ``description``), tuning_snapshot's choices of ``parts`` (the snapshot's
sections) and default of ``files`` (the paths the parts may write), and into role tune:
- every part's switch: its ``gpuhost_tune_<name>`` entry in the role's argument spec (type
  bool, its ``default_on``, its ``role_doc``), its default in defaults/main.yml and its line
  in vars/main.yml's ``__gpuhost_tune_switches`` (which the tags select from);
- every part option declared with a ``role_var``: that variable's entry in the argument spec
  (the option's spec and its ``role_description``, else its ``description``), its default in
  defaults/main.yml (the spec's, under that description as a comment) and its line in
  tasks/main.yml's host_tune call (set to null it passes nothing: host_tune's default);
each between marker comments. A switch or part option written by hand outside the markers is
refused.

    python3 scripts/role-specs.py           rewrite the dependent roles' specs
    python3 scripts/role-specs.py --check   exit 1 (naming the files) when one is out of date
"""

import json
import os
import re
import shutil
import sys
import tempfile
import textwrap

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


TUNE = os.path.join(ROLES, "tune")
PART_BEGIN = ("# >>> tune part switches, written by scripts/role-specs.py from the tune part "
              "registry\n")
PART_END = "# <<< end of the tune part switches\n"


def load_registry():
    """``engines.tune.tune_registry`` of this checkout."""
    links = tempfile.mkdtemp(prefix="role-specs-")
    try:
        os.makedirs(os.path.join(links, "ansible_collections", "gpuhost"))
        os.symlink(REPO, os.path.join(links, "ansible_collections", "gpuhost", "tuning"))
        sys.path.insert(0, links)
        from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.tune import (
            tune_registry,
        )
        return tune_registry
    finally:
        if links in sys.path:
            sys.path.remove(links)
        shutil.rmtree(links)


def _paragraphs(doc):
    return [doc] if isinstance(doc, str) else list(doc)


def _plain(text):
    """True when ``text`` may be a plain YAML scalar."""
    return bool(text) and not (": " in text or " #" in text
                               or text[:1] in "!&*-:?{}[],#|>@`\"'%")


def _scalar(text, first, rest, width=92):
    """YAML lines of one scalar, wrapped: plain when it can be, else double-quoted."""
    return [line + "\n" for line in textwrap.wrap(
        text if _plain(text) else json.dumps(text), width, initial_indent=first,
        subsequent_indent=rest, break_long_words=False, break_on_hyphens=False)]


def switch_spec(switches, indent="      "):
    out = [indent + PART_BEGIN]
    for name, default_on, doc in switches:
        out += [indent + "gpuhost_tune_%s:\n" % name, indent + "  type: bool\n",
                indent + "  default: %s\n" % ("true" if default_on else "false"),
                indent + "  description:\n"]
        for text in _paragraphs(doc):
            out += _scalar(text, indent + "    - ", indent + "      ")
    return out + [indent + PART_END]


HOST_TUNE = os.path.join(REPO, "plugins", "modules", "host_tune.py")
DOC_BEGIN = ("  # >>> tune part options, written by scripts/role-specs.py from the tune part "
             "registry\n")
DOC_END = "  # <<< end of the tune part options\n"


def _flow(values):
    return "[%s]" % ", ".join(json.dumps(v) if not isinstance(v, str) else v for v in values)


def _option_doc(name, spec, doc, indent="  "):
    out = [indent + "%s:\n" % name]
    if isinstance(doc, str):
        out += _scalar(doc, indent + "  description: ", indent + "    ")
    else:
        out.append(indent + "  description:\n")
        for text in doc:
            out += _scalar(text, indent + "    - ", indent + "      ")
    out.append(indent + "  type: %s\n" % spec["type"])
    if "elements" in spec:
        out.append(indent + "  elements: %s\n" % spec["elements"])
    for key in ("default", "choices"):
        if spec.get(key) is None:
            continue
        value = spec[key]
        if isinstance(value, list):
            out += [line + "\n" for line in textwrap.wrap(
                indent + "  %s: %s" % (key, _flow(value)), 92,
                subsequent_indent=indent + "    ", break_long_words=False,
                break_on_hyphens=False)]
        else:
            out.append(indent + "  %s: %s\n" % (key, json.dumps(value) if not isinstance(
                value, str) else value))
    return out


def host_tune_doc(tune_registry):
    """host_tune's DOCUMENTATION with ``parts`` and every part's options from the registry."""
    opt_in = ["C(%s)" % n for n in tune_registry.PARTS if n not in tune_registry.DEFAULT_PARTS]
    parts_doc = [
        "The parts to run. C(snapshot) also records the applied state; C(verify) audits "
        "again afterwards and fails on managed findings that remain. %s and %s are opt-in "
        "(not in the default)." % (", ".join(opt_in[:-1]), opt_in[-1]),
        "Role C(gpuhost.tuning.tune) builds this from its C(gpuhost_tune_*) switches and tags."]
    block = [DOC_BEGIN] + _option_doc("parts", {
        "type": "list", "elements": "str", "choices": list(tune_registry.PARTS),
        "default": list(tune_registry.DEFAULT_PARTS)}, parts_doc)
    for name, spec, doc in tune_registry.options():
        block += _option_doc(name, spec, doc)
    block.append(DOC_END)
    text = _read(HOST_TUNE)
    if DOC_BEGIN in text:
        head, rest = text.split(DOC_BEGIN, 1)
        tail = rest.split(DOC_END, 1)[1]
    else:
        head, tail = text.split("\nnotes:\n", 1)
        head, tail = head + "\n", "notes:\n" + tail
    names = ["parts"] + [name for name, _spec, _doc in tune_registry.options()]
    for name in names:
        if re.search(r"^  %s:" % name, head.split('DOCUMENTATION = r"""', 1)[-1], re.M):
            raise SystemExit("role-specs.py: option %s is written by hand in %s: remove it (its "
                             "tune part declares it)" % (name, os.path.relpath(HOST_TUNE, REPO)))
    return head + "".join(block) + tail


TUNING_SNAPSHOT = os.path.join(REPO, "plugins", "modules", "tuning_snapshot.py")


def _set_option_value(text, option, key, lines):
    """``text`` with the ``key:`` value of DOCUMENTATION option ``option`` set to ``lines``
    (the value's own lines: a flow list on the key's line, or a block list below it)."""
    pattern = re.compile(r"(?m)^(  %s:\n(?:    .*\n|      .*\n)*?)    %s:.*\n(?:      - .*\n)*"
                         % (re.escape(option), re.escape(key)))
    if not pattern.search(text):
        raise SystemExit("role-specs.py: no %s of option %s in %s"
                         % (key, option, os.path.relpath(TUNING_SNAPSHOT, REPO)))
    return pattern.sub(lambda m: m.group(1) + "".join(lines), text, count=1)


def tuning_snapshot_doc(tune_registry):
    """tuning_snapshot's DOCUMENTATION with ``parts`` (the snapshot's sections) and the
    default of ``files`` (every path a part may write) from the registry."""
    keys = [s.snapshot_key for s in tune_registry.SECTIONS]
    text = _read(TUNING_SNAPSHOT)
    text = _set_option_value(text, "parts", "choices", ["    choices: %s\n" % _flow(keys)])
    text = _set_option_value(text, "parts", "default", ["    default: %s\n" % _flow(keys)])
    return _set_option_value(text, "files", "default", ["    default:\n"] + [
        "      - %s\n" % path for path in tune_registry.MANAGED_FILES])


def switch_defaults(switches):
    out = [PART_BEGIN]
    for name, default_on, doc in switches:
        for text in _paragraphs(doc):
            out += ["# %s\n" % line for line in textwrap.wrap(text, 88, break_on_hyphens=False)]
        out.append("gpuhost_tune_%s: %s\n" % (name, "true" if default_on else "false"))
    return out + [PART_END]


def switch_vars(switches):
    return ([PART_BEGIN, "__gpuhost_tune_switches:\n"]
            + ['  %s: "{{ gpuhost_tune_%s }}"\n' % (name, name) for name, _on, _doc in switches]
            + [PART_END])


def with_block(text, block, anchor, where, indent="", begin=PART_BEGIN, end=PART_END,
               names=None, what="part switch"):
    """``text`` with ``block`` between the markers (in place of the one there, else after
    the first match of ``anchor``; None: the markers must be there); a name of ``names``
    (default: the switches the block sets) written outside the markers is refused."""
    begin, end = indent + begin, indent + end
    if begin in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
    else:
        match = re.search(anchor, text, re.M) if anchor else None
        if match is None:
            raise SystemExit("role-specs.py: no place for the %ss in %s (put the marker "
                             "lines %r and %r where they go)" % (what, where, begin, end))
        head, tail = text[:match.end()], text[match.end():]
    if names is None:
        names = re.findall(r"^\s*(gpuhost_tune_[a-z0-9_]+): ?(?:true|false)?\s*$",
                           "".join(block), re.M)
    for name in names:
        if re.search(r"^\s*%s:" % re.escape(name), head + tail, re.M):
            raise SystemExit("role-specs.py: %s is written by hand in %s: remove it (its tune "
                             "part declares it)" % (name, where))
    return head + "".join(block) + tail


OPTION_BEGIN = ("# >>> tune part options, written by scripts/role-specs.py from the tune part "
                "registry\n")
OPTION_END = "# <<< end of the tune part options\n"


def _value(value):
    """``value`` as YAML on one line: a plain string when it can be, else JSON."""
    return value if isinstance(value, str) and _plain(value) else json.dumps(value)


def option_defaults(role_options):
    """defaults/main.yml's lines of the part options: the description, then the default."""
    out = [OPTION_BEGIN]
    for var, _name, spec, doc in role_options:
        for text in _paragraphs(doc):
            out += ["# %s\n" % line for line in textwrap.wrap(text, 88, break_on_hyphens=False)]
        default = spec.get("default")
        if isinstance(default, list) and default:
            out += ["%s:\n" % var] + ["  - %s\n" % _value(item) for item in default]
        else:
            out.append("%s: %s\n" % (var, _value(default)))
    return out + [OPTION_END]


def option_spec(role_options, indent="      "):
    """meta/argument_specs.yml's entries of the part options."""
    out = [indent + OPTION_BEGIN]
    for var, _name, spec, doc in role_options:
        out += _option_doc(var, spec, doc, indent=indent)
    return out + [indent + OPTION_END]


def option_arg(var):
    """The value the role passes for role variable ``var``: nothing (host_tune's default)
    when it is null."""
    return "{{ omit if %s is none else %s }}" % (var, var)


def option_args(role_options, indent="    "):
    """tasks/main.yml's lines of the host_tune call that pass the part options."""
    return ([indent + OPTION_BEGIN]
            + [indent + '%s: "%s"\n' % (name, option_arg(var))
               for var, name, _spec, _doc in role_options]
            + [indent + OPTION_END])


def _read(path):
    with open(path) as handle:
        return handle.read()


def tune_files(switches, role_options):
    """``{path: text}`` of role tune's defaults, vars and tasks with the part switches and
    the part options."""
    defaults = os.path.join(TUNE, "defaults", "main.yml")
    variables = os.path.join(TUNE, "vars", "main.yml")
    tasks = os.path.join(TUNE, "tasks", "main.yml")
    text = with_block(_read(defaults), switch_defaults(switches),
                      r"^# with a switch here and a tag.*\n\n", defaults)
    text = with_block(text, option_defaults(role_options), None, defaults, begin=OPTION_BEGIN,
                      end=OPTION_END, names=[var for var, _name, _spec, _doc in role_options],
                      what="part option")
    return {
        defaults: text,
        variables: with_block(_read(variables), switch_vars(switches), r"^---\n(#.*\n)*",
                              variables),
        tasks: with_block(_read(tasks), option_args(role_options), None, tasks, indent="    ",
                          begin=OPTION_BEGIN, end=OPTION_END,
                          names=[name for _var, name, _spec, _doc in role_options],
                          what="part option"),
    }


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
    tune_registry = load_registry()
    switches = tune_registry.switches()
    role_options = tune_registry.role_options()
    wanted = tune_files(switches, role_options)
    wanted[HOST_TUNE] = host_tune_doc(tune_registry)
    wanted[TUNING_SNAPSHOT] = tuning_snapshot_doc(tune_registry)
    for path in dependents():
        text = updated(path, shared, names)
        if path == os.path.join(TUNE, "meta", "argument_specs.yml"):
            text = with_block(text, switch_spec(switches),
                              r"^  main:\n(?:    .*\n)*?    options:.*\n", path, indent="      ")
            text = with_block(text, option_spec(role_options), None, path, indent="      ",
                              begin=OPTION_BEGIN, end=OPTION_END,
                              names=[var for var, _name, _spec, _doc in role_options],
                              what="part option")
        wanted[path] = text
    for path, text in sorted(wanted.items()):
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
