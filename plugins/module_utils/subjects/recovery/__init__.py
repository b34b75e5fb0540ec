# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU recovery: what each GPU needs (nothing, a reset, a drain, a reboot), from the
driver's own recovery action and the XID events, and who holds the GPU."""
