# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command outputs the audit needs where only the driver or the journal knows.

The audit is otherwise files only. Two things are not in files: ``nvidia-smi -q -x`` (ECC,
row remapping, clock event reasons, power limits) and the systemd journal. On a live host
(``root`` is ``/``) each runs once per audit; a capture stores each output as a file under
``/.gpuhost-capture/`` in the tarball, and an audit of an unpacked capture (any other
``root``) reads that file instead and never runs a command. A test tree is such a root.

:class:`CommandOutputs` is the one place that decides between the two and keeps what it
got, so the capture can pack exactly the text the audit used.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import hostfs
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import host_path
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (
    CommandError,
    Runner,
)

CAPTURE_DIR = "/.gpuhost-capture"


def is_live(root):
    """True when ``root`` is the running host's own root (commands may run)."""
    return os.path.abspath(root or "/") == "/"


def stored_path(root, name):
    """Where a capture keeps the output ``name`` under ``root``."""
    return host_path(root, CAPTURE_DIR + "/" + name)


class CommandOutputs(object):
    """The command outputs of one audit.

    ``get(name, produce)``: on a live root calls ``produce(runner)`` once, which returns
    ``(text or None, info)``; elsewhere reads the stored file ``name`` (None when the
    capture has none). ``outputs`` keeps ``name -> text`` for the capture; ``info`` keeps
    ``name -> {source, seconds, error, ...}`` for the audit's facts.
    """

    def __init__(self, root, runner=None):
        self.root = root or "/"
        self.live = is_live(self.root)
        self.runner = runner
        self.outputs = {}
        self.info = {}

    def _runner(self):
        if self.runner is None:
            self.runner = Runner()
        return self.runner

    def get(self, name, produce):
        if name in self.outputs:
            return self.outputs[name]
        if self.live:
            started = time.time()
            try:
                text, info = produce(self._runner())
            except CommandError as exc:  # CommandTimeout: a wedged driver, a stuck journal
                text, info = None, {"source": "command", "error": str(exc)}
            info = dict(info or {})
            info["seconds"] = round(time.time() - started, 3)
        else:
            path = stored_path(self.root, name)
            try:
                with hostfs.open_read(path, "r", hostfs.OUTPUT_LIMIT, encoding="utf-8",
                                      errors="replace") as handle:
                    text = handle.read()
                info = {"source": "capture", "path": CAPTURE_DIR + "/" + name}
            except hostfs.HostFileError as exc:  # a FIFO, a device, over its cap: named
                text = None
                info = {"source": None, "error": "stored output not read: %s" % exc}
            except (IOError, OSError):
                text = None
                info = {"source": None, "error": "not run (the root is not the live "
                                                 "host) and no %s/%s under it" % (
                                                     CAPTURE_DIR, name)}
        self.outputs[name] = text
        self.info[name] = info
        return text

    def captured(self):
        """``{host path: bytes}`` of every output that has text, for the capture."""
        return dict((CAPTURE_DIR + "/" + name, text.encode("utf-8"))
                    for name, text in sorted(self.outputs.items()) if text is not None)
