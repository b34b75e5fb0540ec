#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cpuidle_state
short_description: Enable or disable CPU idle states (C-states) by name or exit latency
version_added: 0.1.0
description:
  - Writes C(/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable) on every online CPU (or
    the CPUs given in O(cpus)) for the idle states selected by O(names), O(max_latency_us)
    or O(deeper_than), and reads every write back.
  - States are chosen by name or by exit latency on each CPU, never by index - index 3 is
    C3 on one CPU and C6 on another.
  - Offline CPUs have no cpuidle folder and are skipped.
  - A host without cpuidle (no C(/sys/devices/system/cpu/cpuidle) folder, as in many VMs,
    or driver C(none)) is not an error; the module returns RV(available=false) and changes
    nothing.
  - Runtime only - the kernel forgets these writes at reboot. Persist with
    C(processor.max_cstate=1) (acpi_idle) or C(intel_idle.max_cstate=N) on the kernel
    command line, or with a boot-time unit that re-applies them.
options:
  names:
    description:
      - Idle state names (C(name) file), for example C([C2]).
      - A name that no online CPU has is an error; a name only some CPUs have is applied
        where it exists.
    type: list
    elements: str
  max_latency_us:
    description:
      - Select every state whose exit latency (C(latency), microseconds) is above this.
    type: int
  deeper_than:
    description:
      - Select every state whose exit latency is above the latency of this named state on
        the same CPU; C(C1) selects C2, C3 and so on wherever they sit.
      - CPUs without that state are left alone; a name no CPU has is an error.
    type: str
  state:
    description:
      - C(disabled) writes 1 to C(disable); C(enabled) writes 0.
    type: str
    choices: [disabled, enabled]
    default: disabled
  cpus:
    description:
      - Only these CPUs; each item is a CPU number or a kernel CPU list such as C(0-63,65).
      - Offline CPUs in the list are skipped and reported in RV(skipped_cpus); a CPU the
        host does not have is an error.
      - Default is every online CPU.
    type: list
    elements: str
  root:
    description:
      - Host root the sysfs paths are resolved under (an unpacked capture, a test tree).
    type: path
    default: /
notes:
  - Exactly one of O(names), O(max_latency_us) and O(deeper_than) is required.
  - Supports check mode; nothing is written then, the result is what would change.
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Disable C2 on every online CPU (GPU kernel launch latency)
  gpuhost.tuning.cpuidle_state:
    names: [C2]
    state: disabled

- name: Disable every idle state deeper than C1, whatever each CPU calls it
  gpuhost.tuning.cpuidle_state:
    deeper_than: C1

- name: Disable states with an exit latency above 10 us on the first socket only
  gpuhost.tuning.cpuidle_state:
    max_latency_us: 10
    cpus: ["0-31", "64-95"]

- name: Re-enable C2 (revert)
  gpuhost.tuning.cpuidle_state:
    names: [C2]
    state: enabled
"""

RETURN = r"""
written:
  description: When the task failed after some flags were written, each C({cpu, name})
    written (the task then reports changed=true).
  returned: on a failure after writing
  type: list
  elements: dict
  sample: [{"cpu": 0, "name": "C2"}]
available:
  description: Whether a cpuidle driver with idle states is active (false on hosts without
    cpuidle or with driver C(none); nothing is changed then).
  returned: always
  type: bool
  sample: true
driver:
  description: The cpuidle driver (C(acpi_idle), C(intel_idle), C(haltpoll), C(none)), or
    null when there is no cpuidle folder at all.
  returned: always
  type: str
  sample: acpi_idle
cpus:
  description: The online CPUs considered, as a kernel CPU list.
  returned: always
  type: str
  sample: 0-127
skipped_cpus:
  description: CPUs given in O(cpus) that are offline, as a kernel CPU list.
  returned: always
  type: str
  sample: "64"
states:
  description:
    - One entry per selected state name. CPU sets are kernel CPU lists (C(0-63,65-127),
      empty string for none), the form C(/sys/devices/system/cpu/online) uses.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: State name.
      type: str
      sample: C2
    latency_us:
      description: Highest exit latency of this state among the CPUs, in microseconds.
      type: int
      sample: 800
    cpus:
      description: CPUs on which this state was selected.
      type: str
      sample: 0-127
    disabled_before:
      description: Of those CPUs, the ones where the state was disabled before.
      type: str
      sample: ""
    disabled_after:
      description: Of those CPUs, the ones where it is disabled after the run (in check mode,
        what it would be).
      type: str
      sample: 0-127
  sample:
    - name: C2
      latency_us: 800
      cpus: 0-127
      disabled_before: ""
      disabled_after: 0-127
changed_count:
  description: Number of CPU/state pairs written (or that would be written in check mode).
  returned: always
  type: int
  sample: 128
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    IDLE_STATE,
    MAX_LATENCY_US,
    check_module,
    common,
    cpu_list,
    idle_state_name,
    int_range,
    names,
    non_empty_list,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu.cpu import CpuError  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.cpu.cpuidle_state import (  # noqa: E402
    idle_run,
)


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p)
    names("names", p.get("names"), IDLE_STATE,
          "idle state names as the kernel spells them (POLL, C1, C1E, C2, ...; case matters)")
    non_empty_list("names", p.get("names"), "idle state names")
    idle_state_name("deeper_than", p.get("deeper_than"), allow_empty=True)
    int_range("max_latency_us", p.get("max_latency_us"), 0, MAX_LATENCY_US)
    non_empty_list("cpus", p.get("cpus"), "CPU lists like 0-63")
    for item in p.get("cpus") or []:
        cpu_list("cpus", item)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str"),
            max_latency_us=dict(type="int"),
            deeper_than=dict(type="str"),
            state=dict(type="str", choices=["disabled", "enabled"], default="disabled"),
            cpus=dict(type="list", elements="str"),
            root=dict(type="path", default="/"),
        ),
        mutually_exclusive=[("names", "max_latency_us", "deeper_than")],
        required_one_of=[("names", "max_latency_us", "deeper_than")],
        supports_check_mode=True,
    )


def main():
    module = build_module()
    with check_module(module, "cpuidle_state", rules):
        _run(module)


def _run(module):
    try:
        result = idle_run(module.params, module.check_mode)
    except CpuError as exc:
        written = [{"cpu": cpu, "name": name} for cpu, name in exc.written]
        module.fail_json(msg=str(exc), changed=bool(written), written=written)
    except (ValueError, OSError) as exc:
        module.fail_json(msg="cpuidle_state: %s" % exc, changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
