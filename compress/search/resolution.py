"""How finely a search's selection evidence resolves a retention near its bar, known before any candidate trains.

The answer is the half-width of the paired interval a comparison would give (:func:`compress.stats.retention_interval`)
for a plausible candidate whose retention is exactly the bar. For accuracy it has a closed form
(:func:`compress.stats.retention_resolution`). For any other metric the candidate is made from the teacher's own
selection predictions, then bootstrapped as a trained one would be:

- a classification metric (F1, macro-F1, Matthews): the candidate answers otherwise than the teacher on a share
  ``disagreement`` of the sentences (as a trained student near the bar does), some where the teacher was right
  (it answers another class) and the rest where the teacher was wrong (it answers the gold class); how many of each
  is chosen so that its metric is the bar's share of the teacher's;
- a regression metric (Pearson, Spearman): the candidate answers the teacher's values moved by :data:`DEVIATION` of
  their spread (as a trained student near the bar departs from them), partly at random and partly towards the gold
  values, mixed so that its metric is the bar's share of the teacher's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compress.errors import CompressError
from compress.predictions import Predictions
from compress.runs.paired import teacher_evidence
from compress.stats import retention_interval, retention_resolution
from compress.task_metrics import ACCURACY, TaskMetric

# A regression candidate near the bar departs from the teacher's values by this share of their spread: on mr-score's
# test sentences, prune (99.6% of the teacher's Pearson) by 0.21, distilbert+prune (93.8%) by 0.45, distilbert
# (94.4%) by 0.40; its departure leans towards the gold values (correlation 0.07 to 0.19 with the teacher's error).
DEVIATION = 0.3


def selection_resolution(teacher: Predictions, metric: TaskMetric, retention: float, disagreement: float,
                         seed: int = 0) -> float:
    """The half-width, in retention, of the paired interval of a candidate that keeps ``retention`` of the teacher's
    ``metric`` on the sentences ``teacher`` answered (see the module docstring)."""
    score = _score(teacher, metric)
    if not score > 0:
        raise CompressError(f"the teacher's {metric.title} on the selection sentences is {score:.4f}; a retention "
                            "of it means nothing, so the search has no bar (a metric above 0 is needed).")
    if metric == ACCURACY:
        gap = (1 - retention) * score
        return retention_resolution(len(teacher.labels), score, retention, max(disagreement, gap))
    candidate = plausible_candidate(teacher, metric, retention, disagreement, seed)
    interval = retention_interval(teacher_evidence(candidate, metric), teacher_evidence(teacher, metric), seed=seed)
    return (interval.high - interval.low) / 2


def plausible_candidate(teacher: Predictions, metric: TaskMetric, retention: float, disagreement: float,
                        seed: int = 0) -> Predictions:
    """A candidate's answers on the teacher's sentences whose ``metric`` is ``retention`` of the teacher's, as near
    as the sentences allow (see the module docstring)."""
    rng = np.random.default_rng(seed)
    target = retention * _score(teacher, metric)
    if teacher.regression:
        return _answers(_regression_values(teacher, metric, target, rng), teacher)
    classes = teacher.logits.shape[-1]
    answered = teacher.outputs
    right = rng.permutation(np.flatnonzero(answered == teacher.labels))
    wrong = rng.permutation(np.flatnonzero(answered != teacher.labels))
    changed = min(max(1, round(disagreement * len(answered))), len(answered))
    other = (answered + rng.integers(1, classes, size=answered.shape)) % classes   # any class but the teacher's
    best: tuple[float, np.ndarray] | None = None
    for from_right in range(max(0, changed - len(wrong)), min(changed, len(right)) + 1):
        outputs = answered.copy()
        outputs[right[:from_right]] = other[right[:from_right]]
        outputs[wrong[:changed - from_right]] = teacher.labels[wrong[:changed - from_right]]
        miss = abs(_score(_answers(outputs, teacher), metric) - target)
        if best is None or miss < best[0]:
            best = (miss, outputs)
    assert best is not None
    return _answers(best[1], teacher)


def _regression_values(teacher: Predictions, metric: TaskMetric, target: float, rng: np.random.Generator) -> np.ndarray:
    """The teacher's values plus a deviation of :data:`DEVIATION` times their spread, mixed from independent noise and
    a step towards the gold values (a student near the bar is sometimes right where the teacher is wrong), the mix
    chosen so that the metric meets ``target``; where even pure noise of that size keeps more, a larger noise."""
    values = teacher.outputs.astype(np.float64)
    spread = values.std() or 1.0
    noise = rng.standard_normal(values.shape)
    towards_gold = teacher.labels.astype(np.float64) - values
    towards_gold = (towards_gold - towards_gold.mean()) / (towards_gold.std() or 1.0)

    def answered(angle: float, size: float = DEVIATION) -> np.ndarray:
        return values + size * spread * (np.cos(angle) * noise + np.sin(angle) * towards_gold)

    def score(answers: np.ndarray) -> float:
        return _score(_answers(answers, teacher), metric)

    if score(answered(0.0)) > target:   # pure noise of that size keeps more than the bar: grow it until it does not
        high = 2 * DEVIATION
        while score(answered(0.0, high)) > target and high < 1e6:
            high *= 2
        return answered(0.0, _boundary(lambda size: score(answered(0.0, size)) <= target, high / 2, high))
    # the metric rises as the deviation turns towards the gold values
    return answered(_boundary(lambda angle: score(answered(angle)) > target, 0.0, np.pi / 2))


def _boundary(past: Callable[[float], bool], low: float, high: float) -> float:
    """Where ``past`` turns true between ``low`` (false) and ``high`` (true), by 50 halvings; the side it is true."""
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (low, middle) if past(middle) else (middle, high)
    return high


def _answers(outputs: np.ndarray, teacher: Predictions) -> Predictions:
    """Predictions answering ``outputs`` (classes, or a regression's values) on the teacher's sentences."""
    if teacher.regression:
        return Predictions(outputs.astype(np.float32)[:, None], teacher.labels)
    return Predictions(np.eye(teacher.logits.shape[-1], dtype=np.float32)[outputs], teacher.labels)


def _score(predictions: Predictions, metric: TaskMetric) -> float:
    return teacher_evidence(predictions, metric).value()
