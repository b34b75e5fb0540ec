#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_capture
short_description: Pack every file the audit reads into a tarball, read-only
version_added: "0.1.0"
description:
  - "Collect (default): runs the same read-only audit as M(gpuhost.tuning.host_audit) while
    recording every path it opens, lists or checks under O(root), and returns them packed
    as a gzip'd tar in memory (RV(archive), base64). Nothing is written on the host."
  - Symlinks are kept as links (C(/sys/bus/pci/devices/*), the C(/sys/devices) folders they
    point to, C(driver) links, C(/lib/modules/*/build)), folders the audit lists keep their
    sub-folders and links, so that C(host_audit root=<unpacked>) gives the same findings
    elsewhere.
  - Files are read to their end whatever size C(stat) claims (sysfs says 4096 and holds
    less); PCI C(config) is kept with all 4096 bytes when readable (run as root). Files the
    audit only checks for existence are packed empty; files over 4 MiB are packed as a
    marker with their size and SHA-256.
  - The audit's two command outputs go in as files under C(/.gpuhost-capture/), where an
    audit of the unpacked tree reads them - C(nvidia-smi-q-x.xml) (the one
    C(nvidia-smi -q -x), run when O(root) is C(/) and the tool is there) and
    C(kernel-log.txt) (a header naming the source and the time of the read, then only the
    NVRM XID and SXID lines of the last 7 days from the journal or C(/var/log/kern.log*)).
  - "Write: with O(archive) and O(dest), writes a collected archive to O(dest) on the
    machine the task runs on (the controller, with C(delegate_to: localhost))."
extends_documentation_fragment:
  - gpuhost.tuning.gpu_selection
author:
  - gpuhost.tuning developers (!UNKNOWN)
options:
  root:
    description: Root under which the host is read.
    type: path
    default: /
  sysctl:
    description: Sysctl keys the audit reads (the wanted values of role common).
    type: dict
    default: {}
  lxc_config_dir:
    description: Folder of the Proxmox container configs.
    type: path
    default: /etc/pve/lxc
  archive:
    description: Base64 archive returned by a collect run; with O(dest), write it.
    type: str
  dest:
    description: Path of the tarball to write (write mode).
    type: path
notes:
  - Check mode collects as usual (it writes nothing on the host anyway); in write mode it
    writes nothing and reports whether it would.
"""

EXAMPLES = r"""
- name: Pack what the audit reads
  gpuhost.tuning.host_capture:
    sysctl: "{{ gpuhost_sysctl }}"
  register: capture

- name: Write the tarball on the controller
  gpuhost.tuning.host_capture:
    archive: "{{ capture.archive }}"
    dest: "gpuhost-reports/{{ inventory_hostname }}-capture.tar.gz"
  delegate_to: localhost
"""

RETURN = r"""
archive:
  description: The tar.gz, base64 (collect mode).
  returned: collect mode
  type: str
files:
  description: Number of entries in the archive (folders, links and files).
  returned: collect mode
  type: int
bytes:
  description: Bytes of file content packed (before compression).
  returned: collect mode
  type: int
size:
  description: Size of the tar.gz in bytes.
  returned: always
  type: int
unreadable:
  description:
    - Files that could not be read, each C({path, error}).
    - Named C(skipped) before 0.2.0, a key ansible-core keeps for itself (a task whose
      result has a true C(skipped) is shown as skipped; 2.21 drops a list there).
  returned: collect mode
  type: list
  elements: dict
findings:
  description: Number of findings of the audit that ran while recording.
  returned: collect mode
  type: int
dest:
  description: Path written (write mode).
  returned: write mode
  type: str
"""

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import zipload  # noqa: E402

zipload.install()  # before the collection's imports: compiled once per host and version

import base64  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.validate import (  # noqa: E402
    check_module,
    common,
    gpu,
    inside,
    sysctl_values,
)

from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import audit  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import argspec  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.engines.audit import host_capture  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.runner import Runner  # noqa: E402
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.hostfs import atomic_write  # noqa: E402


def collect(module):
    params = module.params
    wanted = {"sysctl": params["sysctl"], "gpu_vendor": params["gpu_vendor"],
              "gpu_classes": params["gpu_classes"], "lxc_config_dir": params["lxc_config_dir"]}
    builder, result, recorded = host_capture.capture(params["root"], wanted, Runner(module))
    manifest = json.dumps({
        "schema": audit.SCHEMA,
        "root": params["root"],
        "collected_at": result["collected_at"],
        "recorded": recorded,
        "skipped": builder.skipped,
        "how": "gpuhost.tuning.capture; audit it with gpuhost.tuning.audit "
               "-e gpuhost_audit_capture=<this tarball> (not tar -x)",
    }, indent=1, sort_keys=True)
    buf = io.BytesIO()
    builder.write(buf, manifest)
    data = buf.getvalue()
    module.exit_json(changed=False, archive=base64.b64encode(data).decode("ascii"),
                     files=len(builder.entries), bytes=builder.bytes, size=len(data),
                     unreadable=builder.skipped, findings=len(result["findings"]))


def write(module):
    params = module.params
    try:
        data = base64.b64decode(params["archive"], validate=True)
    except (ValueError, TypeError) as exc:
        module.fail_json(msg="host_capture: archive is not base64 (%s): pass the 'archive' a "
                             "collect run returned" % exc)
    dest = params["dest"]
    try:
        with open(dest, "rb") as handle:
            same = handle.read() == data
    except (IOError, OSError):
        same = False
    if not same and not module.check_mode:
        folder = os.path.dirname(os.path.abspath(dest))
        try:
            if not os.path.isdir(folder):
                os.makedirs(folder)
            atomic_write(dest, data, mode=0o644)
        except (IOError, OSError) as exc:
            module.fail_json(msg="host_capture: cannot write %s: %s" % (dest, exc))
    module.exit_json(changed=not same, dest=dest, size=len(data))


def rules(p):
    """Option values this module refuses before it reads or writes anything (run by
    validate.check_module: a ValidationError names the option, the value and what is
    allowed)."""
    common(p, skip=("archive",))
    sysctl_values("sysctl", p.get("sysctl"))
    if p.get("lxc_config_dir"):
        inside(p, "lxc_config_dir")
    gpu(p, "gpu_vendor", "gpu_classes")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            sysctl=dict(type="dict", default={}),
            lxc_config_dir=dict(type="path", default="/etc/pve/lxc"),
            archive=dict(type="str", no_log=False),
            dest=dict(type="path"),
            **argspec.gpu_selection()
        ),
        required_together=[("archive", "dest")],
        supports_check_mode=True,
    )
    with check_module(module, "host_capture", rules):
        _run(module)


def _run(module):
    if module.params["archive"] is not None:
        write(module)
    else:
        collect(module)


if __name__ == "__main__":
    main()
