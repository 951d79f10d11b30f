"""Parsing pipelines of methods, their errors, and writing them back."""

from __future__ import annotations

import pytest

from compress.errors import CompressError
from compress.registry import all_methods, families, names
from compress.registry.pipeline import Pipeline, Step, check, parse, split_list
from compress.runs.compare_plan import plan_runs


@pytest.mark.parametrize("text", [
    "distilbert", "distilbert+int8", "albert[sharing=attention,embedding_size=256]+int8",
    "tinybert[init_from=\"runs/a b\",augment_copies=2]+static-int8[backend=onnxruntime]", "int8",
    "distilbert[init_map=\"2,4\"]+bf16",
])
def test_round_trip(text):
    assert str(parse(text)) == text


def test_parse_gives_steps_and_text_options():
    pipeline = parse("albert[sharing=attention,embedding_size=256]+int8")
    assert pipeline == Pipeline((Step("albert", {"sharing": "attention", "embedding_size": "256"}), Step("int8")))
    assert pipeline.names == ["albert", "int8"]
    assert str(parse("distilbert") + parse("int8")) == "distilbert+int8"
    assert str(Step("albert", {"dropout": False, "init_from": None})) == "albert[dropout=false,init_from=none]"


@pytest.mark.parametrize(("text", "expected"), [
    ("", "expected a method name at character 1"),
    ("distilbert+", "expected a method name at character 12"),
    ("albert[sharing]", "expected '=' after sharing"),
    ("albert[sharing=all", "expected ',' or ']'"),
    ("albert[=all]", "expected an option name"),
    ("albert[sharing=]", "expected a value for sharing"),
    ("albert[a=\"x]", "unclosed quote"),
    ("albert int8", "expected '+' or the end"),
    ("albert[groups=2,groups=3]", "gives groups twice to albert"),
])
def test_malformed_pipelines_fail_in_one_sentence(text, expected):
    with pytest.raises(CompressError, match=None) as raised:
        parse(text)
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def test_check_orders_steps():
    assert [m.name for m in check(parse("distilbert+int8"))] == ["distilbert", "int8"]
    assert [m.kind for m in check(parse("int8"))] == ["transform"]
    for text, expected in [("int8+distilbert", "distilbert trains a student and can only be a pipeline's first"),
                           ("distilbert+albert", f"--then takes a {families(all_methods('transform'))} method"),
                           ("distilbert+pruning", f"unknown method 'pruning'; known: {', '.join(names())}."),
                           ("int8+onnx", "onnx cannot follow int8")]:
        with pytest.raises(CompressError) as raised:
            check(parse(text))
        assert expected in str(raised.value), text


def test_a_list_of_pipelines_splits_on_commas_outside_brackets_and_quotes():
    assert split_list("albert[sharing=attention,embedding_size=256]+int8, distilbert,,int8") == [
        "albert[sharing=attention,embedding_size=256]+int8", "distilbert", "int8"]
    assert split_list('distilbert[init_map="2,4"]+bf16,tinybert') == ['distilbert[init_map="2,4"]+bf16', "tinybert"]
    assert split_list("") == []


def test_a_comparison_plans_each_shared_step_once_parents_first():
    runs = plan_runs(["distilbert+int8", "distilbert", "albert[sharing=attention]+int8[backend=torch]",
                      "distilbert+static-int8"])
    assert [(r.name, r.parent) for r in runs] == [
        ("distilbert", None), ("distilbert+int8", "distilbert"),
        ("albert[sharing=attention]", None),
        ("albert[sharing=attention]+int8[backend=torch]", "albert[sharing=attention]"),
        ("distilbert+static-int8", "distilbert")]
    assert runs[3].steps == ("albert[sharing=attention]", "albert[sharing=attention]+int8[backend=torch]")
    assert runs[3].options == {"backend": "torch"} and runs[3].method.name == "int8"
    # Options are converted once, so one run is one name however its options were spelled.
    assert [r.name for r in plan_runs(["albert[embedding_size=0256]"])] == ["albert[embedding_size=256]"]
