"""A task's own metric, as the papers score it: accuracy, macro-F1, F1 of the positive class, Matthews correlation
(CoLA), and Pearson and Spearman correlation (STS-B, a regression task).

Every metric here is a function of the *means of per-sentence statistics*: accuracy of whether each sentence was
answered right; F1 and Matthews of the confusion matrix's cells (each sentence falls in one); Pearson of x, y, x^2,
y^2 and xy; Spearman is Pearson on the ranks. That one form is what the statistics need: a bootstrap resample is a
weighting of the sentences, so its metric is the metric of the weighted means (:meth:`TaskMetric.values`), exact
for every metric but Spearman, whose ranks are taken once on all sentences (a resample's own ranks differ from them
by the empirical distribution's sampling error; tests/test_task_metrics.py holds the two intervals together); and
the metric's linearisation at the means (the delta method, :meth:`TaskMetric.terms`) is what the seeds' part of an
interval reads.

A leaf module: the training loop, the predictions, the statistics and the reports all read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compress.errors import CompressError

Statistics = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
Value = Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class TaskMetric:
    """One metric: its name on the command line, its title in reports, the task it fits, and its two functions.

    Attributes:
        name: what ``--metric`` takes (``mcc``).
        title: the column header's name (``Matthews``).
        regression: whether it scores a regression task (else a classification task).
        statistics: ``(outputs, gold, classes) -> (n, k)``: each sentence's statistics (``outputs`` are the predicted
            classes, or the predicted values of a regression).
        value: ``(means (..., k), classes) -> (...)``: the metric of the statistics' means (any weights).
        two_classes: it needs exactly two classes (F1 of the positive class).
        linear: :attr:`value` is linear in the means (accuracy), so a sentence's share is its value exactly.
    """

    name: str
    title: str
    regression: bool
    statistics: Statistics
    value: Value
    two_classes: bool = False
    linear: bool = False

    def values(self, stats: np.ndarray, weights: np.ndarray | None = None, classes: int = 2) -> np.ndarray:
        """The metric of ``stats`` (seeds, n, k) for each seed: on the plain means, or for each row of ``weights``
        (resamples, n; rows summing to 1) as (resamples, seeds)."""
        means = stats.mean(axis=1) if weights is None else np.moveaxis(weights @ stats, 0, 1)   # BLAS: (r, s, k)
        return self.value(means, classes)

    def terms(self, stats: np.ndarray, classes: int = 2) -> np.ndarray:
        """Each seed's metric plus each sentence's share of it (seeds, n): the value plus the gradient of
        :attr:`value` at the means (central differences) times the sentence's statistics less the means. For
        accuracy this is the right-or-wrong array itself; its mean over the sentences is the seed's metric."""
        if self.linear:
            return self.value(stats, classes)
        means = stats.mean(axis=1)                                               # (seeds, k)
        step = 1e-6
        k = means.shape[-1]
        offsets = np.eye(k) * step
        gradient = np.stack([(self.value(means + offsets[j], classes) - self.value(means - offsets[j], classes))
                             / (2 * step) for j in range(k)], axis=-1)           # (seeds, k)
        influence = np.einsum("sk,snk->sn", gradient, stats - means[:, None, :])
        return self.value(means, classes)[:, None] + influence

    def score(self, outputs: np.ndarray, gold: np.ndarray, classes: int = 2) -> float:
        """The metric of one model's ``outputs`` against ``gold``."""
        return float(self.values(self.statistics(outputs, gold, classes)[None], classes=classes)[0])


def _correct(outputs: np.ndarray, gold: np.ndarray, classes: int) -> np.ndarray:
    return (outputs == gold).astype(np.float64)[:, None]


def _accuracy(means: np.ndarray, classes: int) -> np.ndarray:
    return means[..., 0]


def _cells(outputs: np.ndarray, gold: np.ndarray, classes: int) -> np.ndarray:
    """The confusion matrix's cell of each sentence, one-hot (n, classes^2; cell gold * classes + predicted)."""
    cells = np.zeros((len(gold), classes * classes))
    cells[np.arange(len(gold)), gold.astype(np.int64) * classes + outputs.astype(np.int64)] = 1.0
    return cells


def _confusion(means: np.ndarray, classes: int) -> np.ndarray:
    return means.reshape(*means.shape[:-1], classes, classes)                    # [..., gold, predicted]


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator``, 0 where the denominator is 0 (scikit-learn's ``zero_division=0``)."""
    return np.divide(numerator, denominator, out=np.zeros(np.broadcast(numerator, denominator).shape),
                     where=denominator > 0)


def _per_class_f1(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each class's F1 and whether the class occurs (in gold or predicted), from a confusion matrix [..., g, p]."""
    hits = np.diagonal(confusion, axis1=-2, axis2=-1)
    gold, predicted = confusion.sum(axis=-1), confusion.sum(axis=-2)
    return _divide(2 * hits, gold + predicted), (gold + predicted) > 0


def _macro_f1(means: np.ndarray, classes: int) -> np.ndarray:
    """The mean F1 over the classes that occur in gold or predicted (scikit-learn's ``average="macro"``)."""
    f1, present = _per_class_f1(_confusion(means, classes))
    return _divide((f1 * present).sum(axis=-1), present.sum(axis=-1))


def _positive_f1(means: np.ndarray, classes: int) -> np.ndarray:
    """F1 of class 1 (the positive class of a two-class task, as MRPC and QQP are scored)."""
    return _per_class_f1(_confusion(means, classes))[0][..., 1]


def _matthews(means: np.ndarray, classes: int) -> np.ndarray:
    """Matthews correlation of a confusion matrix, for any number of classes (Gorodkin's R_K, as scikit-learn)."""
    confusion = _confusion(means, classes)
    total = confusion.sum(axis=(-2, -1))
    hits = np.trace(confusion, axis1=-2, axis2=-1)
    gold, predicted = confusion.sum(axis=-1), confusion.sum(axis=-2)
    covariance = hits * total - (gold * predicted).sum(axis=-1)
    spread = np.sqrt(np.maximum(total**2 - (predicted**2).sum(axis=-1), 0)
                     * np.maximum(total**2 - (gold**2).sum(axis=-1), 0))
    return _divide(covariance, spread)


def _moments(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x, y = x.astype(np.float64), y.astype(np.float64)
    return np.stack([x, y, x * x, y * y, x * y], axis=1)


def _values_and_gold(outputs: np.ndarray, gold: np.ndarray, classes: int) -> np.ndarray:
    return _moments(outputs, gold)


def _ranks_and_gold(outputs: np.ndarray, gold: np.ndarray, classes: int) -> np.ndarray:
    from scipy.stats import rankdata

    return _moments(rankdata(outputs), rankdata(gold))


def _pearson(means: np.ndarray, classes: int) -> np.ndarray:
    x, y, xx, yy, xy = np.moveaxis(means, -1, 0)
    return _divide(xy - x * y, np.sqrt(np.maximum(xx - x * x, 0) * np.maximum(yy - y * y, 0)))


METRICS: dict[str, TaskMetric] = {m.name: m for m in (
    TaskMetric("accuracy", "accuracy", False, _correct, _accuracy, linear=True),
    TaskMetric("macro_f1", "macro-F1", False, _cells, _macro_f1),
    TaskMetric("f1", "F1", False, _cells, _positive_f1, two_classes=True),
    TaskMetric("mcc", "Matthews", False, _cells, _matthews),
    TaskMetric("pearson", "Pearson", True, _values_and_gold, _pearson),
    TaskMetric("spearman", "Spearman", True, _ranks_and_gold, _pearson),
)}
ACCURACY = METRICS["accuracy"]


def default_metric(regression: bool) -> TaskMetric:
    """Accuracy for a classification task (what every report said before metrics could be chosen), Pearson for a
    regression (STS-B's first number)."""
    return METRICS["pearson"] if regression else ACCURACY


def also_reported(metric: TaskMetric, regression: bool, classes: int) -> tuple[TaskMetric, ...]:
    """The metrics a report shows beside the chosen one, as the papers print the task: accuracy, F1 and Matthews
    correlation for a two-class task (which disagree where one class is rare), Pearson and Spearman for a
    regression."""
    if regression:
        names = ("pearson", "spearman")
    elif classes == 2:
        names = ("accuracy", "f1", "mcc")
    else:
        names = ("accuracy",)
    return tuple(METRICS[name] for name in names if name != metric.name)


def resolve_metric(name: str | None, *, regression: bool, classes: int) -> TaskMetric:
    """The metric ``--metric`` names (the task's default when ``None``), checked against the task.

    Raises:
        CompressError: an unknown name, or a metric that does not fit the task (one sentence).
    """
    if name is None:
        return default_metric(regression)
    metric = METRICS.get(name)
    if metric is None:
        raise CompressError(f"unknown metric '{name}'; choose one of {', '.join(METRICS)}.")
    kind = "a regression" if regression else "a classification"
    if metric.regression != regression:
        fits = ", ".join(m.name for m in METRICS.values() if m.regression == regression)
        raise CompressError(f"--metric {name} does not score {kind} task; for this task choose one of {fits}.")
    if metric.two_classes and classes != 2:
        raise CompressError(f"--metric {name} scores the positive class of a two-class task and this task has "
                            f"{classes} classes; choose macro_f1, mcc or accuracy.")
    return metric
