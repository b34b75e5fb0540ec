"""initramfs: ``lsinitramfs`` listings (initramfs-tools; the members one a line without
a leading slash, or ``-l`` lines as ``cpio -tv`` prints them, with ``Early CPIO image`` /
``Main image`` headers when the image has several segments) and the per-kernel check of
module initramfs_check. The runner stands in for runner.Runner and records the timeout."""

import os

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import initramfs_images
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import CommandTimeout

K = "6.8.12-9-pve"
UVM = "/etc/modprobe.d/gpuhost-nvidia-uvm.conf"


class Runner:
    def __init__(self, rc=0, out="", err="", error=None):
        self.answer = (rc, out, err)
        self.error = error
        self.calls = []

    def run(self, args, check=True, timeout=None, **kwargs):
        self.calls.append((list(args), timeout))
        if self.error:
            raise self.error
        return self.answer


def _image(root, release=K):
    path = os.path.join(str(root), "boot", "initrd.img-%s" % release)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"070701")
    return path


def test_listing_plain_and_long_lines_and_segment_headers():
    out = ("Early CPIO image\n.\nkernel\nkernel/x86/microcode/AuthenticAMD.bin\n"
           "Main image\netc/modprobe.d/gpuhost-nvidia-uvm.conf\n"
           "-rw-r--r--   1 root     root           36 Jan  1 12:00 etc/modprobe.d/vfio.conf\n"
           "drwxr-xr-x   2 root     root            0 Jan  1 12:00 usr/lib/modules\n"
           "./bin/sh\n\n")
    names = initramfs_images.listing(out)
    assert UVM in names and "/etc/modprobe.d/vfio.conf" in names
    assert "/usr/lib/modules" in names and "/bin/sh" in names and "/kernel" in names
    assert not [n for n in names if "image" in n.lower() or " " in n]
    assert initramfs_images.listing(None) == set()


def test_check_images_present_missing_unexpected_and_the_timeout(tmp_path):
    root = str(tmp_path)
    image = _image(root)
    runner = Runner(out="etc/modprobe.d/gpuhost-nvidia-uvm.conf\netc/modprobe.d/old.conf\n")
    res = initramfs_images.check_images(root, [K], "/usr/sbin/lsinitramfs", runner,
                                        files=[UVM, "/etc/modprobe.d/vfio.conf"],
                                        absent_files=["/etc/modprobe.d/old.conf"], timeout=9)
    assert runner.calls == [(["/usr/sbin/lsinitramfs", image], 9)]
    (item,) = res["images"]
    assert item["present"] == [UVM] and item["missing"] == ["/etc/modprobe.d/vfio.conf"]
    assert item["unexpected"] == ["/etc/modprobe.d/old.conf"]
    assert res["stale"] == [K] and not res["ok"] and res["changed"] is False
    assert len(res["problems"]) == 2


def test_the_lister_gets_the_image_as_resolved_inside_the_root(tmp_path):
    root = str(tmp_path)
    real = _image(root, "real")
    os.symlink("/boot/initrd.img-real", os.path.join(root, "boot", "initrd.img-%s" % K))
    runner = Runner(out=UVM[1:] + "\n")
    assert initramfs_images.check_images(root, [K], "lsinitramfs", runner, files=[UVM])["ok"]
    assert runner.calls[0][0] == ["lsinitramfs", real]


def test_a_missing_image_runs_nothing(tmp_path):
    runner = Runner()
    res = initramfs_images.check_images(str(tmp_path), [K], "lsinitramfs", runner, files=[UVM])
    assert runner.calls == [] and res["stale"] == [K]
    assert res["problems"] == ["/boot/initrd.img-%s does not exist: run update-initramfs -c "
                               "-k %s" % (K, K)]


def test_a_failing_or_hanging_lister_is_a_problem_naming_the_image(tmp_path):
    root = str(tmp_path)
    _image(root)
    res = initramfs_images.check_images(root, [K], "lsinitramfs", Runner(rc=1, err="cpio: bad\n"))
    assert res["problems"] == ["lsinitramfs /boot/initrd.img-%s exited 1: cpio: bad" % K]
    hang = Runner(error=CommandTimeout(["lsinitramfs"], 3, "", ""))
    res = initramfs_images.check_images(root, [K], "lsinitramfs", hang, timeout=3)
    assert res["problems"][0].startswith("/boot/initrd.img-%s: " % K)
    assert "did not return in 3 s" in res["problems"][0] and res["stale"] == [K]


def test_the_image_pattern(tmp_path):
    root = str(tmp_path)
    path = os.path.join(root, "boot/efi/%s/initrd" % K)
    os.makedirs(os.path.dirname(path))
    open(path, "w").close()
    res = initramfs_images.check_images(root, [K], "lsinitramfs", Runner(), image="/boot/efi/{kernel}"  # noqa: E501
                                 "/initrd")
    assert res["ok"] and res["images"][0]["image"] == "/boot/efi/%s/initrd" % K
