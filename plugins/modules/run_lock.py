#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: run_lock
short_description: Take or release the run lock that keeps two gpuhost.tuning runs off one host
version_added: 0.2.0
description:
  - A role whose changes take several tasks (the tune role's revert, reboot_verify) takes
    this lock first and releases it in an C(always) section, so a second run cannot change
    the host between its steps and record a half-changed state.
  - The lock is the file C(<root>/run/gpuhost-tuning.run.lock), a JSON document naming the
    holder (O(controller), O(user), O(play), O(purpose), the host name, the pid of the
    module's parent process, the start time) and a random token. It is created atomically;
    an existing lock is never replaced.
  - While it is held, every module of this collection that changes the host refuses, naming
    the holder, unless its task runs with the environment variable
    C(GPUHOST_TUNING_RUN_LOCK) set to the lock's token (the roles set it on their tasks).
  - Taking a lock held by another run fails with a message naming the holder and how to clear
    it. A lock older than 6 hours is called probably stale in that message; it is never
    removed by this module. When no run is still working on the host, remove the file by
    hand.
  - A reboot empties C(/run) and so drops the lock; O(state=acquired) with the O(token) of
    the run takes it again.
  - Without O(token), a task that runs with C(GPUHOST_TUNING_RUN_LOCK) set (a role
    included by a role that holds the lock, such as C(boot_config) inside
    C(reboot_verify)) joins that run's lock instead of waiting on it, RV(inherited) true;
    such a task must not release it (its owner does).
  - The lock's folder C(<root>/run) must resolve inside O(root); a link out of the root is
    refused naming it. Each recorded text field is cut to 256 characters.
  - In check mode nothing is written; a lock held by another run still fails the task.
options:
  state:
    description:
      - C(acquired) takes the lock (kept, changed false, when already held with O(token)).
      - C(released) removes it when it holds O(token); a lock with another token is refused;
        no lock at all is not an error (changed false).
    type: str
    choices: [acquired, released]
    default: acquired
  token:
    description:
      - The token returned by the acquire. Required with O(state=released).
      - With O(state=acquired), takes the lock with this token (again after a reboot) instead
        of a new random one.
    type: str
  controller:
    description:
      - Name of the controller running the play, recorded in the lock and shown to a second
        run.
    type: str
    default: ""
  user:
    description:
      - User running the play on the controller, recorded in the lock.
    type: str
    default: ""
  play:
    description:
      - Name of the play (or playbook), recorded in the lock.
    type: str
    default: ""
  purpose:
    description:
      - What the run does (the role and step), recorded in the lock.
    type: str
    default: ""
  root:
    description:
      - Root of the host tree; the lock is C(<root>/run/gpuhost-tuning.run.lock).
      - Must be an existing folder; C(/) only when given as C(/).
    type: path
    default: /
notes:
  - Supports check mode (nothing written) and is idempotent for the same O(token).
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Take the run lock
  gpuhost.tuning.run_lock:
    state: acquired
    controller: "{{ lookup('ansible.builtin.pipe', 'uname -n') }}"
    user: "{{ lookup('ansible.builtin.env', 'USER') }}"
    play: "{{ ansible_play_name }}"
    purpose: kernel upgrade
  register: lock

- name: Change the host under it
  gpuhost.tuning.sysctl_settings:
    values: {vm.swappiness: "10"}
  environment:
    GPUHOST_TUNING_RUN_LOCK: "{{ lock.token }}"

- name: Release it
  gpuhost.tuning.run_lock:
    state: released
    token: "{{ lock.token }}"
"""

RETURN = r"""
token:
  description:
    - The lock's token (pass it to O(state=released) and in C(GPUHOST_TUNING_RUN_LOCK)).
  returned: state is acquired
  type: str
  sample: 3f0c9a1e5b7d4c2a9e8f6a1b2c3d4e5f
held:
  description:
    - Whether the lock file holds this token after the task (false in check mode and after a
      release).
  returned: success
  type: bool
  sample: true
inherited:
  description:
    - True when the token came from C(GPUHOST_TUNING_RUN_LOCK) (the task belongs to a run
      that holds the lock); leave the release to that run.
  returned: state is acquired
  type: bool
  sample: false
path:
  description: The lock file.
  returned: success
  type: str
  sample: /run/gpuhost-tuning.run.lock
holder:
  description: What the lock records (or recorded, on release); C(token) included.
  returned: when a lock was taken, kept or released
  type: dict
  sample:
    controller: ctl1
    user: alice
    play: Revert the tuning
    purpose: gpuhost.tuning.tune revert
    host: pve1
    pid: 41230
    since: "2026-12-01T08:30:00Z"
    since_epoch: 1796113800
    token: 3f0c9a1e5b7d4c2a9e8f6a1b2c3d4e5f
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import run_lock  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import (  # noqa: E402
    LockError,
    PathError,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    TOKEN,
    check_module,
    common,
    fail,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    if p.get("token") is not None and not TOKEN.match(p["token"]):
        fail("token", p["token"], "the 32 hex digits a run_lock acquire returned")
    if p.get("state") == "released" and not p.get("token"):
        fail("token", p.get("token"), "the token the acquire returned (state released)")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["acquired", "released"], default="acquired"),
            # Not a secret: it tells this run's lock from another's and is in the lock file;
            # the roles pass the returned value on, which no_log would mask.
            token=dict(type="str", no_log=False),
            controller=dict(type="str", default=""),
            user=dict(type="str", default=""),
            play=dict(type="str", default=""),
            purpose=dict(type="str", default=""),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "run_lock", rules):
        _run(module)


def _run(module):
    params = module.params
    try:
        if params["state"] == "acquired":
            result = run_lock.acquire(params["root"], params, params["token"], module.check_mode)
        else:
            result = run_lock.release(params["root"], params["token"], module.check_mode)
    except (LockError, OSError, PathError) as exc:
        module.fail_json(msg="run_lock: %s (nothing was changed)" % exc, changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
