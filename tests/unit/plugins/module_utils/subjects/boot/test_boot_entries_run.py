"""module_utils/bootloader_entries: the boot_entries pass (entries checked against the wanted
parameters and kernels) on a Debian GRUB host built under tmp_path (grub.cfg as grub-mkconfig
writes it: tests/fixtures/bootloader.py)."""

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_entries_run
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import boot_grub
from fixtures import boot
from fixtures import bootloader as fx

KERNELS = ["6.1.0-55-amd64", "6.1.0-56-amd64"]


def _options(root, **given):
    p = {"root": root, "backend": "grub", "esp_dirs": [], "mount_esps": True,
         "grub_cfg": list(boot_grub.GRUB_CFGS), "params": {}, "absent": [], "kernels": [],
         "require": False, "require_next_boot": None}
    p.update(given)
    return p


def _grub_host(tmp_path, opts="quiet"):
    root = str(tmp_path)
    boot.debian_grub(root, default=opts)
    fx.grub_cfg(root, KERNELS, default_opts=opts)
    return root


def test_entries_and_grub_refs_of_a_grub_host(tmp_path):
    root = _grub_host(tmp_path, "quiet amd_pstate=active")
    result, failure = boot_entries_run.entries_run(_options(root, params={"amd_pstate": "active"},
                                                            kernels=KERNELS, require=True))
    assert failure is None and result["check"]["ok"] and result["changed"] is False
    assert result["next_boot_kernel"] == "6.1.0-56-amd64"
    assert set(result["entries"][0]) == set(boot_entries_run.ENTRY_KEYS)
    # only entries in the submenu get an id path; recovery entries never
    assert sorted(result["grub_ref"]) == KERNELS
    for kernel in KERNELS:  # the newest also has the top-level entry: its ref is the submenu's
        assert result["grub_ref"][kernel] == "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (
            fx.ROOT_UUID, kernel, fx.ROOT_UUID)


def test_require_names_every_problem(tmp_path):
    root = _grub_host(tmp_path)
    p = _options(root, params={"amd_pstate": "active"}, require_next_boot="6.1.0-55-amd64")
    result, failure = boot_entries_run.entries_run(p)
    assert not result["check"]["ok"] and failure is None  # require off: reported only
    result, failure = boot_entries_run.entries_run(dict(p, require=True))
    assert failure.startswith("boot entries do not match: ")
    assert "amd_pstate=active" in failure
    assert "will boot 6.1.0-56-amd64 next (set default=0), not 6.1.0-55-amd64" in failure


def test_entries_check_without_wants_is_ok_and_without_entries_is_not():
    found = {"entries": [], "unreadable_esps": [], "backend": "systemd-boot",
             "tool": "proxmox-boot-tool"}
    assert boot_entries_run.entries_check(found, {}, [], []) == {"ok": True, "problems": [], "checked": []}  # noqa: E501
    check = boot_entries_run.entries_check(found, {"amd_pstate": "active"}, [], [])
    assert not check["ok"]
    assert check["problems"][0] == ("no boot entries found (systemd-boot, proxmox-boot-tool): "
                                    "pass esp_dirs")


def test_entries_check_counts_an_unreadable_esp(tmp_path):
    root = _grub_host(tmp_path, "quiet amd_pstate=active")
    cfg = boot_grub.read_grub(root)
    found = {"entries": cfg["entries"], "backend": "systemd-boot", "tool": "proxmox-boot-tool",
             "unreadable_esps": [{"uuid": "9B2E-A7D3", "error": "mount failed"}]}
    check = boot_entries_run.entries_check(found, {"amd_pstate": "active"}, [], [])
    assert not check["ok"] and check["problems"] == ["ESP 9B2E-A7D3 unreadable: mount failed"]
