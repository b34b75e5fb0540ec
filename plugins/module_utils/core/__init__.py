# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every layer uses: the command runner (``runner``), option specs and their checks
(``argspec``, ``validate``), the run lock (``run_lock``), operator policy (``policy``), the
command outputs the audit needs (``cmdout``) and the console text of findings (``text``)."""
