"""facts_base: the declaration of a fact (order, default, error section, kept) and the loop
that reads declared facts, one failing reader an error entry and its default (a fresh copy),
never a crash."""

import types

import pytest

from ansible_collections.gpuhost.tuning.plugins.module_utils.platform import facts_base
from ansible_collections.gpuhost.tuning.plugins.module_utils.platform.facts_base import (
    Fact,
    FactContext,
)


def _decl(*facts):
    return types.SimpleNamespace(FACTS=facts)


def test_facts_read_in_their_order_whatever_the_declaration_order():
    first = _decl(Fact(20, "b", lambda c: c.facts["a"] + 1))
    second = _decl(Fact(10, "a", lambda c: 1))
    ordered = facts_base.ordered([first, second])
    assert [f.name for f in ordered] == ["a", "b"]
    got = facts_base.read_facts(ordered, FactContext("/", {}, None), [])
    assert got == {"a": 1, "b": 2}


def test_two_facts_of_one_name_or_one_order_are_refused():
    with pytest.raises(ValueError, match="share order 10"):
        facts_base.ordered([_decl(Fact(10, "a", None)), _decl(Fact(10, "b", None))])
    with pytest.raises(ValueError, match="declared twice: a"):
        facts_base.ordered([_decl(Fact(10, "a", None)), _decl(Fact(11, "a", None))])


def test_a_failing_reader_takes_its_default_and_names_its_section():
    def broken(_context):
        raise RuntimeError("reader bug")

    default = {"available": False, "gpus": []}
    facts = (Fact(10, "smi", broken, default, section="nvidia_smi"),
             Fact(20, "after", lambda c: "read"))
    errors = []
    got = facts_base.read_facts(facts, FactContext("/", {}, None), errors)
    assert errors == [{"section": "nvidia_smi", "error": "RuntimeError: reader bug"}]
    assert got == {"smi": default, "after": "read"}
    got["smi"]["gpus"].append("changed")            # a run's value is its own copy
    assert default == {"available": False, "gpus": []}


def test_a_fact_not_kept_is_read_by_later_facts_but_not_returned():
    facts = (Fact(10, "raw", lambda c: [1, 2], kept=False),
             Fact(20, "sum", lambda c: sum(c.get("raw", []))))
    context = FactContext(None, {}, None)
    assert facts_base.read_facts(facts, context, []) == {"sum": 3}
    assert context.root == "/" and context.get("raw") == [1, 2]
    assert context.get("missing", "empty") == "empty"


def test_no_rules_accepts_anything():
    assert facts_base.no_rules({"anything": object()}) is None
