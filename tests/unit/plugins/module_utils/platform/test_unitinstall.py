"""unitinstall: installing a boot-time program's files on a host tree (the library folder
with the collection's package markers, the unit, its ``WantedBy=`` link as ``systemctl
enable`` makes it), planning create/update/ok/remove, and removing only what the installer
wrote, keeping folders that hold someone else's files. Used by boot_service and
audit_timer (their module tests run the whole install)."""

import os
import stat

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import unitinstall

LIB = "/usr/local/lib/gpuhost-tuning"
CONF = "/etc/gpuhost-tuning/boot.json"
INIT = b"# gpuhost.tuning package marker\n"
UNIT = "/etc/systemd/system/gpuhost-tuning.service"
WANTS = "/etc/systemd/system/multi-user.target.wants/gpuhost-tuning.service"


def _files():
    files = dict((LIB + "/" + k, v.encode() if isinstance(v, str) else v)
                 for k, v in unitinstall.package_markers(INIT).items())
    pkg = LIB + "/" + unitinstall.OWN_PACKAGE + "/plugins/module_utils/"
    files[pkg + "platform/hostfs.py"] = b"# hostfs\n"
    files[pkg + "engines/tune/boot_program.py"] = b"# bootapply\n"
    files[CONF] = b"{}\n"
    files[UNIT] = b"[Unit]\nDescription=gpuhost tuning\n"
    return files


def _full(root, path):
    return os.path.join(root, path.lstrip("/"))


def test_package_markers_cover_every_package_folder():
    markers = unitinstall.package_markers("x")
    assert sorted(markers) == sorted(p + "/__init__.py" for p in unitinstall.PACKAGES)
    assert set(markers.values()) == {"x"}


def test_plan_then_write_then_nothing_to_do(tmp_path):
    root = str(tmp_path)
    files = _files()
    plan = unitinstall.plan_files(root, files, LIB, INIT)
    assert set(a for _p, a in plan) == {"create"} and [p for p, _a in plan] == sorted(files)
    unitinstall.write_files(root, files, plan)
    for path, data in files.items():
        with open(_full(root, path), "rb") as handle:
            assert handle.read() == data
        assert stat.S_IMODE(os.stat(_full(root, path)).st_mode) == 0o644
    assert set(a for _p, a in unitinstall.plan_files(root, files, LIB, INIT)) == {"ok"}
    changed = dict(files)
    changed[CONF] = b'{"a": 1}\n'
    assert dict(unitinstall.plan_files(root, changed, LIB, INIT))[CONF] == "update"


def test_a_library_file_this_version_no_longer_ships_is_removed_others_kept(tmp_path):
    root = str(tmp_path)
    files = _files()
    unitinstall.write_files(root, files, unitinstall.plan_files(root, files, LIB, INIT))
    theirs = _full(root, LIB + "/site-note.txt")
    with open(theirs, "w") as handle:
        handle.write("an operator's file\n")
    newer = dict(files)
    old = [p for p in files if p.endswith("engines/tune/boot_program.py")][0]
    del newer[old]
    plan = unitinstall.plan_files(root, newer, LIB, INIT)
    assert (old, "remove") in plan
    assert not [p for p, a in plan if a == "remove" and p.endswith("site-note.txt")]


def test_a_marker_with_other_text_is_not_the_installers(tmp_path):
    root = str(tmp_path)
    files = _files()
    unitinstall.write_files(root, files, unitinstall.plan_files(root, files, LIB, INIT))
    marker = _full(root, LIB + "/ansible_collections/__init__.py")
    with open(marker, "wb") as handle:
        handle.write(b"# someone else's namespace package\n")
    owned = unitinstall.owned_library_files(root, LIB, INIT)
    assert LIB + "/ansible_collections/__init__.py" not in owned
    assert LIB + "/ansible_collections/gpuhost/__init__.py" in owned


def test_wants_link(tmp_path):
    root = str(tmp_path)
    assert not unitinstall.wants_link_ok(root, WANTS, UNIT)
    unitinstall.make_wants_link(root, WANTS, UNIT)
    assert os.readlink(_full(root, WANTS)) == UNIT
    assert unitinstall.wants_link_ok(root, WANTS, UNIT)
    os.unlink(_full(root, WANTS))
    os.symlink("/dev/null", _full(root, WANTS))
    assert not unitinstall.wants_link_ok(root, WANTS, UNIT)
    unitinstall.make_wants_link(root, WANTS, UNIT)
    assert unitinstall.wants_link_ok(root, WANTS, UNIT)


def test_remove_installed_keeps_folders_with_foreign_files(tmp_path):
    root = str(tmp_path)
    files = _files()
    unitinstall.write_files(root, files, unitinstall.plan_files(root, files, LIB, INIT))
    unitinstall.make_wants_link(root, WANTS, UNIT)
    with open(_full(root, "/etc/gpuhost-tuning/notes.txt"), "w") as handle:
        handle.write("keep me\n")
    paths = [UNIT, WANTS, CONF, LIB]
    kept = unitinstall.remove_installed(root, paths, CONF, INIT, name="boot_service")
    assert [k["path"] for k in kept] == ["/etc/gpuhost-tuning"]
    assert "holds 1 file(s) boot_service did not install (/etc/gpuhost-tuning/notes.txt)" in \
        kept[0]["reason"]
    assert os.path.exists(_full(root, "/etc/gpuhost-tuning/notes.txt"))
    for path in (UNIT, WANTS, CONF, LIB):
        assert not os.path.lexists(_full(root, path)), path
    assert unitinstall.installed_paths(root, paths, INIT) == []


def test_not_live_on_a_tree(tmp_path):
    assert unitinstall.not_live(str(tmp_path), None) == "root is %s, not the live host" % (
        tmp_path)
