"""hostfs' base: host paths joined under a root, the reading session that collects every
refusal once, and the walk that follows links inside a root as the kernel does in a chroot
(never above the root). The readers built on them are test_hostfs.py's."""

import os

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs_base


def test_host_path_joins_under_the_root_and_leaves_the_live_host_alone(tmp_path):
    root = str(tmp_path)
    assert hostfs_base.host_path(root, "/etc/modprobe.d/x.conf") == \
        os.path.join(root, "etc/modprobe.d/x.conf")
    assert hostfs_base.host_path(root + "/", "proc/cmdline") == \
        os.path.join(root, "proc/cmdline")
    assert hostfs_base.host_path("/", "/proc/cmdline") == "/proc/cmdline"
    assert hostfs_base.host_path(None, "/proc/cmdline") == "/proc/cmdline"
    assert hostfs_base.host_path("", "/proc/cmdline") == "/proc/cmdline"


def test_session_keeps_each_problem_once_and_only_while_active():
    hostfs_base.problem("files", "before: not kept")
    with hostfs_base.session() as outer:
        hostfs_base.problem("files", "a FIFO")
        with hostfs_base.session() as inner:
            hostfs_base.problem("files", "a FIFO")
            hostfs_base.problem("logs", "cut at its cap")
        hostfs_base.problem("files", "after inner")
    hostfs_base.problem("files", "after: not kept")
    assert outer.problems == [("files", "a FIFO"), ("logs", "cut at its cap"),
                              ("files", "after inner")]
    assert inner.problems == [("files", "a FIFO"), ("logs", "cut at its cap")]


def _look(links, seen=None):
    def look(rel, last):
        if seen is not None:
            seen.append((rel, last))
        return links.get(rel)
    return look


def test_walk_in_root_follows_links_inside_the_root_never_above_it():
    links = {"sys/bus/pci/devices/0000:17:00.0": "../../../devices/pci0000:16/0000:17:00.0",
             "etc/escape": "../../../../../outside/secret",
             "etc/abs": "/usr/lib/x"}
    seen = []
    assert hostfs_base.walk_in_root("/sys/bus/pci/devices/0000:17:00.0/vendor",
                                    _look(links, seen)) == \
        "/sys/devices/pci0000:16/0000:17:00.0/vendor"
    assert seen[-1] == ("sys/devices/pci0000:16/0000:17:00.0/vendor", True)
    # .. stops at the root; an absolute target starts again from the root
    assert hostfs_base.walk_in_root("/etc/escape", _look(links)) == "/outside/secret"
    assert hostfs_base.walk_in_root("/etc/abs/y", _look(links)) == "/usr/lib/x/y"
    # look returning False stops the walk
    assert hostfs_base.walk_in_root("/etc/x", lambda rel, last: False) is None
    with pytest.raises(hostfs_base.LinkLoop, match="too many levels of symlinks"):
        hostfs_base.walk_in_root("/loop", _look({"loop": "loop"}))
