"""How finely a search's selection sentences resolve a retention near its bar, for every metric: the candidate it
is computed for meets the bar, and for accuracy the simulation agrees with the closed form it generalises."""

from __future__ import annotations

import numpy as np
import pytest

from compress.errors import CompressError
from compress.predictions import Predictions
from compress.search.resolution import plausible_candidate, selection_resolution
from compress.stats import Scored, retention_resolution
from compress.task_metrics import METRICS


def _classifier(n: int, accuracy: float = 0.84, seed: int = 1) -> Predictions:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    answers = np.where(rng.random(n) < accuracy, labels, 1 - labels)
    return Predictions(np.eye(2, dtype=np.float32)[answers], labels)


def _regressor(n: int, seed: int = 1) -> Predictions:
    rng = np.random.default_rng(seed)
    gold = rng.standard_normal(n)
    return Predictions((gold + 0.6 * rng.standard_normal(n)).astype(np.float32)[:, None], gold.astype(np.float32))


def _score(predictions: Predictions, name: str) -> float:
    metric = METRICS[name]
    return Scored(predictions.statistics(metric)[None], metric, predictions.logits.shape[-1]).value()


@pytest.mark.parametrize("name", ["accuracy", "f1", "macro_f1", "mcc", "pearson", "spearman"])
def test_the_candidate_keeps_the_bars_share_of_the_teachers_metric(name):
    teacher = _regressor(2000) if name in ("pearson", "spearman") else _classifier(2000)
    candidate = plausible_candidate(teacher, METRICS[name], 0.97, 0.12)
    assert _score(candidate, name) / _score(teacher, name) == pytest.approx(0.97, abs=0.003)
    if not teacher.regression:   # it answers otherwise than the teacher on the share asked
        assert (candidate.outputs != teacher.outputs).mean() == pytest.approx(0.12, abs=0.001)


def test_for_accuracy_the_simulated_candidates_interval_matches_the_closed_form():
    from compress.stats import retention_interval

    teacher, metric = _classifier(4000), METRICS["accuracy"]
    candidate = plausible_candidate(teacher, metric, 0.97, 0.12)
    evidence = [Scored(p.statistics(metric)[None], metric, 2) for p in (candidate, teacher)]
    interval = retention_interval(*evidence)
    closed = retention_resolution(4000, _score(teacher, "accuracy"), 0.97, 0.12)
    assert (interval.high - interval.low) / 2 == pytest.approx(closed, rel=0.1)
    assert selection_resolution(teacher, metric, 0.97, 0.12) == closed   # accuracy uses the closed form itself


@pytest.mark.parametrize("name", ["mcc", "pearson"])
def test_four_times_the_sentences_resolve_about_twice_as_finely(name):
    make = _regressor if name == "pearson" else _classifier
    few, many = (selection_resolution(make(n), METRICS[name], 0.97, 0.12) for n in (1000, 4000))
    assert 0 < many < few and few / many == pytest.approx(2, rel=0.25)


def test_a_teacher_without_a_positive_score_has_no_bar():
    rng = np.random.default_rng(0)
    gold = rng.standard_normal(200).astype(np.float32)
    teacher = Predictions((-gold)[:, None], gold)          # Pearson -1: no share of it to keep
    with pytest.raises(CompressError, match="the teacher's Pearson on the selection sentences is -1.0000"):
        selection_resolution(teacher, METRICS["pearson"], 0.97, 0.12)
