# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an initramfs image holds, read with ``lsinitramfs`` (module initramfs_check):
whether each kernel's image carries the files it must and none it must not."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import CommandTimeout

IMAGE = "/boot/initrd.img-{kernel}"


def listing(text):
    """Set of host paths (leading ``/``) in ``lsinitramfs`` output; ``-l`` style lines
    (``-rw-r--r-- ... path``) keep the last field."""
    names = set()
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("Early ", "Main ", "==>")):
            continue
        name = line.split()[-1] if (" " in line and line[0] in "-dlcbps") else line
        names.add("/" + name.lstrip("./").lstrip("/"))
    return names


def check_images(root, kernels, lister, runner, files=(), absent_files=(), image=IMAGE,
                 timeout=None):
    """Check each kernel's image (``image`` with ``{kernel}`` replaced) under ``root`` with
    ``lister`` (the lsinitramfs path) run by ``runner`` (runner.Runner; killed after
    ``timeout`` s when given, which is a problem naming the image). Returns
    ``{changed, images, ok, problems, stale}`` as module initramfs_check does."""
    images, problems, stale = [], [], []
    for release in kernels:
        path = image.replace("{kernel}", release)
        local = host_path(root, path)
        item = {"kernel": release, "image": path, "exists": hostfs.isfile(local),
                "present": [], "missing": [], "unexpected": []}
        images.append(item)
        if not item["exists"]:
            problems.append("%s does not exist: run update-initramfs -c -k %s" % (path, release))
            stale.append(release)
            continue
        # the image as resolved inside the root: the lister never follows a link out
        try:
            rc, out, err = runner.run([lister, hostfs.realpath(local)], check=False,
                                      timeout=timeout)
        except CommandTimeout as exc:
            problems.append("%s: %s" % (path, exc))
            stale.append(release)
            continue
        if rc != 0:
            problems.append("%s %s exited %s: %s" % (lister, path, rc, (err or out).strip()))
            stale.append(release)
            continue
        names = listing(out)
        for wanted in files:
            (item["present"] if wanted in names else item["missing"]).append(wanted)
        for unwanted in absent_files:
            if unwanted in names:
                item["unexpected"].append(unwanted)
        if item["missing"]:
            problems.append("%s lacks %s: run update-initramfs -u -k %s" % (
                path, ", ".join(item["missing"]), release))
        if item["unexpected"]:
            problems.append("%s still carries %s: run update-initramfs -u -k %s" % (
                path, ", ".join(item["unexpected"]), release))
        if item["missing"] or item["unexpected"]:
            stale.append(release)
    return dict(changed=False, images=images, ok=not problems, problems=problems, stale=stale)
