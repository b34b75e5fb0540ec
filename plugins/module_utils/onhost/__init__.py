# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host-side programs that run without Ansible, and the standard-library-only files the
boot-time program imports: ``boot_program`` (the boot-time service) and ``audit_program``
(the scheduled audit and node check), ``hostfs`` (every host path under a root), ``pci``,
``passthrough``, ``setpci_maxreadreq`` (MRRS), ``cpu`` and ``cpuidle_state``.

The files of this package import each other relatively (``from . import hostfs``), so the
copies the installers (``writers/boot_service``, ``writers/audit_timer``) put on a host are
the collection's files byte for byte and need no import fallbacks. Nothing here imports
Ansible at the top level."""
