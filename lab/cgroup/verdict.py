"""The cgroup guest's verdict (lab/cgroup-real.sh), from its serial console only.

The guest (lab/cgroup/init) writes one ``GPUHOST <key> <value>`` line per result. Passed
when: nvidia-uvm got a major and the stale one differs; the container was REFUSED the node
under the stale rule (EPERM: without it nothing is proven); lxc_cgroup_devices changed
129.conf, adding the registered major and removing the stale one; the restarted container
opened the node; a second run changed nothing. Exit 0 passed, 1 not (each problem on stderr).
"""

import json
import sys


def read_console(path):
    """{key: value} of the guest's GPUHOST lines (the first of each key)."""
    lines = {}
    with open(path, errors="replace") as handle:
        for line in handle:
            line = line.rstrip("\r\n")
            if line.startswith("GPUHOST "):
                key, _sep, value = line[len("GPUHOST "):].partition(" ")
                lines.setdefault(key, value)
    return lines


def _json(text):
    try:
        return json.loads(text or "{}")
    except ValueError:
        return {"unparsed": text}


def problems(lines):
    found = []

    def need(ok, what):
        if not ok:
            found.append(what)

    need(lines.get("end") == "done", "guest did not reach the end: %s" % lines.get("end"))
    major, stale = lines.get("major", ""), lines.get("stale", "")
    need(major.isdigit() and stale.isdigit() and major != stale,
         "major %r, stale %r" % (major, stale))
    need("Operation not permitted" in lines.get("before", ""),
         "the stale rule was not refused (EPERM): %r; nothing is proven" % lines.get("before"))
    repair = _json(lines.get("repair"))
    need(repair.get("changed") is True and not repair.get("failed"), "repair: %s" % repair)
    if major.isdigit():
        need(repair.get("majors") == {"nvidia-uvm": int(major)},
             "majors: %s" % repair.get("majors"))
        need(repair.get("added") == ["c %s:* rwm" % major], "added: %s" % repair.get("added"))
    need(repair.get("removed") == ["c %s:* rwm" % stale], "removed: %s" % repair.get("removed"))
    need(lines.get("after") == "ok", "open after the repair: %r" % lines.get("after"))
    again = _json(lines.get("again"))
    need(again.get("changed") is False and not again.get("failed"), "second run: %s" % again)
    return found


def summary(lines):
    t = {}
    for key, value in lines.items():
        if key.startswith("t_"):
            try:
                t[key[2:]] = float(value)
            except ValueError:
                pass
    return ("nvidia-uvm major %s, stale %s: before %r, after %r; guest uptime at boot %.1f s, "
            "insmod %.1f, first start %.1f, repair %.1f, second start %.1f, end %.1f"
            % (lines.get("major"), lines.get("stale"), lines.get("before"), lines.get("after"),
               t.get("boot", 0), t.get("insmod", 0), t.get("before", 0), t.get("repair", 0),
               t.get("after", 0), t.get("again", 0)))


def main(argv):
    lines = read_console(argv[1])
    found = problems(lines)
    for problem in found:
        print("cgroup guest: " + problem, file=sys.stderr)
    print("cgroup guest: " + summary(lines))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
