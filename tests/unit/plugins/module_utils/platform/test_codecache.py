"""codecache: the host's bytecode cache is used only when it can be trusted, keeps a file's
code per version of the file, stays bounded, and writes nothing when every file is found.

The run-level view (a second module call compiles nothing, a changed file is compiled
again, a traceback names the current zip) is in test_zipload.py.
"""

import os
import pwd
import time

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import codecache

SOURCE = b"VALUE = 41 + 1\n"
INNER = "ansible_collections/gpuhost/tuning/plugins/module_utils/leaf.py"


def code_of(source=SOURCE):
    return compile(source, "/tmp/x.zip/" + INNER, "exec", dont_inherit=True)


def run(code):
    space = {}
    exec(code, space)
    return space["VALUE"]


def test_folder_from_the_environment():
    home = pwd.getpwuid(os.geteuid()).pw_dir
    assert codecache.folder_from_env({}) == os.path.join(
        home, ".ansible", "gpuhost-tuning", "pycache")
    for off in ("off", "OFF", "", "0", "no", "relative/path"):
        assert codecache.folder_from_env({codecache.ENV: off}) is None
    assert codecache.folder_from_env({codecache.ENV: "/var/tmp/c"}) == "/var/tmp/c"


def test_kept_code_comes_back_and_a_new_folder_is_private(tmp_path):
    folder = str(tmp_path / "a" / "cache")
    store = codecache.Store(folder)
    assert store.load(INNER, SOURCE) is None            # no folder yet: nothing read
    assert not os.path.exists(folder)
    assert store.save(INNER, SOURCE, code_of()) is True
    assert os.stat(folder).st_mode & 0o777 == 0o700
    (entry,) = os.listdir(folder)
    assert os.stat(os.path.join(folder, entry)).st_mode & 0o777 == 0o600
    fresh = codecache.Store(folder)
    assert run(fresh.load(INNER, SOURCE)) == 42 and fresh.hits == 1


def test_another_source_another_path_another_python_are_other_entries(tmp_path, monkeypatch):
    store = codecache.Store(str(tmp_path / "c"))
    store.save(INNER, SOURCE, code_of())
    assert store.load(INNER, b"VALUE = 1\n") is None
    assert store.load(INNER.replace("leaf", "other"), SOURCE) is None
    monkeypatch.setattr(codecache.importlib.util, "MAGIC_NUMBER", b"\x00\x00\r\n")
    assert store.load(INNER, SOURCE) is None


def test_a_folder_others_may_enter_or_a_linked_folder_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o755)
    store = codecache.Store(str(shared))
    assert store.save(INNER, SOURCE, code_of()) is False
    assert os.listdir(str(shared)) == []
    decoy = tmp_path / "decoy"
    decoy.mkdir(mode=0o700)
    codecache.Store(str(decoy)).save(INNER, SOURCE, code_of())
    planted = tmp_path / "planted"
    os.symlink(str(decoy), str(planted))
    linked = codecache.Store(str(planted))
    assert linked.load(INNER, SOURCE) is None
    assert linked.save(INNER, SOURCE, code_of()) is False
    assert len(os.listdir(str(decoy))) == 1


def test_an_entry_that_is_a_link_shared_too_big_or_damaged_is_not_loaded(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    store = codecache.Store(str(folder))
    store.save(INNER, SOURCE, code_of())
    (name,) = os.listdir(str(folder))
    entry = folder / name
    good = entry.read_bytes()

    decoy = tmp_path / "decoy.pyc"
    decoy.write_bytes(good)
    entry.unlink()
    os.symlink(str(decoy), str(entry))
    assert codecache.Store(str(folder)).load(INNER, SOURCE) is None
    entry.unlink()

    entry.write_bytes(good)
    os.chmod(str(entry), 0o620)
    assert codecache.Store(str(folder)).load(INNER, SOURCE) is None
    os.chmod(str(entry), 0o600)
    assert codecache.Store(str(folder)).load(INNER, SOURCE) is not None

    flipped = bytearray(good)
    flipped[-5] ^= 0x01                                   # one bit of the code itself
    for damaged in (good[:-3], good[:10], b"\x00" * len(good), bytes(flipped)):
        entry.write_bytes(damaged)
        assert codecache.Store(str(folder)).load(INNER, SOURCE) is None, damaged[:12]

    entry.write_bytes(good)
    monkeypatch.setattr(codecache, "ENTRY_MAX", len(good) - 1)
    assert codecache.Store(str(folder)).load(INNER, SOURCE) is None


def test_old_entries_go_on_the_first_write_and_the_count_is_capped(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    store = codecache.Store(str(folder))
    for index in range(5):
        store.save(INNER, b"VALUE = %d\n" % index, code_of(b"VALUE = %d\n" % index))
    names = sorted(os.listdir(str(folder)), key=lambda n: n)
    old = time.time() - (codecache.KEEP_DAYS + 1) * 86400
    stale = names[0]
    os.utime(str(folder / stale), (old, old))
    for rank, name in enumerate(names[1:]):               # oldest first by mtime
        os.utime(str(folder / name), (time.time() - 100 + rank, time.time() - 100 + rank))
    (folder / ".left.1.tmp").write_bytes(b"x")
    os.utime(str(folder / ".left.1.tmp"), (old, old))
    unrelated = folder / "notes.txt"
    unrelated.write_bytes(b"mine")
    monkeypatch.setattr(codecache, "ENTRIES_MAX", 3)
    second = codecache.Store(str(folder))
    second.save(INNER, b"VALUE = 99\n", code_of(b"VALUE = 99\n"))
    left = set(os.listdir(str(folder)))
    assert stale not in left and ".left.1.tmp" not in left and "notes.txt" in left
    assert names[1] not in left                               # the oldest beyond the cap
    assert len([n for n in left if n.endswith(".pyc")]) == 4  # 3 kept + the new one


def test_a_run_that_finds_everything_writes_nothing(tmp_path):
    folder = tmp_path / "c"
    codecache.Store(str(folder)).save(INNER, SOURCE, code_of())
    before = {n: os.stat(str(folder / n)).st_mtime_ns for n in os.listdir(str(folder))}
    store = codecache.Store(str(folder))
    assert run(store.load(INNER, SOURCE)) == 42
    assert store.writes == 0
    assert {n: os.stat(str(folder / n)).st_mtime_ns for n in os.listdir(str(folder))} == before


def test_a_folder_that_cannot_be_made_only_means_no_cache(tmp_path):
    (tmp_path / "c").write_bytes(b"not a folder")
    store = codecache.Store(str(tmp_path / "c" / "sub"))
    assert store.save(INNER, SOURCE, code_of()) is False
    assert store.load(INNER, SOURCE) is None
    assert (tmp_path / "c").read_bytes() == b"not a folder"


def test_a_folder_or_entry_of_another_user_is_not_used(tmp_path):
    """A cache another user could have written (as root here: chown to nobody) is never
    loaded: its code would run as this user."""
    if os.geteuid() != 0:
        pytest.skip("only root can make a file of another user here")
    nobody = pwd.getpwnam("nobody").pw_uid
    folder = tmp_path / "c"
    codecache.Store(str(folder)).save(INNER, SOURCE, code_of())
    (name,) = os.listdir(str(folder))
    os.chown(str(folder / name), nobody, -1)
    assert codecache.Store(str(folder)).load(INNER, SOURCE) is None
    os.chown(str(folder / name), 0, -1)
    assert codecache.Store(str(folder)).load(INNER, SOURCE) is not None
    os.chown(str(folder), nobody, -1)
    theirs = codecache.Store(str(folder))
    assert theirs.load(INNER, SOURCE) is None
    assert theirs.save(INNER, b"VALUE = 7\n", code_of(b"VALUE = 7\n")) is False
    assert os.listdir(str(folder)) == [name]
