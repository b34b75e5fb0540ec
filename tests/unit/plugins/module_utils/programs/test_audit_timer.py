"""audit_timer's installer pieces: the library it ships (the program and what it imports,
byte for byte), the timer unit (systemd.timer(5) keys) and the OnCalendar check
(systemd.time(7)). The program itself, run as the host runs it, is
tests/unit/plugins/module_utils/programs/test_audit_program.py."""

import os

from conftest import REPO

from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_timer

PROGRAM = "plugins/module_utils/programs/audit_program.py"


def test_library_holds_the_program_and_what_it_imports_byte_for_byte():
    files = audit_timer.library_files()
    shipped = {rel.split("/tuning/", 1)[1]: data for rel, data in files.items()
               if "/tuning/" in rel}
    for rel in (PROGRAM, "plugins/module_utils/platform/hostfs.py",
                "plugins/module_utils/platform/hostfs_base.py",
                "plugins/module_utils/platform/hostfs_write.py"):
        with open(os.path.join(REPO, rel), "rb") as handle:
            assert shipped[rel] == handle.read(), rel
    # every package folder on the way has its marker; no module (Ansible) is shipped
    assert "plugins/module_utils/programs/__init__.py" in shipped
    assert not [rel for rel in shipped if rel.startswith("plugins/modules/")]


def test_timer_unit_names_the_schedule_and_the_service():
    text = audit_timer.render_timer("Mon..Fri 06:00", randomized_delay=60)
    lines = text.splitlines()
    assert "OnCalendar=Mon..Fri 06:00" in lines and "RandomizedDelaySec=60" in lines
    assert "Unit=%s" % audit_timer.SERVICE_NAME in lines and "Persistent=true" in lines
    assert lines[lines.index("[Install]") + 1] == "WantedBy=timers.target"
    assert text.endswith("\n")


def test_calendar_problem_accepts_systemd_forms_and_names_what_is_wrong(tmp_path):
    root = str(tmp_path)
    for good in ("hourly", "Mon..Fri 06:00", "*-*-* 00/4:00:00", "*:0/15", "@1700000000",
                 "daily UTC"):
        assert audit_timer.calendar_problem(good, root) is None, good
    assert audit_timer.calendar_problem("", root) == "it is empty"
    assert "control character" in audit_timer.calendar_problem("daily\nExecStart=x", root)
    assert "25" in audit_timer.calendar_problem("25:00", root)
    # a named zone is looked up under the root, never this machine's /usr/share/zoneinfo
    assert audit_timer.calendar_problem("daily Europe/Berlin", root) == (
        "time zone 'Europe/Berlin' is not in %s/usr/share/zoneinfo" % root)
    zone = tmp_path / "usr/share/zoneinfo/Europe/Berlin"
    zone.parent.mkdir(parents=True)
    zone.write_bytes(b"TZif2")
    assert audit_timer.calendar_problem("daily Europe/Berlin", root) is None
