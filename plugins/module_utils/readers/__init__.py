# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host is, read only: sysfs, procfs, config files and command outputs under a root,
and the audit's facts (``facts``). Nothing here writes or judges: the checks are in
``checks``, the writes in ``writers`` and ``parts``."""
