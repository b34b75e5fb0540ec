"""platform/bounded.py: numbers and JSON from host text, bounded (issue 36 items 11 and 15)."""

import time

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import bounded


def test_int_of_reads_counters_and_refuses_what_no_counter_is():
    assert bounded.int_of(" 18446744073709551615\n") == 2 ** 64 - 1
    assert bounded.int_of("-3") == -3
    assert bounded.int_of("5" * 5000) is None  # int() would raise past 4,300 digits
    assert bounded.int_of("5" * 21, default=0) == 0
    assert bounded.int_of("\u0663") is None  # ARABIC-INDIC DIGIT THREE: str.isdigit says yes
    assert bounded.int_of("12 seconds") is None
    assert bounded.int_of(True) is None and bounded.int_of(None, 7) == 7


def test_the_int_pattern_stops_at_twenty_digits():
    import re
    pattern = re.compile(r"blocked for more than (%s) seconds" % bounded.INT)
    assert pattern.search("blocked for more than 122 seconds").group(1) == "122"
    assert pattern.search("blocked for more than %s seconds" % ("9" * 5000)) is None


def test_finite_refuses_nan_infinity_and_bools():
    assert bounded.finite(1) and bounded.finite(2.5)
    assert not [v for v in (float("nan"), float("inf"), -float("inf"), True, "1", None)
                if bounded.finite(v)]


def test_json_loads_reads_documents_and_refuses_deep_nesting_quickly():
    assert bounded.json_loads('{"a": ["[[[[", {"b": "}}}\\""}]}') == {
        "a": ["[[[[", {"b": '}}}"'}]}
    assert bounded.json_depth('[[["]]]]]]"]]]') == 3
    start = time.monotonic()
    with pytest.raises(ValueError, match="nested 200000 deep"):
        bounded.json_loads("[" * 200000)
    rows = ['{"name": "h%d", "f": [1, 2, "x[y"]}' % i for i in range(100000)]
    big = '{"hosts": [%s]}' % ",".join(rows)
    assert len(bounded.json_loads(big)["hosts"]) == 100000
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("text", ['{"x": NaN}', '[Infinity]', '[-Infinity]'])
def test_json_loads_refuses_non_numbers(text):
    with pytest.raises(ValueError, match="not a number"):
        bounded.json_loads(text)
