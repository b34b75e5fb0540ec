"""Issue 39's promise, shown on a copy of the tree: a new subject is one folder (its reader,
its check, its audit declaration with a fact and a wanted value) and one line in the audit's
registry. Nothing else is edited: the facts, the wanted spec and its rules, the check and its
column come from the declaration. (A real subject also adds its finding id to host_audit's
documentation and the README, and its column to a report group: docs, not code.)

The example subject reads thermal zones as the kernel's thermal sysfs interface has them
(Documentation/driver-api/thermal/sysfs-api.rst: ``/sys/class/thermal/thermal_zone<N>/type``,
and ``temp`` in millidegrees Celsius)."""

import json
import os
import shutil
import subprocess
import sys

from conftest import REPO

P = "ansible_collections.gpuhost.tuning.plugins.module_utils"
HEADER = '''# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
'''
FUTURE = '''
from __future__ import absolute_import, division, print_function

__metaclass__ = type
'''
FOLDER = {
    "__init__.py": HEADER + '"""Thermal zones: the example subject."""\n',
    "thermal.py": HEADER + '"""The thermal zones, from /sys/class/thermal."""\n' + FUTURE + '''
from %(P)s.platform import hostfs
from %(P)s.platform.hostfs import host_path, read_text

ZONES = "/sys/class/thermal"


def zones(root):
    """``[{zone, type, temp_c}]``; temp_c None when unreadable."""
    try:
        names = hostfs.listdir(host_path(root, ZONES))
    except OSError:
        return []
    out = []
    for name in sorted(n for n in names if n.startswith("thermal_zone")):
        text = (read_text(host_path(root, "%%s/%%s/temp" %% (ZONES, name))) or "").strip()
        kind = read_text(host_path(root, "%%s/%%s/type" %% (ZONES, name)))
        temp = int(text) / 1000.0 if text.lstrip("-").isdigit() else None
        out.append({"zone": name, "type": (kind or "").strip(), "temp_c": temp})
    return out
''',
    "thermal_check.py": HEADER + '"""Column Thermal: no zone at or over the wanted C."""\n'
    + FUTURE + '''
from %(P)s.platform.findings import check, column, found

COLUMN = column("thermal", "Thermal", position=990)


@check("thermal_zone_hot", COLUMN, severity="high", order=990)
def thermal_zone_hot(facts, wanted):
    """A thermal zone at or over thermal_max_c."""
    for zone in facts.get("thermal") or []:
        if zone["temp_c"] is not None and zone["temp_c"] >= wanted["thermal_max_c"]:
            yield found(zone["zone"], "%%.1f C" %% zone["temp_c"],
                        "below %%d C" %% wanted["thermal_max_c"], "check the cooling")
''',
    "audit_thermal.py": HEADER + '"""The thermal subject: its part of the audit."""\n'
    + FUTURE + '''
from %(P)s.platform.facts_base import Fact
from %(P)s.platform.validate import int_range
from %(P)s.subjects.thermal import thermal, thermal_check

FACTS = (Fact(230, "thermal", lambda c: thermal.zones(c.root), []),)
WANTED = {"thermal_max_c": dict(type="int", default=85)}


def wanted_rules(w):
    int_range("thermal_max_c", w.get("thermal_max_c"), 20, 120)


CHECKS = (thermal_check,)
''',
}

# What the copy's audit makes of a host with one hot zone, in a process of its own.
PROBE = '''
import json, sys
sys.path.insert(0, sys.argv[1])
from %(P)s.engines.audit import audit, facts
from %(P)s.platform.validate import ValidationError
result = audit.audit(sys.argv[2], {"host": "h", "thermal_max_c": 80})
try:
    facts.wanted_values({"root": sys.argv[2], "wanted": {"thermal_max_c": 500}})
    refused = None
except ValidationError as exc:
    refused = str(exc)
print(json.dumps({"fact": result["thermal"], "status": result["checks"]["thermal"]["status"],
                  "found": [(f["id"], f["subject"], f["current"]) for f in result["findings"]
                            if f["id"].startswith("thermal")],
                  "spec": facts.wanted_spec()["thermal_max_c"], "refused": refused}))
''' % {"P": P}


def _tree(top):
    out = {}
    for base, _dirs, names in os.walk(os.path.join(top, "plugins")):
        for name in names:
            if not name.endswith(".pyc"):
                with open(os.path.join(base, name), "rb") as handle:
                    out[os.path.relpath(os.path.join(base, name), top)] = handle.read()
    return out


def test_a_new_subject_is_one_folder_and_one_registry_line(tmp_path):
    copy = tmp_path / "ansible_collections" / "gpuhost" / "tuning"
    shutil.copytree(os.path.join(REPO, "plugins"), str(copy / "plugins"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = _tree(str(copy))
    folder = copy / "plugins/module_utils/subjects/thermal"
    folder.mkdir()
    for name, text in FOLDER.items():
        (folder / name).write_text(text % {"P": P})
    reg = copy / "plugins/module_utils/engines/audit/check_registry.py"
    text = reg.read_text()
    line = "from %s.subjects.sysctl import audit_sysctl\n" % P
    assert text.count(line) == 1 and text.count("    audit_nvlink, ") == 1
    text = text.replace(line, line + "from %s.subjects.thermal import audit_thermal\n" % P)
    reg.write_text(text.replace("    audit_nvlink, ", "    audit_thermal, audit_nvlink, "))
    after = _tree(str(copy))
    touched = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert touched == ["plugins/module_utils/engines/audit/check_registry.py"] + [
        "plugins/module_utils/subjects/thermal/%s" % n for n in sorted(FOLDER)]
    # a host with a cool zone and a hot one (millidegrees C, as the kernel writes them)
    host = tmp_path / "host"
    for zone, kind, temp in (("thermal_zone0", "acpitz", "41000"),
                             ("thermal_zone1", "x86_pkg_temp", "93500")):
        (host / "sys/class/thermal" / zone).mkdir(parents=True)
        (host / "sys/class/thermal" / zone / "type").write_text(kind + "\n")
        (host / "sys/class/thermal" / zone / "temp").write_text(temp + "\n")
    probe = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), str(host)],
                           capture_output=True, text=True, check=False, timeout=120)
    assert probe.returncode == 0, probe.stderr
    got = json.loads(probe.stdout)
    assert got["fact"] == [{"zone": "thermal_zone0", "type": "acpitz", "temp_c": 41.0},
                           {"zone": "thermal_zone1", "type": "x86_pkg_temp", "temp_c": 93.5}]
    assert got["found"] == [["thermal_zone_hot", "thermal_zone1", "93.5 C"]]
    assert got["status"] == "high"
    assert got["spec"] == {"type": "int", "default": 85}
    assert got["refused"] == "thermal_max_c: 500 is not allowed: an integer from 20 to 120"
