# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one command runner: argument lists, C locale, checked return codes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

C_LOCALE = {"LC_ALL": "C", "LANG": "C", "LANGUAGE": "C"}


class CommandError(Exception):
    """A command failed; the message carries the command, return code and stderr."""

    def __init__(self, args, rc, out, err, hint=None):
        self.cmd = list(args)
        self.rc = rc
        self.out = out
        self.err = err
        msg = "command %s exited %s" % (" ".join(self.cmd), rc)
        detail = (err or out or "").strip()
        if detail:
            msg += ": %s" % "\n".join(detail.splitlines()[-20:])
        if hint:
            msg += " (%s)" % hint
        super(CommandError, self).__init__(msg)


class Runner:
    """Run commands through ``AnsibleModule.run_command`` when a module is given,
    else through ``subprocess`` (plain Python callers, tests, the boot-time script).

    ``calls`` records every command run, for results and debugging.
    """

    def __init__(self, module=None, environ=None):
        self.module = module
        self.environ = dict(C_LOCALE)
        if environ:
            self.environ.update(environ)
        self.calls = []

    def which(self, name):
        if self.module is not None:
            return self.module.get_bin_path(name)
        for folder in os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(os.pathsep) + [
            "/usr/sbin", "/sbin", "/usr/local/sbin"
        ]:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None

    def run(self, args, check=True, ok_rcs=(0,), hint=None, data=None):
        """Run ``args`` (a list). Return ``(rc, stdout, stderr)``.

        With ``check`` a return code outside ``ok_rcs`` raises CommandError.
        """
        args = [str(a) for a in args]
        self.calls.append(args)
        if self.module is not None:
            rc, out, err = self.module.run_command(args, environ_update=self.environ, data=data,
                                                   binary_data=data is not None)
        else:
            env = dict(os.environ)
            env.update(self.environ)
            proc = subprocess.run(args, input=data, capture_output=True, text=True, env=env,
                                  check=False)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        if check and rc not in ok_rcs:
            raise CommandError(args, rc, out, err, hint=hint)
        return rc, out, err
