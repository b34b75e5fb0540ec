# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option specs shared by several modules, and defaults filled by Ansible's own argument
spec validator for callers that hand a module pass only some options (host_tune's parts).

The documentation of the shared options is the doc fragment ``gpuhost.tuning.gpu_selection``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

try:
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
except ImportError:  # the scheduled audit (programs/audit_program) on a host without Ansible
    ArgumentSpecValidator = None

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.pci_ids import (
    GPU_CLASSES,
    NVIDIA_VENDOR,
)


def gpu_selection(vendor="gpu_vendor", classes="gpu_classes"):
    """The GPU vendor and classes options (fragment ``gpu_selection``; ``vendor``/``classes``
    name them, ``vendor``/``classes`` for fragment ``gpu_selection.devices``)."""
    return {vendor: dict(type="str", default=NVIDIA_VENDOR),
            classes: dict(type="list", elements="str", default=list(GPU_CLASSES))}


def device_selection():
    """``vendor``, ``classes`` and ``include_upstream`` (fragment ``gpu_selection.devices``)."""
    spec = gpu_selection("vendor", "classes")
    spec["include_upstream"] = dict(type="bool", default=True)
    return spec


def root():
    return {"root": dict(type="path", default="/")}


def fill(spec, params, internal=()):
    """``params`` checked against ``spec`` and completed with its defaults, as AnsibleModule
    does for a module (None counts as not given); ``internal``: keys a caller inside the
    collection may add that are no option (kept as given). ValueError names every problem."""
    given = dict((k, v) for k, v in (params or {}).items()
                 if v is not None and k not in internal)
    if ArgumentSpecValidator is None:
        # Without Ansible (the audit timer's program on the host, its values checked by
        # module audit_timer when it was installed): the defaults, then what is given.
        out = dict((k, copy.deepcopy(o.get("default"))) for k, o in spec.items())
        out.update(given)
        for key in internal:
            out[key] = (params or {}).get(key)
        return out
    result = ArgumentSpecValidator(spec).validate(given)
    if result.error_messages:
        raise ValueError("; ".join(result.error_messages))
    out = result.validated_parameters
    for key in internal:
        out[key] = (params or {}).get(key)
    return out
