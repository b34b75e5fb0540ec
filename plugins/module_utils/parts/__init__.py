# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tune parts' machinery: the registry (``registry``), the snapshot folder and its
``files`` section (``snapstore``), the loop of a snapshot over the parts' sections
(``sections``) and the verify part (``verify``). The parts themselves live in their
subjects' files."""
