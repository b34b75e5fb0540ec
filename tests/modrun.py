"""Run a module's ``main()`` in-process with arguments and return its JSON result."""

import contextlib
import io
import json

from ansible.module_utils import _internal as _mu_internal
from ansible.module_utils.common import warnings as _warnings
from ansible.module_utils.testing import patch_module_args


def run_module(module, args, check_mode=False, diff=False, allow_deprecations=False):
    """Call ``module.main()`` as Ansible would; return the result dict.

    ``module`` is the imported module file. A failure is returned (``failed: True`` and
    ``msg``), never raised, so tests assert on what a user would see. A deprecation in the
    result fails the run unless ``allow_deprecations`` (a test of a deprecated option).
    """
    params = dict(args)
    params["_ansible_check_mode"] = check_mode
    params["_ansible_diff"] = diff
    # Warnings and deprecations are process-global in AnsibleModule: start each run clean,
    # as a real module process does, so one test's warning never shows in another's result.
    _warnings._global_warnings.clear()
    _warnings._global_deprecations.clear()
    out = io.StringIO()
    # A module process is never the controller: once a test in this process imported
    # controller code (ansible.errors, a filter or callback plugin), ansible-core routes
    # module warnings to the controller's display instead of the result.
    was_controller = getattr(_mu_internal, "is_controller", False)
    _mu_internal.is_controller = False
    try:
        with patch_module_args(params), contextlib.redirect_stdout(out):
            try:
                module.main()
            except SystemExit:
                pass
    finally:
        _mu_internal.is_controller = was_controller
    text = out.getvalue().strip()
    # The JSON document is the last line a module prints.
    result = json.loads(text.splitlines()[-1] if text else "{}")
    # ansible-core puts its deprecation warnings (an argument spec feature, a module_utils
    # call on their way out) in the result, where a playbook prints them: in our own runs
    # one is a failure, on every controller lane (2.19, 2.20, 2.21, the newest 2.22).
    assert allow_deprecations or not result.get("deprecations"), \
        "ansible-core deprecation in %s: %r" % (getattr(module, "__name__", module),
                                                result["deprecations"])
    return result
