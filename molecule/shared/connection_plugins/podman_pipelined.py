# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test set-up only (molecule, never shipped with the roles): containers.podman.podman with
Ansible's pipelining.

The podman connection runs every module task as five ``podman exec`` calls (the remote home,
the temp folder, chmod, the module, rm) plus a ``podman mount``; each exec costs about 0.3 s
of CPU and 1-4 s of wall time on a loaded 2-core machine, which is most of a scenario's
time. Its ``podman exec`` passes no stdin (no ``-i``), so it declares no pipelining. This
one passes stdin when there is some: a module task is then one ``podman exec -i ...
python3`` with the module on stdin, as pipelining does over SSH (which real fleets use).
The module code, the Python and the host it runs on are the same; only the transport
changes. Files (copy, template) still go through the container's mount.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
    name: podman_pipelined
    short_description: containers.podman.podman with pipelining (molecule test set-up)
    description:
        - Run commands and put/fetch files in an existing podman container, as
          containers.podman.podman does, with the module sent on stdin (pipelining).
    options:
      remote_addr:
        description: The ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User (name or UID) to run commands as inside the container.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments to pass to the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: Executable for the podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
      pipelining:
        description: Send modules on stdin instead of copying them into a temp folder.
        type: bool
        default: true
        vars:
          - name: ansible_pipelining
"""

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import (
    Connection as PodmanConnection,
)


class Connection(PodmanConnection):
    """containers.podman.podman, with stdin passed to ``podman exec`` (``-i``)."""

    transport = "podman_pipelined"
    has_pipelining = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        if in_data is None:
            return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        # ConnectionBase's bookkeeping (what the parent's exec_command does first)
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec", "-i"]
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, shlex.split(to_native(cmd, errors="surrogate_or_strict")),
                            in_data)
