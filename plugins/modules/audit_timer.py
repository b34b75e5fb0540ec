#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: audit_timer
short_description: Scheduled host-side audit that refreshes the host's metrics for node_exporter
version_added: "0.1.0"
description:
  - "Installs C(gpuhost-audit.timer) and C(gpuhost-audit.service) in C(/etc/systemd/system),
    the config C(/etc/gpuhost-audit/audit.json) and, under C(/usr/local/lib/gpuhost-audit),
    byte-for-byte copies of the collection's module_utils the audit needs. The service runs
    C(python3 -m ansible_collections.gpuhost.tuning.plugins.module_utils.programs.audit_program):
    the same read-only audit as M(gpuhost.tuning.host_audit), then the host's series (those of the
    audit role's C(gpuhost.prom)) written atomically to O(textfile), so Prometheus sees drift
    between rollouts."
  - On the live host (O(root) C(/) with systemd running) it runs C(systemctl daemon-reload)
    when a file changed and C(systemctl enable --now gpuhost-audit.timer); under another
    root the C(timers.target.wants) link is made directly and the commands are reported as
    skipped.
  - O(state=absent) disables the timer and removes everything it installed.
author:
  - gpuhost.tuning developers (!UNKNOWN)
extends_documentation_fragment:
  - gpuhost.tuning.wanted
options:
  state:
    description: Installed and enabled, or removed.
    type: str
    choices: [present, absent]
    default: present
  host:
    description: Value of the C(host) label (the inventory name). Required with O(state=present).
    type: str
  textfile:
    description: Absolute path of the metrics file on the host, in node_exporter's textfile
      folder; must end in C(.prom). Required with O(state=present).
    type: str
  schedule:
    description:
      - systemd C(OnCalendar) expression of the timer (systemd.time(7)), e.g. C(hourly),
        C(daily), C(Mon..Fri 06:00), C(*-*-* 00/4:00:00).
      - One systemd could not parse (the timer would load and never fire) is refused with
        the reason before anything is written; on the live host C(systemd-analyze calendar)
        has the last word.
    type: str
    default: hourly
  randomized_delay:
    description: C(RandomizedDelaySec) of the timer, so a fleet does not audit in the same second.
    type: int
    default: 300
  python:
    description: Interpreter the service runs.
    type: path
    default: /usr/bin/python3
  root:
    description: Root under which the files are written (a test tree).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Nothing is written and no systemctl command runs; RV(files) shows the plan.
  diff_mode:
    support: none
    description: No diff is returned; RV(files) lists each path and its action.
"""

EXAMPLES = r"""
- name: Audit every hour and refresh node_exporter's metrics file
  gpuhost.tuning.audit_timer:
    host: "{{ inventory_hostname }}"
    textfile: /var/lib/prometheus/node-exporter/gpuhost_audit.prom

- name: Remove the scheduled audit
  gpuhost.tuning.audit_timer:
    state: absent
"""

RETURN = r"""
files:
  description: Each installed path with its action (create, update, remove, ok).
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/etc/systemd/system/gpuhost-audit.timer", "action": "create"}]
commands:
  description: systemctl commands with their status (run, planned, skipped) and the reason.
  returned: always
  type: list
  elements: dict
enabled:
  description: Whether the timer is meant to be enabled.
  returned: always
  type: bool
config:
  description: The config the service reads.
  returned: when state is present
  type: dict
  sample: {"host": "gpu01", "textfile": "/var/lib/prometheus/node-exporter/gpuhost_audit.prom",
           "wanted": {"host": "gpu01"}}
service:
  description: Path of the service unit.
  returned: when state is present
  type: str
timer:
  description: Path of the timer unit.
  returned: when state is present
  type: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpuhost.tuning.plugins.module_utils.programs import audit_timer  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (  # noqa: E402
    CommandError,
    Runner,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed); the schedule and the textfile are checked by audittimer itself."""
    common(p, skip=("schedule",))   # audittimer names what systemd would make of it
    if p.get("state") != "absent":
        facts.wanted_values(p)


def main():
    module = AnsibleModule(
        argument_spec=audit_timer.timer_spec(),
        required_if=[("state", "present", ("host", "textfile"))],
        supports_check_mode=True,
    )
    # it changes the host: refused while another run holds the root's or the run lock
    with check_module(module, "audit_timer", rules):
        _run(module)


def _run(module):
    try:
        result = audit_timer.timer_run(module.params, module.check_mode, Runner(module))
    except (audit_timer.ConfigError, ValueError, OSError, CommandError) as exc:
        module.fail_json(msg="audit_timer: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
