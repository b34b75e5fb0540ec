# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for a rolling play's batch keywords (playbooks/reboot_verify.yml).

Ansible templates ``serial`` and ``max_fail_percentage`` once per play, before it splits the
hosts into batches; an error raised here stops the run there, before any host of the play
is touched. The accepted forms are declared once, in module_utils/engines/report/rollout.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.report import rollout


def serial_batches(value, name="gpuhost_serial"):
    try:
        return rollout.serial_batches(value, name)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def max_fail_percentage(value, name="gpuhost_max_fail_percentage"):
    try:
        return rollout.max_fail_percentage(value, name)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"serial_batches": serial_batches, "max_fail_percentage": max_fail_percentage}
