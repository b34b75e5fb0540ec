# -*- coding: utf-8 -*-
# Copyright: gpuhost.tuning developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Numbers and JSON read from text a host, a tenant or an old report wrote: bounded.

One place for the two limits every parser of host text keeps, so a planted value fails
one field, never a whole section:

- A number is at most ``DIGITS`` ASCII digits. Python refuses ``int()`` of more than 4,300
  digits with a ValueError that used to fail a whole kernel-log section; a host counter is a
  u64 (20 digits) at most. Regular expressions take their digits from ``INT`` (``[0-9]``,
  never ``\\d``, which matches other scripts' digits too), so a longer run is simply no match.
- JSON is at most ``JSON_DEPTH`` deep and has no NaN or Infinity. Python's decoder recurses
  once per ``[`` or ``{`` (200,000 of them were a RecursionError, not a clear refusal), and
  accepts ``NaN``, which no rule can compare against.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re

# u64's 20 digits: the largest counter a kernel or driver file prints.
DIGITS = 20
INT = r"[0-9]{1,%d}" % DIGITS
_INT = re.compile(r"^[+-]?%s$" % INT)
# Our documents nest 8 deep; a config or result from a tool a dozen at most.
JSON_DEPTH = 64
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def int_of(text, default=None, digits=DIGITS):
    """``text`` (surrounding blanks allowed, an optional sign) as an int, or ``default``
    when it is not a number of at most ``digits`` ASCII digits."""
    if isinstance(text, bool):
        return default
    if isinstance(text, int):
        return text if len(str(abs(text))) <= digits else default
    if not isinstance(text, str):
        return default
    text = text.strip()
    if not _INT.match(text) or len(text.lstrip("+-")) > digits:
        return default
    return int(text)


def finite(value):
    """Whether ``value`` is a real number a rule can compare with (not NaN, not +-inf,
    not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (
        isinstance(value, int) or math.isfinite(value))


def json_depth(text):
    """How deep the arrays and objects of JSON ``text`` nest (strings' brackets not
    counted); linear in the length."""
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _no_constant(name):
    raise ValueError("%s is not a number JSON may carry here" % name)


def json_loads(text, depth=JSON_DEPTH):
    """``json.loads`` of host or report text that refuses, with a ValueError saying why,
    what nests deeper than ``depth`` and the constants NaN and +-Infinity."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    found = json_depth(text)
    if found > depth:
        raise ValueError("JSON nested %d deep (at most %d read)" % (found, depth))
    return json.loads(text, parse_constant=_no_constant)
