"""dkms status parsing (both formats) and the offline tree reader."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.dkms import dkms
from fixtures import dkms as fx

NEW_FORMAT = "\n".join([
    "nvidia/590.48.01, 6.14.11-5-bpo12-pve, x86_64: installed",
    "nvidia/590.48.01, 6.8.12-9-pve, x86_64: installed"
    " (WARNING! Diff between built and installed module!)",
    "",
    "zfs/2.2.7: added",
    "nvidia-current/535.216.01, 6.1.0-56-amd64, x86_64: built (original_module exists)"
    " (WARNING! Missing some built modules!)",
    "",
])

OLD_FORMAT = """nvidia, 470.57.02, 5.10.0-8-amd64, x86_64: installed
nvidia, 470.57.02, 5.10.0-9-amd64, x86_64: installed (Original modules exist)
virtualbox, 6.1.26: added
"""


def test_parse_new_format_with_warnings_and_blank_lines():
    entries = dkms.parse_status(NEW_FORMAT)
    assert len(entries) == 4
    assert entries[0] == {
        "name": "nvidia", "version": "590.48.01", "kernel": "6.14.11-5-bpo12-pve",
        "arch": "x86_64", "state": "installed", "warning": None, "warnings": []}
    assert entries[1]["warning"] == "WARNING! Diff between built and installed module!"
    assert entries[1]["state"] == "installed"
    assert entries[2]["kernel"] is None and entries[2]["state"] == "added"
    assert entries[3]["state"] == "built"
    assert entries[3]["warnings"] == ["original_module exists",
                                      "WARNING! Missing some built modules!"]


def test_parse_old_format():
    entries = dkms.parse_status(OLD_FORMAT)
    assert [(e["name"], e["version"], e["kernel"], e["arch"], e["state"]) for e in entries] == [
        ("nvidia", "470.57.02", "5.10.0-8-amd64", "x86_64", "installed"),
        ("nvidia", "470.57.02", "5.10.0-9-amd64", "x86_64", "installed"),
        ("virtualbox", "6.1.26", None, None, "added"),
    ]
    assert entries[1]["warning"] == "Original modules exist"


def test_parse_ignores_error_lines_and_broken_state():
    text = ("Error! Could not locate dkms.conf file.\n"
            "nvidia/590.48.01: broken\n")
    entries = dkms.parse_status(text)
    assert [(e["name"], e["state"]) for e in entries] == [("nvidia", "broken")]


def test_state_for_unbuilt_kernel_is_added():
    entries = dkms.parse_status(NEW_FORMAT)
    assert dkms.state_for(entries, "nvidia", "590.48.01", "6.8.12-9-pve") == "installed"
    assert dkms.state_for(entries, "zfs", "2.2.7", "6.8.12-9-pve") == "added"
    assert dkms.state_for(entries, "nvidia", "1.0", "6.8.12-9-pve") is None


def _key(entries):
    return [(e["name"], e["version"], e["kernel"], e["arch"], e["state"], e["warning"])
            for e in entries]


def test_tree_status_on_seed(tmp_path):
    fx.seed(tmp_path)
    entries = dkms.tree_status(str(tmp_path))
    assert _key(entries) == [("nvidia", "590.48.01", "6.8.12-9-pve", "x86_64", "installed",
                              None)]
    assert "/lib/modules/6.8.12-9-pve/updates/dkms/nvidia-uvm.ko" in entries[0]["modules"]
    assert len(entries[0]["modules"]) == 5


def test_tree_status_added_built_installed(tmp_path):
    fx.kernel_tree(tmp_path, "6.8.12-9-pve")
    fx.kernel_tree(tmp_path, "6.14.11-5-bpo12-pve")
    fx.dkms_tree(tmp_path, "nvidia", "590.48.01", built=["6.14.11-5-bpo12-pve"],
                 installed=["6.8.12-9-pve"])
    fx.dkms_tree(tmp_path, "zfs", "2.2.7", modules=("zfs",))
    assert _key(dkms.tree_status(str(tmp_path))) == [
        ("nvidia", "590.48.01", "6.8.12-9-pve", "x86_64", "installed", None),
        ("nvidia", "590.48.01", "6.14.11-5-bpo12-pve", "x86_64", "built", None),
        ("zfs", "2.2.7", None, None, "added", None),
    ]


def test_tree_status_warns_like_dkms_when_installed_copy_differs_or_is_gone(tmp_path):
    fx.seed(tmp_path)
    ko = tmp_path / "lib/modules/6.8.12-9-pve/updates/dkms/nvidia.ko"
    ko.write_bytes(ko.read_bytes() + b"x")
    entry = dkms.tree_status(str(tmp_path))[0]
    assert entry["warning"] == "WARNING! Diff between built and installed module!"
    os.unlink(ko)
    entry = dkms.tree_status(str(tmp_path))[0]
    assert entry["state"] == "installed"
    assert entry["warning"] == "WARNING! Diff between built and installed module!"
    assert "/lib/modules/6.8.12-9-pve/updates/dkms/nvidia.ko" not in entry["modules"]


def test_tree_status_partial_build_is_not_built(tmp_path):
    # dkms counts a kernel as built only when every module of dkms.conf is there
    fx.kernel_tree(tmp_path, "6.8.12-9-pve")
    fx.dkms_tree(tmp_path, built=["6.8.12-9-pve"])
    os.unlink(tmp_path / "var/lib/dkms/nvidia/590.48.01/6.8.12-9-pve/x86_64/module/nvidia-drm.ko")
    assert _key(dkms.tree_status(str(tmp_path))) == [
        ("nvidia", "590.48.01", None, None, "added", None)]


def test_tree_status_link_to_other_version_is_built_only(tmp_path):
    fx.kernel_tree(tmp_path, "6.8.12-9-pve")
    fx.dkms_tree(tmp_path, "nvidia", "580.159.04", installed=["6.8.12-9-pve"])
    fx.dkms_tree(tmp_path, "nvidia", "590.48.01", built=["6.8.12-9-pve"])
    states = {(e["version"], e["state"]) for e in dkms.tree_status(str(tmp_path))}
    assert states == {("580.159.04", "installed"), ("590.48.01", "built")}


def test_compressed_modules_found(tmp_path):
    fx.kernel_tree(tmp_path, "6.8.0-45-generic")
    fx.dkms_tree(tmp_path, "nvidia-srv", "550.127.05", installed=["6.8.0-45-generic"],
                 suffix=".ko.zst")
    found = dkms.installed_modules(str(tmp_path), "nvidia-srv", "550.127.05", "6.8.0-45-generic")
    assert found[0] == "/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst"
    assert len(found) == 5
    assert dkms.tree_status(str(tmp_path))[0]["state"] == "installed"


def test_installed_modules_none_for_new_kernel(tmp_path):
    fx.seed(tmp_path)
    assert dkms.installed_modules(str(tmp_path), "nvidia", "590.48.01",
                                  "6.14.11-5-bpo12-pve") == []


def test_coverage_flags_the_seed_near_miss(tmp_path):
    fx.seed(tmp_path)
    rows = dkms.coverage(str(tmp_path))
    assert [(r["kernel"], r["name"], r["version"], r["state"], r["ok"], r["headers"])
            for r in rows] == [
        ("6.8.12-9-pve", "nvidia", "590.48.01", "installed", True, True),
        ("6.14.11-5-bpo12-pve", "nvidia", "590.48.01", "added", False, False),
    ]
    assert rows[1]["headers_package"] == "proxmox-headers-6.14.11-5-bpo12-pve"


def test_coverage_from_live_status_entries(tmp_path):
    fx.seed(tmp_path)
    live = dkms.parse_status("nvidia/590.48.01, 6.8.12-9-pve, x86_64: installed\n"
                             "nvidia/590.48.01, 6.14.11-5-bpo12-pve, x86_64: built\n")
    rows = dkms.coverage(str(tmp_path), names=["nvidia"], entries=live)
    assert [r["state"] for r in rows] == ["installed", "built"]


def _entry(name, version, kernel, state="installed"):
    return {"name": name, "version": version, "kernel": kernel, "arch": "x86_64",
            "state": state, "warning": None}


def test_needed_modules_are_those_of_the_running_kernel():
    entries = [_entry("nvidia", "570.133.20", "6.8.12-9-pve"),
               _entry("hello", "1.0", "6.5.13-6-pve"),
               _entry("nvidia", "570.133.20", "6.14.11-5-bpo12-pve", "added")]
    assert dkms.needed_modules(entries, "6.8.12-9-pve", "6.14.11-5-bpo12-pve") == ["nvidia"]
    assert dkms.installed_basis(entries, "6.8.12-9-pve", "6.14.11-5-bpo12-pve") == (
        {"nvidia": "570.133.20"}, {"nvidia": "6.8.12-9-pve"})


def test_needed_modules_when_the_running_kernel_has_none():
    # booted from outside the root: the newest other kernel's version stands in, and what is
    # installed only for the next kernel itself is not a need
    entries = [_entry("nvidia", "550.144.03", "6.8.12-4-pve"),
               _entry("nvidia", "570.133.20", "6.8.12-9-pve"),
               _entry("gdrdrv", "2.4", "6.14.11-5-bpo12-pve"),
               _entry("hello", "1.0", "6.8.12-9-pve", "built")]
    assert dkms.installed_basis(entries, "6.1.0-56-amd64", "6.14.11-5-bpo12-pve") == (
        {"nvidia": "570.133.20"}, {"nvidia": "6.8.12-9-pve"})
    assert dkms.needed_modules(entries, None, "6.14.11-5-bpo12-pve") == ["nvidia"]
    assert dkms.needed_modules([], "6.8.12-9-pve", "6.14.11-5-bpo12-pve") == []


def test_tree_status_words_warnings_as_the_installed_dkms_does(tmp_path):
    """dkms 3.2.2 (Debian 13, Proxmox VE 9) rewords the status warnings and prints the diff
    one once (its module_status_built_extra; tests/integration/test_dkms_real.py checks it
    against the real program): the version comes from dpkg's status under the root."""
    fx.seed(tmp_path)
    ko = tmp_path / "lib/modules/6.8.12-9-pve/updates/dkms/nvidia.ko"
    ko.write_bytes(ko.read_bytes() + b"x")
    (tmp_path / "var/lib/dpkg").mkdir(parents=True, exist_ok=True)
    status = tmp_path / "var/lib/dpkg/status"
    for version, words in (("3.0.10-8+deb12u1", "3.0"), ("3.2.2-1~deb13u1", "3.2")):
        status.write_text("Package: dkms\nStatus: install ok installed\nVersion: %s\n\n"
                          % version)
        assert dkms.wording(str(tmp_path)) == words
        entry = dkms.tree_status(str(tmp_path))[0]
        assert entry["warnings"] == [dkms.WARNINGS[words]["diff"]]
    assert entry["warning"] == "Differences between built and installed modules"
    status.unlink()
    assert dkms.wording(str(tmp_path)) == "3.0"
