"""The test doubles of `proxmox-boot-tool` and `pct` (tests/doubles/), run against temporary
trees: the real tools' output formats, exit codes, state changes and the call log.

Other tests and the molecule scenarios trust these doubles to behave like the real tools,
so a double that drifts from the real format is a defect these tests must catch.
"""

import json
import os
import subprocess
import sys

import pytest

from fixtures import lxc

DOUBLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "doubles")
PBT = os.path.join(DOUBLES, "proxmox-boot-tool")
PCT = os.path.join(DOUBLES, "pct")

OLD, NEW = "6.8.12-9-pve", "6.14.11-5-bpo12-pve"
UUID = "2E5C-8A1F"
CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active processor.max_cstate=1"


def run(tool, root, *args, env=None):
    full_env = dict(os.environ, GPUHOST_DOUBLES_ROOT=str(root),
                    GPUHOST_DOUBLES_RUNNING_KERNEL=OLD)
    for key in ("GPUHOST_DOUBLES_LOG", "GPUHOST_DOUBLES_STATE", "GPUHOST_ESP_DIR",
                "GPUHOST_DOUBLES_BOOT_MODE"):
        full_env.pop(key, None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, tool] + list(args), env=full_env, check=False,
                          capture_output=True, text=True, timeout=60)


def pbt(root, *args, **kw):
    return run(PBT, root, *args, **kw)


def pct(root, *args, **kw):
    return run(PCT, root, *args, **kw)


def calls(root):
    with open(os.path.join(str(root), "var/log/gpuhost-doubles.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def read(root, path):
    """`path` as the host names it (under root), or a full path already under root."""
    if not path.startswith(str(root)):
        path = os.path.join(str(root), path.lstrip("/"))
    with open(path) as handle:
        return handle.read()


def write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


def install_kernel(root, kver, initrd=True):
    write(root, "/boot/vmlinuz-" + kver, "kernel image %s\n" % kver)
    write(root, "/boot/config-" + kver, "CONFIG_X86_64=y\n")
    if initrd:
        write(root, "/boot/initrd.img-" + kver, "initramfs of %s\n" % kver)


@pytest.fixture
def pve(tmp_path):
    """A systemd-boot Proxmox host: two kernels, /etc/kernel/cmdline, no ESP yet."""
    install_kernel(tmp_path, OLD)
    install_kernel(tmp_path, NEW)
    write(tmp_path, "/etc/kernel/cmdline", CMDLINE + "\n")
    write(tmp_path, "/proc/cmdline", "initrd=\\EFI\\proxmox\\%s\\initrd.img-%s %s\n"
          % (OLD, OLD, "root=ZFS=rpool/ROOT/pve-1 boot=zfs"))
    return tmp_path


def esp(root, *parts):
    return os.path.join(str(root), "var/lib/gpuhost-doubles/esp", UUID, *parts)


@pytest.fixture
def booted(pve):
    """The same host with one ESP initialised (systemd-boot) and refreshed."""
    res = pbt(pve, "init", "/dev/disk/by-uuid/" + UUID.lower())
    assert res.returncode == 0, res.stderr
    return pve


# --- proxmox-boot-tool ----------------------------------------------------------------

def test_status_without_esp_list_exits_2_like_a_grub_host(pve):
    res = pbt(pve, "status")
    assert res.returncode == 2
    assert res.stderr == "E: /etc/kernel/proxmox-boot-uuids does not exist.\n"
    assert res.stdout == "Re-executing '%s' in new private mount namespace..\n" % PBT
    quiet = pbt(pve, "status", "--quiet")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (2, "", "")


def test_status_lists_each_esp_with_its_kernel_versions(booted):
    res = pbt(booted, "status")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "Re-executing '%s' in new private mount namespace.." % PBT,
        "System currently booted with uefi",
        "%s is configured with: uefi (versions: %s, %s)" % (UUID, NEW, OLD),
    ]
    assert pbt(booted, "status", "--quiet").stdout == ""


def test_status_warns_and_skips_an_esp_that_is_gone(booted):
    with open(os.path.join(str(booted), "etc/kernel/proxmox-boot-uuids"), "a") as handle:
        handle.write("7A1C-0B3D\n")
    res = pbt(booted, "status")
    assert res.returncode == 0
    assert "WARN: /dev/disk/by-uuid/7A1C-0B3D does not exist - clean " \
        "'/etc/kernel/proxmox-boot-uuids'! - skipping" in res.stderr
    assert "7A1C-0B3D is configured" not in res.stdout


def test_legacy_boot_reports_bios(booted):
    res = pbt(booted, "status", env={"GPUHOST_DOUBLES_BOOT_MODE": "legacy"})
    assert "System currently booted with legacy bios" in res.stdout


def test_refresh_writes_real_loader_entries_from_etc_kernel_cmdline(booted):
    entry = read(booted, esp(booted, "loader/entries/proxmox-%s.conf" % NEW))
    assert entry == (
        "title    Proxmox Virtual Environment\n"
        "version  %s\n"
        "options  %s\n"
        "linux    /EFI/proxmox/%s/vmlinuz-%s\n"
        "initrd   /EFI/proxmox/%s/initrd.img-%s\n" % (NEW, CMDLINE, NEW, NEW, NEW, NEW))
    assert read(booted, esp(booted, "EFI/proxmox", NEW, "initrd.img-" + NEW)) == \
        "initramfs of %s\n" % NEW
    assert read(booted, esp(booted, "loader/loader.conf")) == "timeout 3\ndefault proxmox-*\n"


def test_refresh_copies_the_current_initrd_so_a_regenerated_one_lands_on_the_esp(booted):
    write(booted, "/boot/initrd.img-" + NEW, "initramfs of %s with uvm_disable_hmm=1\n" % NEW)
    assert pbt(booted, "refresh").returncode == 0
    assert "uvm_disable_hmm=1" in read(
        booted, esp(booted, "EFI/proxmox", NEW, "initrd.img-" + NEW))


def test_refresh_output_and_cmdline_change_reach_every_entry(booted):
    write(booted, "/etc/kernel/cmdline", CMDLINE + " nmi_watchdog=0\n")
    res = pbt(booted, "refresh")
    assert res.returncode == 0
    assert res.stdout.splitlines() == [
        "Running hook script 'proxmox-auto-removal'..",
        "Running hook script 'zz-proxmox-boot'..",
        "Re-executing '/etc/kernel/postinst.d/zz-proxmox-boot' in new private mount "
        "namespace..",
    ]
    assert "Copying and configuring kernels on /dev/disk/by-uuid/%s" % UUID in res.stderr
    assert "\tCopying kernel and creating boot-entry for %s" % NEW in res.stderr
    for kver in (OLD, NEW):
        entry = read(booted, esp(booted, "loader/entries/proxmox-%s.conf" % kver))
        assert "options  %s nmi_watchdog=0\n" % CMDLINE in entry


def test_refresh_refuses_a_cmdline_without_root_and_changes_nothing(booted, snapshot_tree):
    before = snapshot_tree(esp(booted))
    write(booted, "/etc/kernel/cmdline", "amd_pstate=active\n")
    res = pbt(booted, "refresh")
    assert res.returncode == 1
    assert "No root= parameter in /etc/kernel/cmdline found!" in res.stderr
    assert snapshot_tree(esp(booted)) == before


def test_refresh_falls_back_to_proc_cmdline_without_initrd(booted):
    os.unlink(os.path.join(str(booted), "etc/kernel/cmdline"))
    res = pbt(booted, "refresh")
    assert res.returncode == 0
    assert "No /etc/kernel/cmdline found - falling back to /proc/cmdline" in res.stderr
    entry = read(booted, esp(booted, "loader/entries/proxmox-%s.conf" % OLD))
    assert "options  root=ZFS=rpool/ROOT/pve-1 boot=zfs\n" in entry


def test_refresh_skips_a_kernel_without_initrd(booted):
    install_kernel(booted, "6.14.11-6-bpo12-pve", initrd=False)
    res = pbt(booted, "refresh")
    assert "No initrd-image /boot/initrd.img-6.14.11-6-bpo12-pve found - skipping" in res.stderr
    assert not os.path.exists(esp(booted, "loader/entries/proxmox-6.14.11-6-bpo12-pve.conf"))


def test_refresh_removes_kernels_no_longer_selected(booted):
    install_kernel(booted, "6.14.11-6-bpo12-pve")
    res = pbt(booted, "refresh")
    assert res.returncode == 0
    # kept: the running kernel (OLD) and the newest two
    assert sorted(os.listdir(esp(booted, "EFI/proxmox"))) == \
        sorted([OLD, NEW, "6.14.11-6-bpo12-pve"])
    res = pbt(booted, "refresh", env={"GPUHOST_DOUBLES_RUNNING_KERNEL": NEW})
    assert "\tRemoving old version %s" % OLD in res.stderr
    assert sorted(os.listdir(esp(booted, "EFI/proxmox"))) == sorted([NEW, "6.14.11-6-bpo12-pve"])
    assert not os.path.exists(esp(booted, "loader/entries/proxmox-%s.conf" % OLD))


def test_kernel_list_exact_format_with_manual_pin_and_next_boot(booted):
    res = pbt(booted, "kernel", "list")
    assert res.stdout == ("Manually selected kernels:\nNone.\n\n"
                          "Automatically selected kernels:\n%s\n%s\n" % (NEW, OLD))
    install_kernel(booted, "6.5.13-6-pve")
    assert pbt(booted, "kernel", "add", "6.5.13-6-pve").stdout == (
        "Added kernel '6.5.13-6-pve' to manual kernel list. Use the 'refresh' command to "
        "update the ESPs.\n")
    assert pbt(booted, "kernel", "pin", OLD).returncode == 0
    assert pbt(booted, "kernel", "pin", NEW, "--next-boot").returncode == 0
    res = pbt(booted, "kernel", "list")
    assert res.stdout == (
        "Manually selected kernels:\n6.5.13-6-pve\n\n"
        "Automatically selected kernels:\n%s\n%s\n\n"
        "Pinned kernel:\n%s\n\n"
        "Kernel pinned on next-boot:\n%s\n" % (NEW, OLD, OLD, NEW))


def test_pin_and_next_boot_pin_drive_the_loader_default(booted):
    res = pbt(booted, "kernel", "pin", OLD)
    assert res.stdout == ("Set kernel '%s' in /etc/kernel/proxmox-boot-pin. Use the 'refresh' "
                          "command to update the ESPs.\n" % OLD)
    assert read(booted, "/etc/kernel/proxmox-boot-pin") == OLD + "\n"
    # a pin alone changes nothing on the ESP until refresh (as the real tool)
    assert "default proxmox-*" in read(booted, esp(booted, "loader/loader.conf"))
    pbt(booted, "refresh")
    assert read(booted, esp(booted, "loader/loader.conf")) == \
        "timeout 3\ndefault proxmox-%s.conf\n" % OLD

    res = pbt(booted, "kernel", "pin", NEW, "--next-boot")
    assert res.stdout.endswith("Pinned for next boot only.\n")
    assert read(booted, "/etc/kernel/next-boot-pin") == NEW + "\n"
    pbt(booted, "refresh")
    assert "default proxmox-%s.conf\n" % NEW in read(booted, esp(booted, "loader/loader.conf"))

    res = pbt(booted, "kernel", "unpin", "--next-boot")
    assert res.stdout == ("Removed /etc/kernel/next-boot-pin.\nUnpinned kernel '%s'. Use the "
                          "'refresh' command to update the ESPs.\n" % NEW)
    pbt(booted, "refresh")
    assert "default proxmox-%s.conf\n" % OLD in read(booted, esp(booted, "loader/loader.conf"))

    res = pbt(booted, "kernel", "unpin")
    assert res.stdout.splitlines()[:2] == ["Removed /etc/kernel/next-boot-pin.",
                                           "Removed /etc/kernel/proxmox-boot-pin."]
    pbt(booted, "refresh")
    assert "default proxmox-*\n" in read(booted, esp(booted, "loader/loader.conf"))


def test_repinning_reports_the_override(booted):
    pbt(booted, "kernel", "pin", OLD)
    res = pbt(booted, "kernel", "pin", NEW)
    assert res.stdout.startswith("Overriding previously pinned version '%s' with '%s'\n"
                                 % (OLD, NEW))


def test_pin_of_a_kernel_without_image_fails_and_lists_candidates(booted):
    res = pbt(booted, "kernel", "pin", "6.17.2-1-pve")
    assert res.returncode == 1
    assert res.stderr == ("E: no kernel image found in /boot for '6.17.2-1-pve', not setting "
                          "default.\n\nPossible Proxmox kernel versions are:\n%s\n%s\n"
                          % (NEW, OLD))
    assert not os.path.exists(os.path.join(str(booted), "etc/kernel/proxmox-boot-pin"))


def test_pin_on_a_grub_host_writes_the_grub_default_snippet(pve):
    write(pve, "/boot/grub/grub.cfg",
          "submenu 'Advanced options for Proxmox VE GNU/Linux' $menuentry_id_option "
          "'gnulinux-advanced-8c3f1e2a9b' {\n")
    res = pbt(pve, "kernel", "pin", NEW)
    assert res.returncode == 0
    assert res.stdout.startswith(
        "Setting '%s' as grub default entry and running update-grub.\n" % NEW)
    assert read(pve, "/etc/default/grub.d/proxmox-kernel-pin.cfg") == (
        'GRUB_DEFAULT="gnulinux-advanced-8c3f1e2a9b>gnulinux-%s-advanced-8c3f1e2a9b"\n' % NEW)
    pbt(pve, "kernel", "unpin")
    assert not os.path.exists(os.path.join(str(pve), "etc/default/grub.d/proxmox-kernel-pin.cfg"))


def test_kernel_add_and_remove_keep_a_sorted_manual_list(booted):
    install_kernel(booted, "6.5.13-6-pve")
    assert pbt(booted, "kernel", "add", "6.5.13-6-pve").returncode == 0
    assert pbt(booted, "kernel", "add", OLD).returncode == 0
    assert read(booted, "/etc/kernel/proxmox-boot-manual-kernels") == \
        "6.5.13-6-pve\n%s\n" % OLD
    bad = pbt(booted, "kernel", "add", "4.19.0-1-pve")
    assert (bad.returncode, bad.stderr) == (
        1, "E: no kernel image found in /boot for '4.19.0-1-pve', not adding.\n")
    assert pbt(booted, "kernel", "remove", OLD).stdout == (
        "Removed kernel '%s' from manual kernel list. Use the 'refresh' command to update the "
        "ESPs.\n" % OLD)
    assert pbt(booted, "kernel", "remove", OLD).stdout == \
        "Kernel '%s' not found in manual kernel list.\n" % OLD
    assert read(booted, "/etc/kernel/proxmox-boot-manual-kernels") == "6.5.13-6-pve\n"


def test_unknown_commands_fail_like_the_real_tool(pve):
    res = pbt(pve, "frobnicate")
    assert res.returncode == 1
    assert res.stderr.startswith("Invalid/unknown command 'frobnicate'.\n\nUSAGE: ")
    res = pbt(pve, "kernel", "explode")
    assert res.returncode == 1
    assert res.stderr.startswith("E: invalid 'kernel' subcommand 'explode'.\n")


def test_every_call_is_logged_with_argv_time_and_exit_code(pve):
    pbt(pve, "status")
    pbt(pve, "kernel", "list")
    log = calls(pve)
    assert [c["argv"] for c in log] == [["proxmox-boot-tool", "status"],
                                        ["proxmox-boot-tool", "kernel", "list"]]
    assert [c["rc"] for c in log] == [2, 0]
    assert all(c["tool"] == "proxmox-boot-tool" and c["time"] > 1.6e9 for c in log)


def test_log_location_can_be_chosen(pve, tmp_path_factory):
    log = tmp_path_factory.mktemp("log") / "calls.jsonl"
    pbt(pve, "status", env={"GPUHOST_DOUBLES_LOG": str(log)})
    assert json.loads(log.read_text())["argv"] == ["proxmox-boot-tool", "status"]


# --- pct ------------------------------------------------------------------------------

NODE = {"node": "pve-gpu07"}


@pytest.fixture
def host(tmp_path):
    """The seed host right after the reboot: new majors in /proc/devices, 129.conf still
    allowing the old ones, both containers stopped."""
    lxc.seed_host(tmp_path, era="after", config_era="before")
    write(tmp_path, "/var/lib/gpuhost-doubles/pct.json", json.dumps(NODE))
    return tmp_path


def state(root):
    return json.loads(read(root, "/var/lib/gpuhost-doubles/pct.json"))


def test_list_has_the_real_columns_sorted_by_vmid(host):
    lxc.write_config(host, 101, "arch: amd64\nlock: backup\nostype: debian\n")
    res = pct(host, "list")
    assert res.returncode == 0
    assert res.stdout.splitlines() == [
        "VMID       Status     Lock         Name                ",
        "101        stopped    backup       CT101               ",
        "129        stopped                 sglang-glm5         ",
        "130        stopped                 metrics             ",
    ]


def test_list_prints_nothing_without_containers(tmp_path):
    res = pct(tmp_path, "list")
    assert (res.returncode, res.stdout) == (0, "")


def test_start_stop_and_status_persist_and_refuse_the_wrong_state(host):
    assert pct(host, "status", "129").stdout == "status: stopped\n"
    res = pct(host, "start", "129")
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    assert pct(host, "status", "129").stdout == "status: running\n"
    assert state(host)["containers"]["129"]["status"] == "running"
    again = pct(host, "start", "129")
    assert (again.returncode, again.stderr) == (255, "CT 129 already running\n")
    assert pct(host, "stop", "129").returncode == 0
    assert pct(host, "status", "129").stdout == "status: stopped\n"
    stopped = pct(host, "stop", "129")
    assert (stopped.returncode, stopped.stderr) == (255, "CT 129 not running\n")
    pct(host, "start", "130")
    assert "130        running    " in pct(host, "list").stdout


def test_unknown_vmid_fails_with_the_pmxcfs_path_and_exit_2(host):
    for args in (["status", "999"], ["start", "999"], ["config", "999"],
                 ["exec", "999", "--", "true"]):
        res = pct(host, *args)
        assert res.returncode == 2, args
        assert res.stderr == "Configuration file 'nodes/pve-gpu07/lxc/999.conf' does not exist\n"


def test_config_prints_the_live_section_sorted_with_pending_applied(host):
    res = pct(host, "config", "129")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    keys = [line.split(":", 1)[0] for line in lines if not line.startswith("lxc.")]
    assert keys == sorted(keys)
    assert "description: SGLang serving GLM-5-NVFP4 (tensor parallel 8)%0Aowner%3A " \
        "ml-platform  ticket%3A INFRA-2291%0A" in lines
    assert "memory: 819200" in lines                      # [pve:pending] applied
    assert "snaptime" not in res.stdout                   # snapshot section ignored
    raw = [line for line in lines if line.startswith("lxc.")]
    assert raw[:4] == ["lxc.cgroup2.devices.allow: c %s:* rwm" % m for m in (195, 504, 507, 226)]
    assert raw.count("lxc.cgroup2.devices.allow: c 504:* rwm") == 1   # pending lxc not merged
    assert lines[-1] == "lxc.mount.entry: /dev/dri dev/dri none bind,optional,create=dir"
    current = pct(host, "config", "129", "--current").stdout
    assert "memory: 786432\n" in current


def test_exec_needs_a_running_container(host):
    res = pct(host, "exec", "129", "--", "nvidia-smi", "-L")
    assert (res.returncode, res.stderr) == (255, "container '129' not running!\n")


def test_error_999_story_old_majors_block_cuda_but_not_nvidia_smi(host):
    """After the kernel upgrade nvidia-uvm moved 504 -> 509; 129.conf still allows 504."""
    assert pct(host, "start", "129").returncode == 0
    smi = pct(host, "exec", "129", "--", "nvidia-smi", "-L")
    assert smi.returncode == 0
    gpus = smi.stdout.splitlines()
    assert len(gpus) == 8
    assert gpus[0].startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")
    torch = pct(host, "exec", "129", "--", "python3", "-c",
                "import torch; print(torch.cuda.is_available())")
    assert (torch.returncode, torch.stdout) == (0, "False\n")
    assert "CUDA initialization: CUDA unknown error" in torch.stderr
    cu = pct(host, "exec", "129", "--", "python3", "-c",
             "import ctypes; print(ctypes.CDLL('libcuda.so.1').cuInit(0))")
    assert cu.stdout == "999\n"

    # Rewriting the rules while it runs changes nothing: the cgroup was set up at start.
    lxc.container_129(host, era="after")
    still = pct(host, "exec", "129", "--", "python3", "-c", "import torch; torch.cuda")
    assert still.stdout == "False\n"

    assert pct(host, "stop", "129").returncode == 0
    assert pct(host, "start", "129").returncode == 0
    fixed = pct(host, "exec", "129", "--", "python3", "-c",
                "import torch; print(torch.cuda.is_available())")
    assert (fixed.returncode, fixed.stdout, fixed.stderr) == (0, "True\n", "")


def test_devn_passthrough_is_resolved_at_start_and_survives_new_majors(host):
    text = lxc.container_129_text("before").replace(
        "lxc.cgroup2.devices.allow: c 504:* rwm\n", "").replace(
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file\n",
        "")
    live, rest = text.split("\n\n", 1)
    lxc.write_config(host, 129, "dev0: /dev/nvidia-uvm,mode=0666\n" + live + "\n\n" + rest)
    pct(host, "start", "129")
    res = pct(host, "exec", "129", "--", "python3", "-c", "print(cuInit(0))")
    assert res.stdout == "0\n"


def test_nvidia_smi_without_nvidiactl_cannot_initialise_nvml(host):
    lxc.write_config(host, 131, "arch: amd64\nhostname: bare\n"
                     "lxc.cgroup2.devices.allow: c 195:* rwm\n"
                     "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n")
    pct(host, "start", "131")
    res = pct(host, "exec", "131", "--", "nvidia-smi", "-L")
    assert (res.returncode, res.stdout) == (255, "Failed to initialize NVML: Unknown Error\n")


def test_nvidia_smi_lists_only_the_gpus_passed_in(host):
    mount = "lxc.mount.entry: /dev/%s dev/%s none bind,optional,create=file\n"
    lxc.write_config(host, 132, "arch: amd64\nlxc.cgroup2.devices.allow: c 195:* rwm\n"
                     + mount % ("nvidiactl", "nvidiactl") + mount % ("nvidia3", "nvidia3"))
    pct(host, "start", "132")
    res = pct(host, "exec", "132", "--", "nvidia-smi", "-L")
    assert res.returncode == 0
    assert [line.split(":")[0] for line in res.stdout.splitlines()] == ["GPU 3"]


def test_canned_answers_win_and_unknown_commands_exit_127(host):
    write(host, "/var/lib/gpuhost-doubles/pct.json", json.dumps(dict(NODE, exec=[
        {"argv": ["cat", "/etc/hostname"], "stdout": "sglang-glm5\n"},
        {"contains": "sglang.launch_server", "stderr": "CUDA error 999\n", "rc": 1},
    ])))
    pct(host, "start", "129")
    assert pct(host, "exec", "129", "--", "cat", "/etc/hostname").stdout == "sglang-glm5\n"
    res = pct(host, "exec", "129", "--", "python3", "-m", "sglang.launch_server", "--tp", "8")
    assert (res.returncode, res.stderr) == (1, "CUDA error 999\n")
    res = pct(host, "exec", "129", "--", "uname", "-r")
    assert res.returncode == 127
    assert "no canned answer" in res.stderr


def test_pct_calls_are_logged(host):
    pct(host, "start", "129")
    pct(host, "exec", "129", "--", "nvidia-smi", "-L")
    pct(host, "status", "999")
    log = calls(host)
    assert [(c["argv"], c["rc"]) for c in log] == [
        (["pct", "start", "129"], 0),
        (["pct", "exec", "129", "--", "nvidia-smi", "-L"], 0),
        (["pct", "status", "999"], 2),
    ]
