"""Every metric side by side: ``mr-unbalanced`` (one class rare), the constant answer's scores against
scikit-learn's, the rows and pairs the metrics disagree about, and the section in the markdown and HTML reports."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from compress.data.named import NAMED_DATASETS, load_named
from compress.reports.comparison_data import read_comparison
from compress.reports.comparison_html import render_html
from compress.reports.comparison_markdown import render_markdown
from compress.reports.metric_agreement import disagreements, metric_table


def _model(name: str | None, accuracy: float, f1: float, mcc: float) -> dict:
    model = {"params": 1_000_000, "size_bytes": 4_000_000, "flops": 1e9, "accuracy": accuracy,
             "latency_ms_p50": 5.0, "throughput": 200.0, "speedup": 1.0,
             "scores": {"accuracy": accuracy, "f1": f1, "mcc": mcc}}
    return model | ({"method": name, "retention": accuracy / 0.90} if name else {"name": "minilm"})


def _comparison(methods: list[dict], classes: dict[str, int] | None = None) -> dict:
    dataset = {"name": "mr-unbalanced", "sizes": {"train": 4810, "dev": 601, "test": 601}}
    return {"schema_version": 3, "dataset": dataset | ({"test_classes": classes} if classes else {}),
            "teacher": _model(None, 0.90, 0.94, 0.60), "methods": methods}


RARE_NEGATIVES = {"negative": 86, "positive": 515}


@pytest.mark.parametrize("classes", [RARE_NEGATIVES, {"negative": 515, "positive": 86}])
def test_the_constant_answer_scores_what_scikit_learn_says(classes):
    gold = [0] * classes["negative"] + [1] * classes["positive"]
    common = int(classes["positive"] > classes["negative"])
    always = [common] * len(gold)
    said = disagreements(read_comparison(_comparison([_model("int8", 0.9, 0.94, 0.6)], classes)))[0]
    assert f"accuracy {100 * accuracy_score(gold, always):.1f}" in said
    assert f"F1 {100 * f1_score(gold, always, zero_division=0):.1f}" in said
    assert f"Matthews {100 * matthews_corrcoef(gold, always):.1f}" in said
    assert f"always answers {['negative', 'positive'][common]}" in said
    assert said.startswith(f"{max(classes.values())} of the 601 test sentences")   # counts, read back from JSON


def test_a_row_that_gives_up_on_the_rare_class_is_named_and_the_crossed_order_said():
    comparison = read_comparison(_comparison([
        _model("distilbert", 0.88, 0.93, 0.52),     # keeps 97.8% of accuracy, 86.7% of Matthews
        _model("int8", 0.87, 0.925, 0.56),          # lower accuracy, higher Matthews than distilbert
    ], RARE_NEGATIVES))
    said = " ".join(disagreements(comparison))
    assert "distilbert (accuracy 97.8%, F1 98.9%, Matthews 86.7%)" in said
    assert "accuracy puts distilbert above int8, Matthews the other way round" in said
    assert "Here the metrics agree" not in said
    headers, rows = metric_table(comparison)
    assert headers[1:4] == ["accuracy (×100)", "F1 (×100)", "Matthews (×100)"]
    assert rows[1] == ["distilbert", "88.0", "93.0", "52.0", "97.8", "98.9", "86.7"]
    # intervals, where the comparison recorded them, beside each score and retention
    data = _comparison([_model("int8", 0.87, 0.925, 0.56)], RARE_NEGATIVES)
    data["methods"][0] |= {"score_intervals": {"mcc": {"estimate": 0.56, "low": 0.48, "high": 0.63}},
                           "retention_intervals": {"mcc": {"estimate": 0.933, "low": 0.85, "high": 1.01}}}
    _, rows = metric_table(read_comparison(data))
    assert rows[1] == ["int8", "87.0", "92.5", "56.0 (48.0–63.0)", "96.7", "98.4", "93.3 (85.0–101.0)"]


def test_metrics_that_agree_are_said_to_and_one_metric_has_no_section():
    agreeing = _comparison([_model("int8", 0.891, 0.9306, 0.594)], RARE_NEGATIVES)   # 99% of each
    said = disagreements(read_comparison(agreeing))
    assert any(s.startswith("Here the metrics agree") for s in said)
    assert "## Every metric side by side" in render_markdown(agreeing)
    assert "<h2>Every metric side by side" in render_html(agreeing, {})
    alone = _comparison([_model("int8", 0.89, 0.93, 0.59)])
    for model in (alone["teacher"], *alone["methods"]):
        model["scores"] = {"accuracy": model["accuracy"]}
    assert metric_table(read_comparison(alone)) is None
    assert "Every metric side by side" not in render_markdown(alone)


def test_mr_unbalanced_is_every_positive_and_every_sixth_negative_with_the_same_share_in_each_split():
    task, mr = load_named("mr-unbalanced"), load_named("mr")
    polarity = {i: label for split in mr.splits.values() for i, label in zip(split["id"], split["label"], strict=True)}
    kept = [i for split in task.splits.values() for i in split["id"]]
    assert len(kept) == len(set(kept)) == NAMED_DATASETS["mr-unbalanced"].size
    assert {i for i, label in polarity.items() if label == 1} <= set(kept)
    assert sorted(int(i) for i in kept if polarity[i] == 0) == list(range(5153, 10313, 6))
    shares = [float(np.mean(task.splits[name]["label"])) for name in ("train", "dev", "test")]
    assert max(shares) - min(shares) < 0.002 and 0.85 < shares[0] < 0.86
