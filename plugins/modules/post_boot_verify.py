#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: post_boot_verify
short_description: Judge a host after its boot - kernel, command line, modules, tuning
version_added: 0.2.0
description:
  - Read-only. Reads the running kernel, C(/proc/cmdline), C(/proc/modules) and the
    parameters under C(/sys/module), asks systemd how the boot-time tuning service ended,
    and judges each check of O(checks) - C(pass), C(fail), C(pending) (off, and a reboot
    that has not happened yet would settle it) or C(skip) (nothing to check on this host).
  - The checks against wanted values (C(cpufreq), C(cpuidle), C(sysctl), C(mrrs)) read
    the post-boot audit given in O(audit) (module M(gpuhost.tuning.host_audit)), so the
    audit's rules judge them and no second rule set exists.
  - Never fails because a check failed; RV(failures) lists them for the caller's gate.
  - The wanted values come whole in O(wanted) (role C(gpuhost.tuning.common) composes
    them; O(wanted.boot_params), O(wanted.cpufreq_drivers_wanted),
    O(wanted.cpuidle_deeper_than) and O(wanted.mrrs_size) are judged here). The per-key
    options O(boot_params), O(cpufreq_drivers_wanted), O(cpuidle_deeper_than) and
    O(mrrs_size) are deprecated and stop working in 0.3.0.
extends_documentation_fragment:
  - gpuhost.tuning.wanted
  - gpuhost.tuning.boot_wanted
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  root:
    description: Root under which every host path is read (C(/) on a live host).
    type: path
    default: /
  checks:
    description: The checks to judge, in any order (they are reported in the order listed
      in the choices).
    type: list
    elements: str
    choices: [kernel, cmdline, modules, module_params, cpufreq, cpuidle, tuning_service,
              sysctl, mrrs]
    default: [kernel, cmdline, modules, module_params, cpufreq, cpuidle, tuning_service,
              sysctl, mrrs]
  expected_kernel:
    description: The kernel release that must run (C(kernel) check).
    type: str
  pending:
    description: A reboot is needed and has not happened, so the checks a reboot settles
      (C(kernel), C(cmdline), C(module_params), C(cpufreq)) are C(pending) instead of C(fail).
    type: bool
    default: false
  modules:
    description: Kernel modules that must be loaded (C(-) and C(_) alike).
    type: list
    elements: str
    default: [nvidia, nvidia_uvm]
  module_params:
    description: Module to parameter to the value C(/sys/module/<module>/parameters/<name>)
      must read (a bool option reads C(Y) or C(N)).
    type: dict
    default: {nvidia_uvm: {uvm_disable_hmm: "Y"}}
  tuning_service:
    description: The boot-time tuning unit; C(skip) when it is not installed.
    type: str
    default: gpuhost-tuning.service
  systemctl:
    description: Ask systemd about O(tuning_service) (C(systemctl show)); false where
      systemctl does not act on O(root) (the check is then C(skip)).
    type: bool
    default: true
  audit:
    description: The C(audit) result of M(gpuhost.tuning.host_audit) run after the boot;
      empty leaves C(cpufreq) skipped and finds nothing for C(cpuidle), C(sysctl), C(mrrs).
    type: dict
    default: {}
  cpuidle_deeper_than:
    description: Deprecated, use O(wanted.cpuidle_deeper_than) (named in the C(cpuidle)
      detail; the audit decides the finding).
    type: str
    default: C1
  mrrs_size:
    description: Deprecated, use O(wanted.mrrs_size) (named in the C(mrrs) detail; the audit
      decides the finding).
    type: int
    default: 4096
    choices: [128, 256, 512, 1024, 2048, 4096]
notes:
  - Check mode is the same read-only run.
seealso:
  - module: gpuhost.tuning.host_audit
  - module: gpuhost.tuning.container_verify
"""

EXAMPLES = r"""
- name: Audit after the boot
  gpuhost.tuning.host_audit: {}
  register: post

- name: Judge the boot
  gpuhost.tuning.post_boot_verify:
    expected_kernel: 6.14.11-5-bpo12-pve
    wanted: {boot_params: {amd_pstate: active}}
    audit: "{{ post.audit }}"
  register: verify

- name: "Gate: every post-boot check passes"
  ansible.builtin.fail:
    msg: "post-boot checks failed: {{ verify.failures | join('; ') }}"
  when: verify.failures | length > 0
"""

RETURN = r"""
checks:
  description: The judged checks, in the order of the O(checks) choices.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The check.
      type: str
      sample: kernel
    status:
      description: C(pass), C(fail), C(pending) or C(skip).
      type: str
      sample: pending
    detail:
      description: What was found.
      type: str
      sample: running 6.8.12-9-pve, expected 6.14.11-5-bpo12-pve
lines:
  description: One line per check, C(STATUS  name  detail), for printing.
  returned: always
  type: list
  elements: str
  sample: ["PASS  kernel  running 6.14.11-5-bpo12-pve, expected 6.14.11-5-bpo12-pve"]
failures:
  description: C(name (detail)) of every check with status C(fail).
  returned: always
  type: list
  elements: str
  sample: ["modules (not loaded: nvidia_uvm)"]
running:
  description: The running kernel and command line.
  returned: always
  type: dict
  contains:
    kernel:
      description: Running kernel release (null when unknown).
      type: str
      sample: 6.14.11-5-bpo12-pve
    cmdline:
      description: C(/proc/cmdline) without what the boot loader adds (null when empty).
      type: str
      sample: root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active
    missing:
      description: What the command line lacks of O(boot_params).
      type: list
      elements: str
      sample: ["nmi_watchdog=0"]
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    UNIT_NAME,
    check_module,
    common,
    fail,
    names,
)

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import facts  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.boot import post_boot_verify  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402


# The wanted values this module took as top-level options before option wanted
# (deprecated, they stop working in 0.3.0).
PER_KEY = ("boot_params", "cpufreq_drivers_wanted", "cpuidle_deeper_than", "mrrs_size")


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p, skip=("audit",))
    wanted = facts.wanted_values(p, PER_KEY)   # the run takes them as checked here
    names("modules", p.get("modules"), what="kernel module names (letters, digits, _ . + -)")
    for module, module_wanted in (p.get("module_params") or {}).items():
        names("module_params", [module], what="kernel module names")
        if not isinstance(module_wanted, dict):
            fail("module_params.%s" % module, module_wanted, "a mapping of parameter to value")
        names("module_params.%s" % module, list(module_wanted), what="parameter names")
    if p.get("tuning_service") is not None and not UNIT_NAME.match(p["tuning_service"]):
        fail("tuning_service", p["tuning_service"], "a systemd unit name like "
                                                    "gpuhost-tuning.service")
    if p.get("expected_kernel"):
        names("expected_kernel", [p["expected_kernel"]], RELEASE, "a kernel release")
    return wanted


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            checks=dict(type="list", elements="str", choices=list(post_boot_verify.CHECKS),
                        default=list(post_boot_verify.CHECKS)),
            expected_kernel=dict(type="str"),
            pending=dict(type="bool", default=False),
            modules=dict(type="list", elements="str", default=["nvidia", "nvidia_uvm"]),
            module_params=dict(type="dict", default={"nvidia_uvm": {"uvm_disable_hmm": "Y"}}),
            tuning_service=dict(type="str", default="gpuhost-tuning.service"),
            systemctl=dict(type="bool", default=True),
            audit=dict(type="dict", default={}),
            wanted=facts.wanted_option(),
            **facts.per_key_spec(PER_KEY)
        ),
        supports_check_mode=True,
    )
    held = check_module(module, "post_boot_verify", rules)
    with held:
        _run(module, held.checked)


def _run(module, wanted):
    facts.per_key_used(module.params, PER_KEY, _deprecate(module))
    params = dict(module.params, **wanted)
    module.exit_json(**post_boot_verify.post_boot_run(params, Runner(module)))


def _deprecate(module):
    def deprecate(text):
        module.deprecate(text, version=facts.PER_KEY_REMOVED_IN,
                         collection_name="gpuhost.tuning")
    return deprecate


if __name__ == "__main__":
    main()
