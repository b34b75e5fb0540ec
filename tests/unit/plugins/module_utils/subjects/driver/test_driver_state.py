"""driver_state: what NVIDIA driver a host and its GPU containers have, and the upgrade's
gate before the reboot and after the boot (issue 26), on host trees from fixtures/driver.py."""

import os

import pytest
from fixtures import dkms, driver, lxc

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_records
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_state

OLD, NEW = driver.OLD, driver.NEW


def _ct(state, vmid):
    return next(c for c in state["containers"] if c["vmid"] == str(vmid))


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize("good", ["590.48.01", "580.95.05", "535.183.01", "550.54.14",
                                  "570.86.15", "550.54", "390.157"])
def test_driver_versions_nvidia_writes_are_taken(good):
    assert driver_records.check_version("target_version", good) == good


@pytest.mark.parametrize("bad", ["590", "590.48.01-1", "590.48.01-1~deb12u1", "latest",
                                 "5904.8.01", "590.48.1", "v590.48.01", "590.48.01 ", "",
                                 None, 590.48])
def test_anything_else_is_a_clear_error(bad):
    with pytest.raises(driver_state.DriverStateError) as err:
        driver_records.check_version("target_version", bad)
    assert "target_version" in str(err.value)
    assert "NNN.NN.NN" in str(err.value) and "590.48.01" in str(err.value)


def test_a_bad_target_stops_before_anything_is_read(tmp_path):
    with pytest.raises(driver_state.DriverStateError, match="target_version: '590.4'"):
        driver_state.driver_state(str(tmp_path / "missing"), "590.4")


@pytest.mark.parametrize("debian,upstream", [
    ("590.48.01-1", "590.48.01"), ("535.183.01-1~deb12u1", "535.183.01"),
    ("580.95.05-0ubuntu1", "580.95.05"), ("1:550.54.14-1", "550.54.14"),
    ("580.95.05", "580.95.05"), ("5.2.15-2+b7", None), ("", None)])
def test_debian_package_versions_give_the_driver_version(debian, upstream):
    assert driver_records.upstream_version(debian) == upstream


# --------------------------------------------------------------------------- loaded module


def test_the_real_h200_banner_gives_the_open_module_and_its_version(tmp_path):
    root = driver.capture_host(tmp_path)
    assert driver_state.loaded_module(root) == {"version": "580.159.04", "flavour": "open",
                                                "source": "/proc/driver/nvidia/version"}


def test_the_proprietary_banner_and_the_sysfs_fallback(tmp_path):
    root = driver.host_base(tmp_path, loaded=NEW, open_modules=False)
    assert driver_state.loaded_module(root)["flavour"] == "proprietary"
    assert driver_state.loaded_module(root)["version"] == NEW
    os.unlink(os.path.join(root, "proc/driver/nvidia/version"))
    assert driver_state.loaded_module(root) == {"version": NEW, "flavour": None,
                                                "source": "/sys/module/nvidia/version"}
    os.unlink(os.path.join(root, "sys/module/nvidia/version"))
    assert driver_state.loaded_module(root) == {"version": None, "flavour": None, "source": None}


# --------------------------------------------------------------------------- host installs


def test_a_run_install_is_known_by_the_installers_own_records(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_run(root, OLD)
    host = driver_state.driver_state(root)["host"]
    assert host["installed"] == {"method": "run", "version": OLD, "packages": [],
                                 "evidence": ["/var/lib/nvidia/log",
                                              "/usr/bin/nvidia-uninstall"]}
    assert [(e["module"], e["version"], e["kernel"], e["state"]) for e in host["dkms"]] == [
        ("nvidia", OLD, driver.RUNNING, "installed")]


def test_the_run_log_first_line_is_the_installers_compatible_version_string(tmp_path):
    driver.run_log(str(tmp_path), "535.183.01")
    with open(os.path.join(str(tmp_path), "var/lib/nvidia/log")) as handle:
        assert handle.readline() == "1.0-53518301 (535.183.01)\n"
    record = driver_records.run_record(str(tmp_path))
    assert record["version"] == "535.183.01"
    assert record["description"] == "NVIDIA Accelerated Graphics Driver for Linux-x86_64"
    assert record["kernel_modules"] is False
    driver.run_log(str(tmp_path), "535.183.01", kernel_modules=[driver.RUNNING])
    assert driver_records.run_record(str(tmp_path))["kernel_modules"] is True


def test_debian_packages_their_dkms_name_and_the_alternatives_links(tmp_path):
    root = driver.host_base(tmp_path, loaded="535.183.01")
    driver.host_debian(root)
    state = driver_state.driver_state(root)
    installed = state["host"]["installed"]
    assert installed["method"] == "debian"
    assert installed["version"] == "535.183.01"
    assert {"name": "nvidia-kernel-dkms", "version": "535.183.01-1~deb12u1"} in \
        installed["packages"]
    # not a driver package: nvidia-settings' library, bash
    assert not [p for p in installed["packages"] if p["name"] in ("libxnvctrl0", "bash")]
    assert installed["evidence"] == ["/var/lib/dpkg/status"]
    assert [(e["module"], e["state"]) for e in state["host"]["dkms"]] == [
        ("nvidia-current", "installed")]
    assert state["host"]["dkms"][0]["modules"][0] == \
        "/lib/modules/%s/updates/dkms/nvidia-current.ko" % driver.RUNNING
    # the host's own user space, through /etc/alternatives, resolved inside the root
    assert driver_state.host_userspace(root) == ("535.183.01", "/usr/lib/x86_64-linux-gnu/libcuda.so.1")  # noqa: E501


def test_nvidia_repository_packages_are_told_by_their_maintainer(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_nvidia_repo(root, OLD)
    installed = driver_state.driver_state(root)["host"]["installed"]
    assert installed["method"] == "nvidia-repo"
    assert installed["version"] == OLD
    names = [p["name"] for p in installed["packages"]]
    assert names[0] == "nvidia-kernel-open-dkms" and "cuda-drivers" in names


def test_both_records_or_none_at_all(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_nvidia_repo(root, OLD)
    driver.run_log(root, OLD)
    installed = driver_state.host_installed(root, driver_state.loaded_module(root))
    assert installed["method"] == "unknown" and installed["version"] is None
    assert "both" in installed["note"]
    bare = driver.host_base(tmp_path / "bare")
    assert driver_state.host_installed(bare, driver_state.loaded_module(bare))["method"] == "unknown"  # noqa: E501
    none = driver.host_base(tmp_path / "none", loaded=None)
    assert driver_state.host_installed(none, driver_state.loaded_module(none)) == {
        "method": "none", "version": None, "packages": [], "evidence": []}


def test_fabric_manager_on_an_nvswitch_host(tmp_path):
    root = driver.upgrade_host(tmp_path)["root"]
    assert driver_state.driver_state(root)["host"]["fabricmanager"] == {"needed": False,
                                                                        "version": None}
    driver.nvswitch(root, fabricmanager=OLD)
    state = driver_state.driver_state(root, NEW)
    assert state["host"]["fabricmanager"] == {"needed": True, "version": OLD}
    assert state["gate"]["refusals"] == [
        "host: fabric manager 580.95.05, target 590.48.01 (NVSwitch host): stage "
        "nvidia-fabricmanager 590.48.01"]


# --------------------------------------------------------------------------- containers


def test_each_way_a_container_gets_its_user_space(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_run(root, OLD)
    driver.ct_installed_deb(root, 129, OLD)
    driver.ct_installed_run(root, 132, OLD)
    driver.ct_bind_mount(root, 131)
    driver.ct_hook(root, 134)
    driver.ct_none(root, 135)
    lxc.container_130(root)
    state = driver_state.driver_state(root)
    got = dict((c["vmid"], (c["userspace"]["method"], c["userspace"]["version"],
                            c["readable"], c["python3"])) for c in state["containers"])
    assert got == {"129": ("installed-deb", OLD, True, True),
                   "131": ("bind-mount", OLD, True, True),
                   "132": ("installed-run", OLD, True, True),
                   "134": ("hook", OLD, True, True),
                   "135": ("none", None, True, False)}   # 130 has no GPU: not read
    deb = _ct(state, 129)
    assert deb["rootfs"] == "/rpool/data/subvol-129-disk-0" and deb["name"] == "gpu-129"
    assert deb["userspace"]["packages"] == [
        {"name": "libnvidia-compute-580", "version": "580.95.05-0ubuntu1"},
        {"name": "nvidia-utils-580", "version": "580.95.05-0ubuntu1"}]
    assert deb["userspace"]["evidence"] == [
        "/var/lib/dpkg/status", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"]
    assert _ct(state, 132)["userspace"]["evidence"][0] == "/var/lib/nvidia/log"
    assert _ct(state, 131)["userspace"]["evidence"][0] == "/etc/pve/lxc/131.conf"
    assert _ct(state, 134)["userspace"]["evidence"][0] == "/etc/pve/lxc/134.conf"


def test_a_bound_versioned_file_is_that_version_whatever_the_host_has_now(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_run(root, NEW)
    driver.ct_bind_mount(root, 131, sources=["%s/libcuda.so.%s" % (driver.LIB, OLD)])
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert (user["method"], user["version"]) == ("bind-mount", OLD)
    refusals = driver_state.driver_state(root, NEW)["gate"]["refusals"]
    # the host is at the target and lacks the 580 file: the entry needs rewriting, not the
    # host's user space staging
    assert refusals[1:] == [
        "131: lxc.mount.entry binds /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05, which is "
        "not on the host (LXC skips an optional bind, so the container gets no such library; "
        "the host's user space is 590.48.01): rewrite the entry to "
        "/usr/lib/x86_64-linux-gnu/libcuda.so.590.48.01 (driver_stage with "
        "rewrite_bind_mounts: true rewrites it to the staged version)"]
    assert user["versioned"][0]["missing"] is True


def test_a_bound_host_folder_counts_by_the_libcuda_it_holds(tmp_path):
    root = driver.host_base(tmp_path)
    driver.host_run(root, NEW)
    driver.ct_bind_mount(root, 136, sources=[])
    with open(os.path.join(root, "etc/pve/lxc/136.conf"), "a") as handle:
        handle.write("lxc.mount.entry: %s usr/lib/host-nvidia none bind,ro,create=dir\n"
                     % driver.LIB)
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert (user["method"], user["version"]) == ("bind-mount", NEW)


def test_an_lvm_root_is_unreadable_until_pct_mount_and_stops_the_gate(tmp_path):
    root = driver.upgrade_host(tmp_path)["root"]
    driver.ct_lvm(root, 133)
    state = driver_state.driver_state(root, NEW)
    ct = _ct(state, 133)
    assert (ct["readable"], ct["rootfs"], ct["python3"]) == (False, None, None)
    assert ct["reason"] == (
        "root not readable: rootfs on lvmthin storage local-lvm is not readable from the "
        "host while stopped; pct mount 133 makes it readable at /var/lib/lxc/133/rootfs")
    assert state["gate"] == {"ok": False, "refusals": ["133: %s" % ct["reason"]]}
    driver.ct_lvm(root, 133, pct_mounted=True, version=NEW)
    ct = _ct(driver_state.driver_state(root, NEW), 133)
    assert (ct["readable"], ct["rootfs"]) == (True, "/var/lib/lxc/133/rootfs")
    assert (ct["userspace"]["method"], ct["userspace"]["version"]) == ("installed-run", NEW)
    assert driver_state.driver_state(root, NEW)["gate"]["ok"] is True


def test_a_subvol_on_directory_storage_is_under_images_vmid(tmp_path):
    root = driver.host_base(tmp_path)
    driver.ct_dir_storage(root, 137, OLD)
    ct = driver_state.driver_state(root)["containers"][0]
    assert ct["rootfs"] == "/var/lib/vz/images/137/subvol-137-disk-0.subvol"
    assert (ct["userspace"]["method"], ct["userspace"]["version"]) == ("installed-run", OLD)


def test_the_real_containers_cuda_compat_is_not_its_user_space(tmp_path):
    """The captured H200 container: cuda-compat-13-0 580.95.05 (NVIDIA's package) with
    libcuda.so.580.95.05 in /usr/local/cuda-13.0/compat, not on the loader path: no user
    space of its own (the host bound 580.159.04 in at /usr/local/nvidia when it ran)."""
    root = driver.capture_host(tmp_path)
    driver.host_base(root, loaded=None)
    fs_root = driver.ct_capture(root, 138)
    assert os.path.islink(os.path.join(fs_root, "usr/local/cuda-13.0/compat/libcuda.so.1"))
    ct = driver_state.driver_state(root)["containers"][0]
    assert ct["userspace"] == {"method": "none", "version": None, "packages": [],
                               "evidence": []}
    # the loader path of the capture lists /usr/local/nvidia/lib64: once it holds the
    # libraries (bound there), that is what the loader loads
    driver.libs(fs_root, "580.159.04", "/usr/local/nvidia/lib64")
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert (user["method"], user["version"]) == ("unknown", "580.159.04")
    assert user["evidence"][0] == "/usr/local/nvidia/lib64/libcuda.so.1"
    # and a compat folder on the loader path is what it loads, too
    with open(os.path.join(fs_root, "etc/ld.so.conf.d/000-capture.conf"), "w") as handle:
        handle.write("/usr/local/cuda-13.0/compat\n")
    assert driver_state.driver_state(root)["containers"][0]["userspace"]["version"] == "580.95.05"


def test_links_in_a_container_resolve_inside_its_root_never_on_the_host(tmp_path):
    root = driver.host_base(tmp_path / "host")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "libcuda.so.777.77.77").write_bytes(b"\x7fELF")
    driver.host_run(root, NEW)        # the host's /usr/lib/x86_64-linux-gnu: 590.48.01
    fs_root = driver.ct_none(root, 139, python3=True)
    lib = os.path.join(fs_root, driver.LIB.lstrip("/"))
    os.makedirs(lib)
    # absolute links: the host's path (would be 590.48.01 on the host), one out of the tree
    os.symlink("%s/libcuda.so.%s" % (driver.LIB, NEW), os.path.join(lib, "libcuda.so.1"))
    os.symlink(str(outside / "libcuda.so.777.77.77"), os.path.join(lib, "libnvidia-ml.so.1"))
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert (user["method"], user["version"]) == ("none", None)
    # Debian's alternatives chain inside the container resolves to the container's file
    driver.debian_libs(fs_root, OLD)
    user = driver_state.driver_state(root)["containers"][0]["userspace"]
    assert (user["method"], user["version"]) == ("unknown", OLD)
    assert user["evidence"] == ["/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.580.95.05"]


def test_a_fifo_in_a_container_root_is_named_not_read(tmp_path):
    root = driver.upgrade_host(tmp_path)["root"]
    status = os.path.join(root, "rpool/data/subvol-129-disk-0/var/lib/dpkg/status")
    os.unlink(status)
    os.mkfifo(status)
    state = driver_state.driver_state(root, NEW)
    ct = _ct(state, 129)
    assert ct["readable"] is False and "a FIFO, not a regular file" in ct["reason"]
    assert state["gate"]["refusals"][0].startswith("129: root not readable: ")


def test_listed_containers_are_read_even_without_gpus_and_unknown_ones_refused(tmp_path):
    root = driver.upgrade_host(tmp_path)["root"]
    assert [c["vmid"] for c in driver_state.driver_state(root)["containers"]] == ["129", "131"]
    assert [c["vmid"] for c in driver_state.driver_state(root, containers=[130])["containers"]] == \
        ["130"]
    with pytest.raises(driver_state.DriverStateError) as err:
        driver_state.driver_state(root, containers=[129, 140])
    assert "no config for 140" in str(err.value) and "129, 130, 131" in str(err.value)


# --------------------------------------------------------------------------- the gate


def test_the_issues_upgrade_passes_the_gate_once_staged(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    state = driver_state.driver_state(root, NEW)
    assert state["gate"] == {"ok": True, "refusals": []}
    assert "gate" not in driver_state.driver_state(root)


def test_a_container_left_at_the_old_version_stops_the_gate_naming_it(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True, ct_version=OLD)["root"]
    assert driver_state.driver_state(root, NEW)["gate"] == {"ok": False, "refusals": [
        "129: user space 580.95.05, target 590.48.01 (installed-deb): stage it"]}


def test_nothing_staged_lists_every_part(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=False)["root"]
    driver.ct_none(root, 135)
    assert driver_state.driver_state(root, NEW)["gate"]["refusals"] == [
        "host: nvidia 590.48.01 not installed by DKMS for the next kernel 6.14.11-5-bpo12-pve "
        "(.ko files and state installed; there: nothing): stage it",
        "129: user space 580.95.05, target 590.48.01 (installed-deb): stage it",
        "131: user space 580.95.05, target 590.48.01 (bind-mount of the host's): stage the "
        "host's user space",
        "135: no NVIDIA user space (none in its root, no bind mount or nvidia hook), target "
        "590.48.01: stage it"]


def test_the_target_built_for_the_running_kernel_only_is_refused_for_the_next(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True, headers_next=False)["root"]
    refusals = driver_state.driver_state(root, NEW)["gate"]["refusals"]
    assert refusals == [
        "host: nvidia 590.48.01 not installed by DKMS for the next kernel 6.14.11-5-bpo12-pve "
        "(.ko files and state installed; there: nothing): stage it"]
    # a pinned next kernel the target is built for passes
    assert driver_state.driver_state(root, NEW, next_kernel_release=driver.RUNNING)["gate"]["ok"]


def test_installed_without_its_ko_files_is_not_installed(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    folder = os.path.join(root, "lib/modules", driver.NEXT, "updates/dkms")
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    refusal = driver_state.driver_state(root, NEW)["gate"]["refusals"][0]
    assert refusal.startswith("host: nvidia 590.48.01 not installed by DKMS for the next "
                              "kernel 6.14.11-5-bpo12-pve")
    assert "there: nvidia 590.48.01 installed" in refusal


def test_built_but_not_installed_for_the_next_kernel_is_refused(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    os.unlink(os.path.join(root, "var/lib/dkms/nvidia/kernel-%s-x86_64" % driver.NEXT))
    refusal = driver_state.driver_state(root, NEW)["gate"]["refusals"][0]
    assert "there: nvidia 590.48.01 built" in refusal


def test_an_unknown_next_kernel_is_refused(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    state = driver_state.driver_state(root, NEW)
    state["host"]["kernels"]["next"] = None
    assert driver_state.gate(state, NEW, "before_reboot")["refusals"] == [
        "host: the kernel that boots next is not known: give next_kernel"]


def test_after_the_boot_the_loaded_module_and_every_container_must_be_the_target(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    assert driver_state.driver_state(root, NEW, phase="after_boot")["gate"]["refusals"] == [
        "host: loaded module 580.95.05, target 590.48.01 (/proc/driver/nvidia/version)"]
    dkms.proc_running(root, driver.NEXT)
    from fixtures import procsys
    procsys.nvidia_driver(root, NEW)
    after = driver_state.driver_state(root, NEW, phase="after_boot")
    assert after["gate"] == {"ok": True, "refusals": []}
    assert after["host"]["kernels"]["running"] == driver.NEXT
    # a container whose user space went back (a snapshot rollback): it fails, named
    driver.ct_installed_deb(root, 129, OLD)
    assert driver_state.driver_state(root, NEW, phase="after_boot")["gate"]["refusals"] == [
        "129: user space 580.95.05, target 590.48.01 (installed-deb): stage it"]
    os.unlink(os.path.join(root, "proc/driver/nvidia/version"))
    os.unlink(os.path.join(root, "sys/module/nvidia/version"))
    assert driver_state.driver_state(root, NEW, phase="after_boot")["gate"]["refusals"][0] == \
        "host: loaded module none, target 590.48.01 (no /proc/driver/nvidia/version)"


def test_the_back_out_is_the_same_gate_with_the_old_version(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    refusals = driver_state.driver_state(root, OLD)["gate"]["refusals"]
    # the old build is kept for the running kernel only, the containers are at the new one
    assert refusals[0].startswith("host: nvidia 580.95.05 not installed by DKMS for the next")
    assert "129: user space 590.48.01, target 580.95.05 (installed-deb): stage it" in refusals


def test_hook_and_bind_containers_follow_the_hosts_user_space(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    driver.ct_hook(root, 134)
    assert driver_state.driver_state(root, NEW)["gate"]["ok"] is True
    # the host's libraries went back to the old version: both containers would get them
    driver.libs(root, OLD)
    assert driver_state.driver_state(root, NEW)["gate"]["refusals"] == [
        "131: user space 580.95.05, target 590.48.01 (bind-mount of the host's): stage the "
        "host's user space",
        "134: user space 580.95.05, target 590.48.01 (hook of the host's): stage the host's "
        "user space"]
    for name in ("libcuda.so.1", "libnvidia-ml.so.1"):
        os.unlink(os.path.join(root, driver.LIB.lstrip("/"), name))
    refusals = driver_state.driver_state(root, NEW)["gate"]["refusals"]
    assert refusals[1] == ("134: hook of the host's user space, but no NVIDIA library "
                           "found where it binds (-)")


def test_the_hook_without_visible_devices_mounts_nothing(tmp_path):
    """lxc's hooks/nvidia exits before nvidia-container-cli when NVIDIA_VISIBLE_DEVICES is
    unset, empty or void: the container's own root decides then."""
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    driver.ct_hook(root, 134)
    path = os.path.join(root, "etc/pve/lxc/134.conf")
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(text.replace("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES=void"))
    user = _ct(driver_state.driver_state(root), 134)["userspace"]
    assert (user["method"], user["version"]) == ("none", None)
    assert user["note"] == ("lxc.hook.mount runs the nvidia hook but NVIDIA_VISIBLE_DEVICES "
                            "is 'void': the hook mounts nothing")
    with open(path, "w") as handle:
        handle.write(text.replace("lxc.environment: NVIDIA_VISIBLE_DEVICES=all\n", ""))
    assert "is unset" in _ct(driver_state.driver_state(root), 134)["userspace"]["note"]
    assert "134: no NVIDIA user space" in driver_state.driver_state(root, NEW)["gate"]["refusals"][0]  # noqa: E501


def test_a_link_on_the_way_to_a_container_root_resolves_inside_the_host_tree(tmp_path):
    """/rpool of the host tree is an absolute link (/pool2): followed inside the tree, not
    to this machine's /pool2."""
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    os.rename(os.path.join(root, "rpool"), os.path.join(root, "pool2"))
    os.symlink("/pool2", os.path.join(root, "rpool"))
    ct = _ct(driver_state.driver_state(root), 129)
    assert (ct["readable"], ct["rootfs"], ct["python3"]) == (
        True, "/rpool/data/subvol-129-disk-0", True)
    assert (ct["userspace"]["method"], ct["userspace"]["version"]) == ("installed-deb", NEW)


def test_the_next_kernel_is_the_audits_a_proxmox_pin_included(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True, headers_next=False)["root"]
    assert driver_state.driver_state(root)["host"]["kernels"]["next"] == driver.NEXT   # the newest
    os.makedirs(os.path.join(root, "etc/kernel"), exist_ok=True)
    with open(os.path.join(root, "etc/kernel/proxmox-boot-pin"), "w") as handle:
        handle.write(driver.RUNNING + "\n")
    state = driver_state.driver_state(root, NEW)
    assert state["host"]["kernels"] == {"running": driver.RUNNING, "next": driver.RUNNING}
    assert state["gate"]["ok"] is True


def test_a_runaway_file_in_a_container_root_is_refused_at_its_cap(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    log = os.path.join(root, "rpool/data/subvol-131-disk-0/var/lib/nvidia/log")
    os.makedirs(os.path.dirname(log))
    with open(log, "wb") as handle:
        handle.truncate(5 << 20)   # sparse: over the 4 MiB cap of one read
    # 131 binds the host's libraries: its root's records are not read, so no refusal
    assert _ct(driver_state.driver_state(root), 131)["readable"] is True
    os.rename(os.path.join(root, "rpool/data/subvol-131-disk-0/var/lib/nvidia"),
              os.path.join(root, "rpool/data/subvol-129-disk-0/var/lib/nvidia"))
    ct = _ct(driver_state.driver_state(root), 129)
    assert ct["readable"] is False
    assert "over the 4 MiB this read takes: not read" in ct["reason"]


# --------------------------------------------------------------------------- next modules


def test_next_modules_name_every_module_dkms_conf_lists_with_its_version(tmp_path):
    root = driver.upgrade_host(tmp_path, staged=True)["root"]
    state = driver_state.driver_state(root, NEW)
    picked = state["host"]["next_modules"]
    assert [m["module"] for m in picked] == list(dkms.NVIDIA_MODULES)
    assert {(m["version"], m["source"], m["error"]) for m in picked} == {
        (NEW, "modules.dep", None)}


def test_debian_module_names_are_judged_and_named_in_the_fix(tmp_path):
    root = driver.host_base(tmp_path, loaded=None)
    driver.host_debian(root, NEW, kernels=(driver.RUNNING, driver.NEXT))
    driver.real_modules(root, "nvidia-current", NEW, (driver.NEXT,), driver.DEBIAN_MODULES,
                        installed_version=OLD)
    refusals = driver_state.driver_state(root, NEW)["gate"]["refusals"]
    assert len(refusals) == len(driver.DEBIAN_MODULES)
    assert refusals[0].endswith("dkms install -m nvidia-current -v %s -k %s --force"
                                % (NEW, driver.NEXT))
    assert "updates/dkms/nvidia-current.ko (modules.dep), which holds version %s" % OLD \
        in refusals[0]
