"""Each task metric against scikit-learn and SciPy, its resampled values against the metric of the resample drawn
out, its linearisation against the jackknife, and its intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, rankdata, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from compress.errors import CompressError
from compress.stats import Scored, difference_interval, metric_interval, retention_interval
from compress.task_metrics import METRICS, also_reported, resolve_metric

RNG = np.random.default_rng(3)


def _classes(n: int = 300, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    gold = RNG.integers(0, classes, n)
    predicted = np.where(RNG.random(n) < 0.7, gold, RNG.integers(0, classes, n))
    return predicted, gold


def _values(n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    gold = RNG.normal(size=n)
    return gold + RNG.normal(scale=0.8, size=n), gold


@pytest.mark.parametrize("classes", [2, 3, 5])
def test_classification_metrics_match_scikit_learn(classes):
    predicted, gold = _classes(classes=classes)
    assert METRICS["accuracy"].score(predicted, gold, classes) == pytest.approx(accuracy_score(gold, predicted))
    assert METRICS["macro_f1"].score(predicted, gold, classes) == pytest.approx(
        f1_score(gold, predicted, average="macro"))
    assert METRICS["mcc"].score(predicted, gold, classes) == pytest.approx(matthews_corrcoef(gold, predicted))
    if classes == 2:
        assert METRICS["f1"].score(predicted, gold, classes) == pytest.approx(f1_score(gold, predicted))


def test_macro_f1_leaves_out_a_class_nobody_answered_or_had_as_scikit_learn_does():
    gold, predicted = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])          # class 2 of 3 never occurs
    assert METRICS["macro_f1"].score(predicted, gold, 3) == pytest.approx(f1_score(gold, predicted, average="macro"))


def test_a_constant_answer_has_matthews_zero_where_accuracy_looks_fine():
    gold = np.array([1] * 70 + [0] * 30)
    always = np.ones(100, dtype=np.int64)
    assert METRICS["accuracy"].score(always, gold) == pytest.approx(0.7)
    assert METRICS["mcc"].score(always, gold) == 0.0 == matthews_corrcoef(gold, always)


def test_correlations_match_scipy():
    values, gold = _values()
    assert METRICS["pearson"].score(values, gold) == pytest.approx(pearsonr(values, gold).statistic)
    assert METRICS["spearman"].score(values, gold) == pytest.approx(spearmanr(values, gold).statistic)


@pytest.mark.parametrize("name", ["accuracy", "macro_f1", "mcc", "pearson"])
def test_a_weighted_resample_is_the_metric_of_the_sentences_drawn(name):
    metric = METRICS[name]
    outputs, gold = _values() if metric.regression else _classes()
    stats = metric.statistics(outputs, gold, 3)[None]
    drawn = RNG.integers(0, len(gold), (4, len(gold)))
    weights = np.stack([np.bincount(row, minlength=len(gold)) / len(gold) for row in drawn])
    expected = [metric.score(outputs[row], gold[row], 3) for row in drawn]
    assert metric.values(stats, weights, 3)[:, 0] == pytest.approx(expected)


@pytest.mark.parametrize("name", ["macro_f1", "mcc", "pearson", "spearman"])
def test_linearisation_matches_the_jackknife(name):
    """A sentence's share of the metric (the delta method) against the jackknife's pseudo-value (n - 1) times the
    metric's drop when the sentence is left out: an independent way to the same influence."""
    metric = METRICS[name]
    outputs, gold = _values(120) if metric.regression else _classes(120)
    n = len(gold)
    terms = metric.terms(metric.statistics(outputs, gold, 3)[None], 3)[0]
    full = metric.score(outputs, gold, 3)
    keep = ~np.eye(n, dtype=bool)
    if name == "spearman":       # the delta method holds the ranks fixed: so does this reference
        outputs, gold, metric = rankdata(outputs), rankdata(gold), METRICS["pearson"]
    jackknife = np.array([full + (n - 1) * (full - metric.score(outputs[k], gold[k], 3)) for k in keep])
    assert terms.mean() == pytest.approx(full)
    assert np.corrcoef(terms, jackknife)[0, 1] > 0.99
    assert np.abs(terms - jackknife).max() < 0.1 * np.abs(jackknife - full).max()   # second-order terms differ


def test_accuracy_evidence_is_the_right_or_wrong_array():
    predicted, gold = _classes()
    correct = (predicted == gold).astype(float)
    scored = Scored(METRICS["accuracy"].statistics(predicted, gold, 3)[None], METRICS["accuracy"], 3)
    assert np.array_equal(scored.terms()[0], correct)
    assert metric_interval(scored) == metric_interval(correct)


def test_spearman_interval_agrees_with_a_bootstrap_that_ranks_each_resample():
    values, gold = _values(400)
    metric = METRICS["spearman"]
    interval = metric_interval(Scored(metric.statistics(values, gold, 2)[None], metric))
    drawn = np.random.default_rng(0).integers(0, len(gold), (2000, len(gold)))
    exact = np.array([spearmanr(values[row], gold[row]).statistic for row in drawn])
    low, high = np.percentile(exact, [2.5, 97.5])
    assert interval.low == pytest.approx(low, abs=0.01)
    assert interval.high == pytest.approx(high, abs=0.01)


def test_matthews_retention_and_difference_are_paired():
    gold = RNG.integers(0, 2, 600)
    teacher = np.where(RNG.random(600) < 0.85, gold, 1 - gold)
    student = np.where(RNG.random(600) < 0.95, teacher, 1 - teacher)     # mostly the teacher's answers
    metric = METRICS["mcc"]

    def scored(outputs):
        return Scored(metric.statistics(outputs, gold, 2)[None], metric)

    retention = retention_interval(scored(student), scored(teacher))
    assert retention.estimate == pytest.approx(matthews_corrcoef(gold, student) / matthews_corrcoef(gold, teacher))
    assert retention.low < retention.estimate < retention.high
    difference = difference_interval(scored(student), scored(teacher))
    alone = metric_interval(scored(student)).half_width + metric_interval(scored(teacher)).half_width
    assert difference.half_width < alone        # what the two share cancels
    with pytest.raises(ValueError, match="one metric"):
        difference_interval(scored(student), (student == gold).astype(float))


def test_resolve_metric_refuses_what_does_not_fit_the_task():
    assert resolve_metric(None, regression=False, classes=2).name == "accuracy"
    assert resolve_metric(None, regression=True, classes=1).name == "pearson"
    assert resolve_metric("mcc", regression=False, classes=5).name == "mcc"
    with pytest.raises(CompressError, match="--metric mcc does not score a regression task"):
        resolve_metric("mcc", regression=True, classes=1)
    with pytest.raises(CompressError, match="does not score a classification task"):
        resolve_metric("spearman", regression=False, classes=2)
    with pytest.raises(CompressError, match="two-class task and this task has 5 classes"):
        resolve_metric("f1", regression=False, classes=5)
    with pytest.raises(CompressError, match="unknown metric 'auc'"):
        resolve_metric("auc", regression=False, classes=2)


def test_reports_show_what_the_papers_print_beside_the_chosen_metric():
    assert [m.name for m in also_reported(METRICS["accuracy"], False, 2)] == ["f1", "mcc"]
    assert [m.name for m in also_reported(METRICS["mcc"], False, 2)] == ["accuracy", "f1"]
    assert [m.name for m in also_reported(METRICS["pearson"], True, 1)] == ["spearman"]
    assert also_reported(METRICS["accuracy"], False, 5) == ()
