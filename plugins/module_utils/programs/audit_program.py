# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduled host-side audit, the program: ``gpuhost-audit.timer`` starts
``gpuhost-audit.service``, which runs::

    PYTHONPATH=/usr/local/lib/gpuhost-audit /usr/bin/python3 -m \\
        ansible_collections.gpuhost.tuning.plugins.module_utils.programs.audit_program \\
        --config /etc/gpuhost-audit/audit.json

It audits the host read-only, exactly as module ``host_audit`` does (the same module_utils,
copied byte for byte by module ``audit_timer``: ``audittimer.library_files`` follows this
file's imports), and rewrites the host's metrics file in node_exporter's textfile folder
atomically, so Prometheus sees drift between rollouts. With ``--check`` it is a node health
check (NHC, Slurm's HealthCheckProgram). What ``audit_timer`` installs is ``audittimer``'s.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import sys

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded, cmdout
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.health import policy
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import metrics
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import report
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (
    HostFileError,
    atomic_write,
    host_path,
    read_bytes,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner

MODULE = "ansible_collections.gpuhost.tuning.plugins.module_utils.programs.audit_program"
CONFIG_PATH = "/etc/gpuhost-audit/audit.json"
TAG = "gpuhost-audit"


class ConfigError(Exception):
    """The config is missing or malformed; the message names the file and the key."""


def make_config(host, textfile, wanted=None):
    """The config dict; the textfile path must end in ``.prom`` (node_exporter reads
    nothing else)."""
    if not host:
        raise ConfigError("host: the name the series carry (label host) is empty")
    if not textfile or not str(textfile).startswith("/"):
        raise ConfigError("textfile %r: give an absolute path, e.g. "
                          "/var/lib/prometheus/node-exporter/gpuhost_audit.prom" % (textfile,))
    if not str(textfile).endswith(".prom"):
        raise ConfigError("textfile %s: node_exporter's textfile collector reads only files "
                          "ending in .prom" % textfile)
    if wanted is not None and not isinstance(wanted, dict):
        raise ConfigError("wanted: expected a JSON object of wanted values (role common's "
                          "__gpuhost_wanted), got %s; re-run the audit role with "
                          "gpuhost_audit_timer: true" % type(wanted).__name__)
    wanted = dict((k, v) for k, v in (wanted or {}).items() if v is not None)
    wanted["host"] = host
    return {"host": host, "textfile": str(textfile), "wanted": wanted}


def render_config(config):
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------------------------------
# the scheduled run


def load_config(path):
    try:
        data = read_bytes(path)     # a regular file only, bounded: never waits on a FIFO
        if data is None:
            raise IOError("no such file")
        # depth-bounded, NaN refused: a deep or NaN-carrying file is a clear error (exit 2),
        # never a RecursionError traceback (exit 1: a finding to NHC and Slurm)
        config = bounded.json_loads(data.decode("utf-8"))
    except (IOError, OSError, HostFileError) as exc:
        raise ConfigError("cannot read %s: %s (re-run the audit role with "
                          "gpuhost_audit_timer: true)" % (path, exc))
    except ValueError as exc:
        raise ConfigError("%s is not valid JSON: %s" % (path, exc))
    if not isinstance(config, dict):
        raise ConfigError("%s: expected a JSON object" % path)
    try:
        out = make_config(config.get("host"), config.get("textfile"), config.get("wanted"))
    except ConfigError as exc:
        raise ConfigError("%s: %s" % (path, exc))
    check_wanted(out["wanted"], path)
    return out


def check_wanted(wanted, where):
    """The config's wanted values checked as module host_audit checks its options: their
    types (``merged_wanted``) and the operator policy (``policy.check_options``: known
    finding ids, finite numbers). ConfigError names ``where`` and the entry."""
    try:
        merged = audit.merged_wanted(wanted)
        policy.check_options(merged, audit.FINDING_ORDER)
    except (TypeError, ValueError) as exc:
        raise ConfigError("%s: wanted: %s (re-run the audit role with gpuhost_audit_timer: "
                          "true)" % (where, exc))


def run(root, config, processes=None):
    """Audit the host under ``root`` and write the metrics file; returns the audit.
    ``processes`` (``subprocess``, passed in by the program's entry point) runs the live
    host's commands (nvidia-smi, journalctl); without it they are not run."""
    outputs = cmdout.CommandOutputs(root, Runner(processes=processes))
    result = audit.audit(root, config["wanted"], outputs=outputs)
    text = metrics.audit_text({config["host"]: result})
    path = host_path(root, config["textfile"])
    if not os.path.isdir(os.path.dirname(path)):
        raise ConfigError("textfile folder %s does not exist (install node_exporter, or set "
                          "gpuhost_audit_textfile_dir to its --collector.textfile.directory)"
                          % os.path.dirname(config["textfile"]))
    atomic_write(path, text, mode=0o644, preserve=False, root=root)
    return result


# --- the node check: NHC and Slurm's HealthCheckProgram ----------------------------------

CHECK_OK, CHECK_FOUND, CHECK_ERROR = 0, 1, 2
REASON_MAX = 200  # characters of the one-line reason (Slurm's drain reason, NHC's log)


def _one_line(text):
    return " ".join(str(text if text is not None else "").split())


def check_line(findings, severity):
    """``(exit status, line)`` of the node check: 0 and ``ok`` when no finding the operator
    has not acknowledged is at or above ``severity``; else 1 and the worst of them
    (findings are ranked, the first is the worst) with the count, cut to REASON_MAX
    characters. The audit marked the acknowledged ones (``engines.audit.audit.audit`` through
    ``policy.mark_acknowledged``, as for module host_audit); ``policy.gating`` leaves them
    out here as role audit's gpuhost_audit_fail_on gate does."""
    findings = findings or []
    gating = policy.gating(findings)
    bad = [f for f in gating if audit.severity_at_least(f.get("severity"), severity)]
    if not bad:
        acked = len(findings) - len(gating)
        return CHECK_OK, "%s: ok: nothing at or above %s (%d finding(s) below%s)" % (
            TAG, severity, len(gating) - len(bad),
            ", %d acknowledged" % acked if acked else "")
    worst = bad[0]
    line = "%s: %s %s %s: %s (want %s)" % (
        TAG, worst.get("severity"), worst.get("id"), _one_line(worst.get("subject")),
        _one_line(worst.get("current")), _one_line(worst.get("expected")))
    if len(bad) > 1:
        line += "; %d more at or above %s" % (len(bad) - 1, severity)
    if len(line) > REASON_MAX:
        line = line[:REASON_MAX - 3] + "..."
    return CHECK_FOUND, line


def node_check(root, config, severity, json_path=None, write_textfile=False, processes=None):
    """The audit as a node check (NHC's ``die`` reason, Slurm's HealthCheckProgram): the
    same read-only audit, ``(exit status, line)`` from :func:`check_line`, the host's report
    document (report_merge reads it as a ``<host>.json``) written atomically to ``json_path``
    under ``root`` when given, and the metrics file only with ``write_textfile``.
    ``processes``: see ``run``."""
    if write_textfile:
        result = run(root, config, processes)
    else:
        outputs = cmdout.CommandOutputs(root, Runner(processes=processes))
        result = audit.audit(root, config["wanted"], outputs=outputs)
    if json_path:
        path = host_path(root, json_path)
        if not os.path.isdir(os.path.dirname(path)):
            raise ConfigError("--json %s: its folder %s does not exist (create it, e.g. "
                              "/run/gpuhost-audit)" % (json_path, os.path.dirname(json_path)))
        doc = report.host_document(config["host"], result)
        # root=: a folder on the way that links out of the root is refused (PathError)
        atomic_write(path, report.render_json(doc), mode=0o644, preserve=False, root=root)
    return check_line(result["findings"], severity)


def check_config(path, explicit):
    """The config for the node check: the timer's when it is there; without one (a host
    with the check only), the defaults and the host's own name. A config named on the
    command line must be readable."""
    if explicit or os.path.exists(path):
        return load_config(path)
    host = os.uname()[1].split(".")[0] or "localhost"
    # the audit fills every wanted value it is not given with role common's defaults
    return {"host": host, "textfile": None, "wanted": {"host": host}}


def main(argv=None, processes=None):
    """The scheduled run or the node check; ``processes``: see ``run``."""
    parser = argparse.ArgumentParser(
        prog="python3 -m " + MODULE,
        description="Audit this host read-only and refresh its node_exporter metrics file; "
                    "with --check, a node health check (NHC, Slurm HealthCheckProgram): exit "
                    "0 when nothing at or above the severity is found, else exit 1 and one "
                    "line naming the worst finding; 2 when the audit could not run.")
    parser.add_argument("--config", default=None, help="config (JSON; default %s)" % CONFIG_PATH)
    parser.add_argument("--root", default="/", help="host root (a test tree; default /)")
    parser.add_argument("--check", default=None, metavar="SEVERITY",
                        choices=audit.SEVERITIES,
                        help="node check: fail on a finding at or above SEVERITY")
    parser.add_argument("--json", default=None, metavar="FILE",
                        help="with --check: write the host's report document (JSON) to FILE")
    parser.add_argument("--textfile", action="store_true",
                        help="with --check: refresh the metrics file too (needs the config)")
    args = parser.parse_args(argv)
    if args.check is not None:
        try:
            config = check_config(args.config or CONFIG_PATH, args.config is not None)
            if args.textfile and not config.get("textfile"):
                raise ConfigError("--textfile: no config at %s names the metrics file"
                                  % CONFIG_PATH)
            status, line = node_check(args.root, config, args.check, args.json, args.textfile,
                                      processes)
        except (ConfigError, IOError, OSError, ValueError) as exc:
            sys.stdout.write("%s: ERROR: the audit could not run: %s\n" % (
                TAG, _one_line(exc)[:REASON_MAX]))
            return CHECK_ERROR
        except Exception as exc:  # noqa: BLE001 - exit 1 is a finding: a crash must be 2
            sys.stdout.write("%s: ERROR: the audit could not run: %s: %s (a bug: report "
                             "it)\n" % (TAG, type(exc).__name__, _one_line(exc)[:120]))
            return CHECK_ERROR
        sys.stdout.write(line + "\n")
        return status
    try:
        config = load_config(args.config or CONFIG_PATH)
        result = run(args.root, config, processes)
    except (ConfigError, IOError, OSError, ValueError) as exc:  # PathError: a ValueError
        sys.stderr.write("%s: FAILED: %s\n" % (TAG, exc))
        return 2
    sys.stdout.write("%s: %s; %s\n" % (TAG, audit.headline(result["findings"]),
                                       config["textfile"]))
    return 0


if __name__ == "__main__":
    # The program's entry point, outside Ansible (no AnsibleModule.run_command here): the
    # one place that hands the runner the standard library's process launcher.
    import subprocess

    raise SystemExit(main(processes=subprocess))
