#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_stage
short_description: Stage an NVIDIA driver version on a Proxmox host and in its GPU containers
version_added: 0.2.0
description:
  - Stages NVIDIA driver O(version) so that the next boot loads it, without touching the
    module loaded now; the reboot, its gate and the check after it are role
    C(driver_upgrade)'s.
  - "Host: the driver's packages at O(version) (O(source=apt): C(apt-get install
    pkg=<version>-<revision>) for every NVIDIA package driver_state lists) or NVIDIA's
    installer (O(source=run): O(run_file) run with C(--silent --no-questions --ui=none
    --dkms)); then the DKMS build installed for every kernel in O(kernels) (the running
    and the next kernel), judged by C(dkms status) and the C(.ko) files (the same code as
    M(gpuhost.tuning.dkms_build)); another version installed for a kernel is replaced
    with C(--force), its build kept for a back-out."
  - "Each GPU container that installs its own user space (C(installed-deb): its own
    C(apt-get) through C(pct exec); C(installed-run): the same C(.run) pushed with
    C(pct push) and run with C(--no-kernel-module)); containers that bind-mount the
    host's libraries or use a mount hook need nothing. A stopped container is started
    for it and stopped again; a running one stays running."
  - "Package names: each installed NVIDIA package is asked for under its own name and
    its name in the other naming scheme (NVIDIA's Ubuntu repository drops the branch from
    590 on - C(libnvidia-compute-580) becomes C(libnvidia-compute), C(nvidia-dkms-580-open)
    C(nvidia-dkms-open); Ubuntu's archive keeps it, C(libnvidia-compute-595)); the
    repository's package list (C(apt-cache madison) of the host or the container) decides
    which name has O(version), and a renamed package's old name is removed in the same
    C(apt-get install) (C(libnvidia-compute-580-)). A version no name has is refused,
    naming every name tried."
  - "Everything is checked before anything changes: the version is NVIDIA's form
    (C(NNN.NN.NN) or C(NNN.NN)) and known to each apt (or is the C(.run)'s, read from its
    makeself header, never by running it), headers for every kernel, C(pct exec) works in
    every container and its C(/) has room. A refusal changes nothing; a container whose
    install fails part way gets its previous versions back before the task fails."
  - "Back-out: the same call with the previous version. Kept in
    C(/var/lib/gpuhost-tuning/driver/) until the operator removes them: the staged
    C(.run); the previous version's DKMS build for every kernel and its source
    (C(dkms/<name>/<version>/), copied before the install, whose package scripts remove
    them), which the back-out puts back so DKMS only installs it, no build; the previous
    packages' C(.deb)s from apt's cache (C(debs/)), put back into the cache so apt
    installs them without a download; each C(installed-deb) container's previous
    packages' C(.deb)s (C(containers/<vmid>/debs/), taken from its apt cache with
    C(pct pull) before its install, each under C(prlimit --fsize) at twice its installed
    size and a MiB, never over 512 MiB nor over the free space of the host's keep folder
    less 1 GiB, so neither a container's file nor its dpkg status can fill the host),
    pushed into its cache by its back-out. A container whose user space came from a
    C(.run) needs that C(.run) for its back-out (kept when it was staged here; a warning
    says when it is not)."
options:
  version:
    description:
      - The NVIDIA driver version to stage, for example C(590.48.01).
    type: str
    required: true
  source:
    description:
      - C(apt) installs the host's NVIDIA packages (and each C(installed-deb) container's)
        at O(version); C(run) runs O(run_file).
    type: str
    choices: [apt, run]
    required: true
  run_file:
    description:
      - NVIDIA's C(.run) for O(version) on the host (copy it there first), for
        O(source=run) and for containers whose user space was installed by a C(.run).
      - Default with O(source=run) is the copy kept by an earlier staging of O(version).
    type: path
  state:
    description:
      - The registered result of M(gpuhost.tuning.driver_state) on this host (what is
        installed on the host and in each GPU container).
    type: dict
    required: true
  kernels:
    description:
      - Kernels to build the DKMS module for. Default is the running and the next kernel
        as O(state) names them.
    type: list
    elements: str
  containers:
    description:
      - Only these GPU containers (vmids). Default is every GPU container in O(state).
    type: list
    elements: int
  dkms_name:
    description:
      - The DKMS module name. Default is the first of C(nvidia), C(nvidia-open),
        C(nvidia-current), C(nvidia-current-open) whose C(/usr/src/<name>-<version>)
        holds a C(dkms.conf) after the install.
    type: str
  dkms:
    description:
      - The dkms program (default C(dkms) from the PATH). Required with a O(root) other
        than C(/); it must act on that root.
    type: path
  apt_get:
    description:
      - The host's apt-get (default from the PATH). Required for O(source=apt) with a
        O(root) other than C(/); it must act on that root.
    type: path
  apt_cache:
    description:
      - The host's apt-cache (default from the PATH); same rule as O(apt_get).
    type: path
  installer:
    description:
      - The shell that runs the C(.run) on the host (default C(sh) from the PATH).
        Required for O(source=run) with a O(root) other than C(/); it must act on that
        root.
    type: path
  rewrite_bind_mounts:
    description:
      - "Rewrite each selected container's C(lxc.mount.entry) lines that bind a host file
        named with another driver version (C(/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05))
        to the staged version's file, once the host has it. Only the source changes: the
        path inside the container stays, so the links its loader made
        (C(libcuda.so.1 -> libcuda.so.580.95.05)) keep leading to the bound file. The
        config is kept first in
        C(/var/lib/gpuhost-tuning/driver/containers/<vmid>/<vmid>.conf.<old version>),
        written atomically with every other byte as it was; the back-out (the previous
        version, this option on) rewrites the entries back. It takes effect when the
        container starts next."
      - Without it such an entry is left and a warning says that the gate refuses it.
    type: bool
    default: false
  timeout:
    description:
      - Seconds each reading command (C(dkms status), C(apt-cache), C(pct status), C(df))
        may take.
    type: int
    default: 60
  install_timeout:
    description:
      - Seconds each install (C(apt-get install), the installer, a DKMS build) may take.
    type: int
    default: 1800
  root:
    description:
      - Host root the module reads and writes under.
    type: path
    default: /
notes:
  - Supports check mode - only reading commands run (C(dkms status), C(apt-cache),
    C(pct status), and C(df)/C(apt-cache) inside running containers); a stopped
    container is not started and is reported as C(would start to stage).
  - Never loads, unloads or reboots anything.
  - Every file it writes is created new under a fresh temporary name
    (C(O_CREAT|O_EXCL|O_NOFOLLOW); a folder by an exclusive C(mkdir)) and renamed into
    place, so a link or FIFO planted at a temporary name is never followed or removed
    through. A file it copies (apt's cached C(.deb)s, a kept build) that is a link or not
    a regular file (a FIFO) is skipped with a warning naming it.
seealso:
  - module: gpuhost.tuning.driver_state
  - module: gpuhost.tuning.dkms_build
author:
  - gpuhost.tuning developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read what is there
  gpuhost.tuning.driver_state:
    target_version: 590.48.01
  register: before

- name: Stage 590.48.01 from apt on the host and in the GPU containers
  gpuhost.tuning.driver_stage:
    version: 590.48.01
    source: apt
    state: "{{ before }}"

- name: Stage from NVIDIA's installer (copied to the host first)
  gpuhost.tuning.driver_stage:
    version: 590.48.01
    source: run
    run_file: /root/NVIDIA-Linux-x86_64-590.48.01.run
    state: "{{ before }}"
"""

RETURN = r"""
version:
  description: The version staged.
  returned: always
  type: str
  sample: 590.48.01
source:
  description: O(source).
  returned: always
  type: str
  sample: apt
kernels:
  description: The kernels the DKMS module was built for.
  returned: always
  type: list
  elements: str
  sample: [6.8.12-4-pve, 6.14.11-5-bpo12-pve]
host:
  description: What staging did on the host.
  returned: always
  type: dict
  contains:
    changed:
      description: Whether anything changed on the host.
      type: bool
    method:
      description: C(run), or the installed method (C(debian), C(nvidia-repo)).
      type: str
    previous:
      description: The installed version before (the back-out target).
      type: str
    packages:
      description: >-
        Each host package, C({name, from, to}) (Debian versions); C(replaces) names the
        installed package it takes the place of where the target version has another name
        (C(libnvidia-compute) for C(libnvidia-compute-580): NVIDIA's Ubuntu repository
        drops the branch from 590 on; apt-cache madison of both names decides, and the
        old name is removed in the same C(apt-get install)).
      type: list
      elements: dict
    dkms_name:
      description: The DKMS module name used.
      type: str
    dkms:
      description: Per kernel C({kernel, state_before, state_after, changed, modules}).
      type: list
      elements: dict
    kept:
      description: Where the C(.run) is kept for a back-out (O(source=run)).
      type: str
    kept_build:
      description: >-
        The previous version's DKMS build kept for a back-out, C({name, version, kernels,
        path}) (C(kernels) newly kept by this run), or null.
      type: dict
    kept_debs:
      description: The previous packages' C(.deb) files newly kept from apt's cache.
      type: list
      elements: str
    restored:
      description: Kernels whose kept DKMS build was put back (no build needed).
      type: list
      elements: str
  sample:
    changed: true
    method: debian
    previous: 580.95.05
    packages: [{name: nvidia-kernel-dkms, from: 580.95.05-1, to: 590.48.01-1}]
    dkms_name: nvidia
    dkms: [{kernel: 6.8.12-4-pve, state_before: null, state_after: installed,
            changed: true, modules: [/lib/modules/6.8.12-4-pve/updates/dkms/nvidia.ko]}]
    kept: null
containers:
  description: One row per GPU container.
  returned: always
  type: list
  elements: dict
  contains:
    vmid:
      description: The container.
      type: str
    name:
      description: Its host name, as driver_state read it.
      type: str
    method:
      description: How its user space comes (driver_state's C(userspace.method)).
      type: str
    from:
      description: Its user space version before.
      type: str
    to:
      description: Its user space version after (the target), or null when not staged.
      type: str
    action:
      description: C(staged), C(unchanged), C(skipped) (with RV(containers[].reason); the
        gate judges it), C(would stage) or C(would start to stage) (check mode), C(failed).
      type: str
    reason:
      description: Why it was skipped or unchanged.
      type: str
    started:
      description: False, or C(and stopped again) when it was started for staging.
      type: raw
    kept_debs:
      description: >-
        C(installed-deb): the previous packages' C(.deb) files newly kept on the host in
        C(/var/lib/gpuhost-tuning/driver/containers/<vmid>/debs/) (C(pct pull) from the
        container's apt cache, fetched into it first with C(--reinstall --download-only)
        when apt had removed them; one that cannot be had is a warning).
      type: list
      elements: str
    bind_mounts:
      description: >-
        With O(rewrite_bind_mounts): the versioned bind mounts rewritten (or, in check
        mode, that would be), C({from, to}) host files; RV(containers[].action) is then
        C(rewrote bind mounts) or C(would rewrite bind mounts).
      type: list
      elements: dict
    kept_conf:
      description: Where its config was kept before the first rewrite away from a version.
      type: str
    renamed:
      description: >-
        C(installed-deb): C({installed name: name at the target}) where the target
        version has another package name (NVIDIA's Ubuntu repository drops the branch from
        590 on: C(libnvidia-compute-580) becomes C(libnvidia-compute)); the old names are
        removed in the same C(apt-get install).
      type: dict
    put_back:
      description: >-
        C(installed-deb): kept C(.deb) files of the target version pushed into the
        container's apt cache before its install (a back-out; no download needed).
      type: list
      elements: str
  sample:
    - {vmid: "129", name: vllm, method: installed-deb, from: 580.95.05, to: 590.48.01,
       action: staged, reason: null, started: false}
    - {vmid: "131", name: comfy, method: bind-mount, from: 580.95.05, to: 590.48.01,
       action: unchanged, reason: "user space comes from the host (bind-mount)",
       started: false}
commands:
  description: The commands run (in check mode, the reading ones), in order.
  returned: always
  type: list
  elements: list
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver.driver_stage import (  # noqa: E402
    StageError,
    Stager,
    kept_run,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import (  # noqa: E402
    QUERY_TIMEOUT_S,
    Runner,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    RELEASE,
    VMID_RANGE,
    check_module,
    common,
    fail,
    inside,
    int_range,
    names,
)
from ansible_collections.gpuhost.tuning.plugins.module_utils.subjects.driver import driver_records  # noqa: E402


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed). The version pattern is driver_records', where driver_state's reader keeps it."""
    common(p, skip=("state",))
    if not driver_records.VERSION_RE.match(p.get("version") or ""):
        fail("version", p.get("version"), driver_records.VERSION_WANTED)
    names("kernels", p.get("kernels"), RELEASE, "kernel releases like 6.14.11-5-bpo12-pve")
    for vmid in p.get("containers") or []:
        int_range("containers", vmid, *VMID_RANGE)
    names("dkms_name", [p["dkms_name"]] if p.get("dkms_name") else [],
          what="a DKMS module name (letters, digits, _ . + -)")
    if p.get("run_file"):
        inside(p, "run_file")
    int_range("timeout", p.get("timeout"), 1, 3600)
    int_range("install_timeout", p.get("install_timeout"), 1, 86400)
    if not isinstance(p.get("state"), dict) or "host" not in p["state"]:
        fail("state", "(%s)" % type(p.get("state")).__name__,
             "the registered result of gpuhost.tuning.driver_state (with host and "
             "containers)")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            version=dict(type="str", required=True),
            source=dict(type="str", choices=["apt", "run"], required=True),
            run_file=dict(type="path"),
            state=dict(type="dict", required=True),
            kernels=dict(type="list", elements="str"),
            containers=dict(type="list", elements="int"),
            dkms_name=dict(type="str"),
            dkms=dict(type="path"),
            apt_get=dict(type="path"),
            apt_cache=dict(type="path"),
            installer=dict(type="path"),
            timeout=dict(type="int", default=QUERY_TIMEOUT_S),
            install_timeout=dict(type="int", default=1800),
            rewrite_bind_mounts=dict(type="bool", default=False),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )


ANY_ROOT = ("pct", "prlimit")


def programs(module):
    """The programs staging runs; with a root other than / the host's must be given."""
    params = module.params
    live = params["root"] == "/"
    # pct acts on the containers and prlimit bounds a pull's size whatever the root: both
    # are found on the PATH; the others act on the root, so another root must name them
    wanted = {"dkms": "dkms", "pct": "pct", "prlimit": "prlimit"}
    if params["source"] == "apt":
        wanted.update(apt_get="apt-get", apt_cache="apt-cache")
    else:
        wanted["installer"] = "sh"
    out = {}
    for key, default in sorted(wanted.items()):
        given = params.get(key) if key not in ANY_ROOT else None
        if given:
            out[key] = given
            continue
        if not live and key not in ANY_ROOT:
            module.fail_json(msg="driver_stage: root %s needs %s: a program that acts on "
                                 "that root (the real one acts on /); nothing was changed"
                                 % (params["root"], key), changed=False)
        found = module.get_bin_path(default)
        if not found:
            module.fail_json(msg="driver_stage: %s not found on the PATH (nothing was "
                                 "changed)" % default, changed=False)
        out[key] = found
    return out


def main():
    module = build_module()
    with check_module(module, "driver_stage", rules):
        _run(module)


def _run(module):
    params = module.params
    progs = programs(module)
    run_file = params["run_file"]
    if params["source"] == "run" and not run_file:
        run_file = kept_run(params["version"])
    stager = Stager(Runner(module, environ={"DEBIAN_FRONTEND": "noninteractive"}),
                    params["root"], params["version"], params["source"], params["state"],
                    progs, run_file=run_file, kernels=params["kernels"],
                    vmids=params["containers"], dkms_name=params["dkms_name"],
                    check_mode=module.check_mode, timeout=params["timeout"],
                    install_timeout=params["install_timeout"],
                    rewrite_bind_mounts=params["rewrite_bind_mounts"])
    failure = None
    try:
        result = stager.stage()
    except StageError as exc:
        failure = exc
        result = dict(stager.result)
        result.update(exc.details)
    for text in stager.warnings:
        module.warn(text)
    if failure is not None:
        module.fail_json(msg="driver_stage: %s" % failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
