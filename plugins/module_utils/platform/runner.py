# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one command runner: argument lists, C locale, checked return codes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

C_LOCALE = {"LC_ALL": "C", "LANG": "C", "LANGUAGE": "C"}
# A command given ``timeout=`` runs under coreutils ``timeout --kill-after=KILL_AFTER_S N``:
# at N s its whole process group gets SIGTERM (what it started too, ``pct exec``'s
# lxc-attach included), KILL_AFTER_S s later SIGKILL.
KILL_AFTER_S = 5
# What ``timeout`` exits with when it stopped the command: 124 after SIGTERM, 137 or killed
# by SIGKILL itself (it is in the process group it kills) when SIGKILL was needed.
TIMED_OUT_RCS = (124, 137, -9)
# No command runs unbounded: ``timeout=None`` means DEFAULT_TIMEOUT_S. A query that answers
# in a second when the host is well (nvidia-smi, journalctl, dkms status, pct status,
# systemctl is-active, ...) passes QUERY_TIMEOUT_S, so a wedged driver or a stuck daemon
# costs the audit a minute, not the play; a command that works for minutes (a DKMS build,
# proxmox-boot-tool refresh) passes its own, longer limit, named where it runs.
DEFAULT_TIMEOUT_S = 300
QUERY_TIMEOUT_S = 60
NO_RUNNER_HINT = ("not run: this Runner has neither an AnsibleModule (modules: "
                  "Runner(module)) nor a process launcher (a program outside Ansible: "
                  "Runner(processes=subprocess))")


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


class CommandTimeout(CommandError):
    """A command given ``timeout`` did not return in time and was killed (its whole process
    group). ``out`` and ``err`` hold what it wrote before; ``seconds`` is the limit."""

    def __init__(self, args, seconds, out, err, hint=None):
        CommandError.__init__(self, args, None, out, err)
        self.seconds = seconds
        msg = "%s did not return in %s s (killed)" % (" ".join(self.cmd), _secs(seconds))
        if hint:
            msg += " (%s)" % hint
        self.args = (msg,)

    def __str__(self):
        return self.args[0]


def _secs(seconds):
    """``30`` for 30.0, ``2.5`` for 2.5."""
    return ("%d" % seconds) if float(seconds).is_integer() else ("%g" % seconds)


class Runner:
    """Run commands through ``AnsibleModule.run_command`` when a module is given, else
    through ``processes``: the standard library's ``subprocess`` module, which only a
    program that runs outside Ansible passes in (the scheduled audit's entry point,
    ``audittimer``'s ``__main__``; tests). Module code never reaches ``subprocess``: it has
    its AnsibleModule, and a Runner given neither refuses to run anything (``which``
    still works). ``timeout=`` means the same on both paths.

    ``calls`` records every command run, for results and debugging.
    """

    def __init__(self, module=None, environ=None, processes=None):
        self.module = module
        self.processes = processes
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

    def run(self, args, check=True, ok_rcs=(0,), hint=None, data=None, timeout=None):
        """Run ``args`` (a list). Return ``(rc, stdout, stderr)``.

        With ``check`` a return code outside ``ok_rcs`` raises CommandError. After
        ``timeout`` seconds (> 0; None: DEFAULT_TIMEOUT_S) the command is killed, with
        everything it started in its process group, when it has not returned by then, and
        CommandTimeout is raised whatever ``check`` says (``calls`` records the command as
        given).
        """
        args = [str(a) for a in args]
        self.calls.append(args)
        if timeout is None:
            timeout = DEFAULT_TIMEOUT_S
        argv = self._bounded(args, timeout)
        started = time.monotonic()
        if self.module is not None:
            rc, out, err = self.module.run_command(argv, environ_update=self.environ, data=data,
                                                   binary_data=data is not None)
        elif self.processes is not None:
            env = dict(os.environ)
            env.update(self.environ)
            # A backstop only: ``timeout`` itself has stopped the command by then.
            backstop = float(timeout) + KILL_AFTER_S + 30
            try:
                proc = self.processes.run(argv, input=data, capture_output=True, text=True,
                                          env=env, check=False, timeout=backstop)
                rc, out, err = proc.returncode, proc.stdout, proc.stderr
            except self.processes.TimeoutExpired as exc:
                raise CommandTimeout(args, timeout, _text(exc.stdout), _text(exc.stderr),
                                     hint=hint)
        else:
            raise CommandError(args, None, "", "", hint=NO_RUNNER_HINT)
        if rc in TIMED_OUT_RCS and time.monotonic() - started >= float(timeout) * 0.99:
            raise CommandTimeout(args, timeout, out, err, hint=hint)
        if check and rc not in ok_rcs:
            raise CommandError(args, rc, out, err, hint=hint)
        return rc, out, err

    def _bounded(self, args, timeout):
        """``args`` under coreutils ``timeout`` (which the command's rc passes through)."""
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            seconds = -1.0
        if not seconds > 0:
            raise ValueError("timeout must be a number of seconds above 0, got %r" % (timeout,))
        wrapper = self.which("timeout")
        if not wrapper:
            raise CommandError(args, None, "", "", hint="coreutils' timeout is not on the PATH, "
                               "which bounds this command in time: install coreutils")
        return [wrapper, "--kill-after=%d" % KILL_AFTER_S, _secs(seconds)] + args


def _text(data):
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""
