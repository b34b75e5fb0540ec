# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What changes a host outside the tune pass: the write side of the modules (kernel command
line, sysctl, LXC configs, placement, DKMS builds, driver staging, container repair) and the
installers of the host-side programs (``boot_service``, ``audit_timer``, ``unitinstall``).
Each file is named for the module it serves; its reading side is in ``readers``."""
