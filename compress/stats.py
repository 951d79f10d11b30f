"""Confidence intervals for a task's metric, for the difference of two models' metrics, and for retention.

A test accuracy is one draw: another test split, or another training seed, gives another number. Correctness is
given as a 0/1 array of shape ``(n,)`` (one model, one seed) or ``(seeds, n)`` (one row per training seed, the
same ``n`` test examples in every row); any other metric of :mod:`compress.task_metrics` as a :class:`Scored`, each
sentence's statistics seed by seed (a resample's metric is the metric of its weighted statistics, and a sentence's
share of it the metric's linearisation, which for accuracy is the right-or-wrong array). Each interval counts both
sources of noise:

- the test sentences, by a percentile bootstrap (Efron & Tibshirani 1993, ch. 13): each resample draws ``n``
  test examples with replacement and computes the statistic on them over every seed as it is;
- the seeds, where there are several, by a t-based component: the standard error of the statistic over the
  seeds (their standard deviation over sqrt(k)), times Student's t quantile with k - 1 degrees of freedom (4.30
  for 3 seeds: what a standard error from 3 draws is worth). Given the test sentences, the seeds are independent
  draws, so this holds the test set's own mean; the sentence part then adds how that mean moves with the
  sentences, less the seed-by-sentence interaction the seed part already counts (:func:`_interval`).

- accuracy: the mean over the seeds and the drawn examples;
- difference ``a - b`` and retention ``a / b``: both models on the *same* drawn examples, seed position by seed
  position (a pipeline's step trained from its parent's seed pairs with it), so what the two models share (an easy
  sentence both get right) cancels: the paired interval, narrower than comparing two independent intervals when
  their errors are correlated.

Why not draw the seeds in the bootstrap too, as this module did before: with 3 seeds a resample that draws one seed
three times has probability 1/27, so a percentile interval never reaches past the lowest and the highest seed and
shrinks the seed variance by 2/3. In the simulation of tests/test_stats.py (400 comparisons of 1,031 sentences and
3 seeds) it covered 0.85 to 0.88 at a per-seed spread of 2.5 points, where this one covers 0.95 to 0.97 (0.95 to
0.98 at 0.5 and 1.2 points; the test holds it between 0.93 and 0.99). With one seed it is the percentile bootstrap
alone.

The analytic references the tests hold the bootstrap against are here too: Wilson's score interval for one
proportion (Wilson 1927) and the normal interval of a paired difference of proportions, whose variance is
``(b + c) / n**2 - (b - c)**2 / n**3`` with ``b`` and ``c`` the discordant counts (the quantity McNemar's test
reads; Agresti, *Categorical Data Analysis*, 10.1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from compress.task_metrics import ACCURACY, TaskMetric

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate and its confidence interval ``[low, high]`` at ``level``."""

    estimate: float
    low: float
    high: float
    level: float = LEVEL

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def above(self, threshold: float) -> bool:
        """Whether the whole interval lies at or above ``threshold`` (a claim such as "keeps >= 97%")."""
        return self.low >= threshold


@dataclass(frozen=True)
class Scored:
    """One model's evidence on ``n`` test sentences for a metric: each sentence's statistics (:mod:`compress.task_metrics`),
    seed by seed, ``stats`` of shape (seeds, n, k). A plain 0/1 array of shape (n,) or (seeds, n) is the evidence of
    accuracy (:meth:`of`)."""

    stats: np.ndarray
    metric: TaskMetric = ACCURACY
    classes: int = 2

    @classmethod
    def of(cls, evidence: Scored | np.ndarray) -> Scored:
        """``evidence`` as it is, or a right-or-wrong array (n,) or (seeds, n) as accuracy's evidence, checked."""
        if isinstance(evidence, Scored):
            return evidence
        rows = np.asarray(evidence, dtype=np.float64)
        rows = rows[None, :] if rows.ndim == 1 else rows
        if rows.ndim != 2 or rows.shape[1] == 0 or rows.shape[0] == 0:
            raise ValueError(f"correctness must have shape (n,) or (seeds, n) with n > 0, got {np.shape(evidence)}")
        return cls(rows[:, :, None])

    @property
    def shape(self) -> tuple[int, int]:
        """(seeds, n)."""
        return self.stats.shape[0], self.stats.shape[1]

    def value(self) -> float:
        """The metric, averaged over the seeds."""
        return float(self.metric.values(self.stats, classes=self.classes).mean())

    def draws(self, drawn: _Resamples) -> np.ndarray:
        """The metric on each resample of the sentences, averaged over the seeds (resamples,)."""
        return self.metric.values(self.stats, drawn.weights, self.classes).mean(axis=1)

    def terms(self) -> np.ndarray:
        """Each seed's metric plus each sentence's share of it (seeds, n): for accuracy, the right-or-wrong array."""
        return self.metric.terms(self.stats, self.classes)


@dataclass(frozen=True)
class _Resamples:
    """The bootstrap's draws, shared by every model scored on the same test examples: how many times each resample
    draws each example, divided by ``n`` (resamples x n)."""

    weights: np.ndarray


def _interval(estimate: float, draws: np.ndarray, level: float, terms: np.ndarray) -> Interval:
    """The percentile interval of the sentence resamples ``draws``, with several seeds combined with the seeds' part.

    ``terms`` (seeds x n) is the statistic's share of each seed and sentence (its linearization: a model's correctness,
    a difference of two, or ``(a - r t) / mean(t)`` for a ratio ``r``). Given the test sentences the seeds are
    independent draws, so the mean over them is within Student's t (k - 1 degrees of freedom) times their standard
    error of the test set's own mean; the sentence part adds how that mean moves with the sentences, which leaves out
    the seed-by-sentence interaction the seed part already holds: each side of the bootstrap interval is shrunk by it,
    then combined with the seed margin as ``hypot``."""
    tail = (1 - level) / 2 * 100
    low, high = (float(x) for x in np.percentile(draws, [tail, 100 - tail]))
    seeds, n = terms.shape
    if seeds < 2:
        return Interval(estimate, low, high, level)
    sentences = terms.mean(axis=0).var(ddof=1) / n                     # what the bootstrap's width measures
    interaction = terms.var(axis=0, ddof=1).mean() / (n * seeds)       # its share that moves with the seeds
    shrink = math.sqrt(max(0.0, 1 - interaction / sentences)) if sentences > 0 else 0.0
    margin = _t(level, seeds - 1) * float(terms.mean(axis=1).std(ddof=1)) / math.sqrt(seeds)
    return Interval(estimate, estimate - math.hypot(shrink * (estimate - low), margin),
                    estimate + math.hypot(shrink * (high - estimate), margin), level)


def _resamples(n: int, resamples: int, seed: int) -> _Resamples:
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n, (resamples, n)) + n * np.arange(resamples)[:, None]
    counts = np.bincount(drawn.ravel(), minlength=resamples * n).reshape(resamples, n)
    return _Resamples(counts / n)


def metric_interval(evidence: Scored | np.ndarray, *, resamples: int = RESAMPLES, level: float = LEVEL,
                    seed: int = 0) -> Interval:
    """A model's metric (accuracy for a right-or-wrong array: its mean) with its interval over test examples and,
    for several seeds, over seeds too."""
    scored = Scored.of(evidence)
    drawn = _resamples(scored.shape[1], resamples, seed)
    return _interval(scored.value(), scored.draws(drawn), level, scored.terms())


accuracy_interval = metric_interval


def _checked_pair(a: Scored, b: Scored) -> None:
    (a_seeds, a_n), (b_seeds, b_n) = a.shape, b.shape
    if a_n != b_n:
        raise ValueError(f"paired intervals need the same test examples, got {a_n} and {b_n}")
    if a_seeds != b_seeds and 1 not in (a_seeds, b_seeds):
        # Seeds pair position by position; with 2 seeds against 3 some would have no partner.
        raise ValueError(f"paired intervals need the same seeds or one run, got {a_seeds} and {b_seeds}")
    if a.metric != b.metric:
        raise ValueError(f"paired intervals need one metric, got {a.metric.name} and {b.metric.name}")


def _difference_p(estimate: float, draws: np.ndarray, terms: np.ndarray) -> float:
    """The p-value of "no difference" that a difference's intervals imply (its estimate, resamples and terms, seed
    position by seed position: one run pairs with every seed): the smallest ``1 - level`` at which the interval leaves out 0 (found by bisection to 1e-4; 1 when none does, 1e-6 at
    the least)."""
    if estimate == 0:
        return 1.0

    def excludes_zero(alpha: float) -> bool:
        interval = _interval(estimate, draws, 1 - alpha, terms)
        return interval.low > 0 or interval.high < 0

    low, high = 1e-6, 1.0
    if excludes_zero(low):
        return low
    if not excludes_zero(high - 1e-9):
        return 1.0
    while high - low > 1e-4:
        middle = (low + high) / 2
        low, high = (low, middle) if excludes_zero(middle) else (middle, high)
    return high


def holm(p_values: dict[tuple[str, str], float], alpha: float = 1 - LEVEL) -> set[tuple[str, str]]:
    """The hypotheses Holm's step-down procedure rejects at family-wise error ``alpha`` (Holm 1979): sorted by
    p-value, the i-th smallest (from 0) of m is rejected while p <= alpha / (m - i); the first that is not stops it."""
    rejected: set[tuple[str, str]] = set()
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    for i, (key, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - i):
            break
        rejected.add(key)
    return rejected


def difference_interval(a: Scored | np.ndarray, b: Scored | np.ndarray, *, resamples: int = RESAMPLES, level: float = LEVEL,
                        seed: int = 0) -> Interval:
    """The metric of ``a`` minus that of ``b`` (accuracy for right-or-wrong arrays) on the same test examples, with
    its paired interval."""
    return difference_intervals({"a": a, "b": b}, resamples=resamples, level=level, seed=seed)[("a", "b")]


def difference_intervals(correct: dict[str, Scored | np.ndarray], *, resamples: int = RESAMPLES, level: float = LEVEL,
                         seed: int = 0) -> dict[tuple[str, str], Interval]:
    """:func:`difference_interval` of every two models of ``correct`` (``a`` before ``b`` in its order), on one
    set of resampled examples."""
    return {pair: interval for pair, (interval, _) in
            difference_tests(correct, resamples=resamples, level=level, seed=seed).items()}


def difference_tests(correct: dict[str, Scored | np.ndarray], *, resamples: int = RESAMPLES, level: float = LEVEL,
                     seed: int = 0) -> dict[tuple[str, str], tuple[Interval, float]]:
    """Every two models' difference with its interval (:func:`difference_intervals`) and the p-value of "no
    difference" the intervals imply (for :func:`holm`)."""
    scored = {name: Scored.of(c) for name, c in correct.items()}
    for a, b in itertools.combinations(scored.values(), 2):
        _checked_pair(a, b)
    if not scored:
        return {}
    drawn = _resamples(next(iter(scored.values())).shape[1], resamples, seed)
    parts = {name: (one.value(), one.draws(drawn), one.terms()) for name, one in scored.items()}   # once a model
    tests = {}
    for a, b in itertools.combinations(scored, 2):
        estimate, draws, terms = (x - y for x, y in zip(parts[a], parts[b], strict=True))
        tests[(a, b)] = (_interval(estimate, draws, level, terms), _difference_p(estimate, draws, terms))
    return tests


def retention_interval(student: Scored | np.ndarray, teacher: Scored | np.ndarray, *, resamples: int = RESAMPLES,
                       level: float = LEVEL, seed: int = 0) -> Interval:
    """The student's metric (accuracy for right-or-wrong arrays) as a fraction of the teacher's on the same test
    examples, with its paired interval (the student may have several seeds; the teacher is usually one model)."""
    s, t = Scored.of(student), Scored.of(teacher)
    _checked_pair(s, t)
    teacher_value = t.value()
    if not teacher_value > 0:
        raise ValueError(f"retention needs a teacher whose {t.metric.title} is above 0, got {teacher_value:.4f}")
    drawn = _resamples(s.shape[1], resamples, seed)
    ratio = s.value() / teacher_value
    return _interval(ratio, s.draws(drawn) / np.maximum(t.draws(drawn), 1e-12), level,
                     (s.terms() - ratio * t.terms()) / teacher_value)


def retention_resolution(n: int, teacher_accuracy: float, retention: float, disagreement: float,
                         level: float = LEVEL) -> float:
    """The half-width, as a fraction of the teacher's accuracy, of the paired interval :func:`retention_interval`
    gives a student whose retention is ``retention`` on ``n`` sentences, where it and the teacher differ in
    correctness on a share ``disagreement`` of them: how finely that evidence tells one retention from another, known
    before any student is trained. With p10 (only the student right), p01 (only the teacher), p11 (both) fixed by the
    three rates, each sentence adds s - r t to the retention's linearisation, whose variance is
    p10 + r^2 p01 + (1 - r)^2 p11; the half-width is z sqrt(variance / n) / teacher_accuracy."""
    gap = (retention - 1) * teacher_accuracy            # p10 - p01: the student's accuracy minus the teacher's
    if n < 1 or not 0 < teacher_accuracy <= 1 or not abs(gap) <= disagreement <= 1:
        raise ValueError(f"need n >= 1, a teacher accuracy in (0, 1] and a disagreement of at least the accuracy gap "
                         f"{abs(gap):.3f}; got n={n}, {teacher_accuracy}, {disagreement}")
    only_student, only_teacher = (disagreement + gap) / 2, (disagreement - gap) / 2
    both = retention * teacher_accuracy - only_student
    variance = only_student + retention**2 * only_teacher + (1 - retention) ** 2 * both
    return _z(level) * math.sqrt(variance / n) / teacher_accuracy


def _z(level: float) -> float:
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def _t(level: float, df: int) -> float:
    """Student's t quantile of a two-sided ``level`` with ``df`` degrees of freedom."""
    from scipy.special import stdtrit
    return float(stdtrit(df, 1 - (1 - level) / 2))


def wilson_interval(successes: int, n: int, level: float = LEVEL) -> Interval:
    """Wilson's score interval for a proportion: the analytic reference for one model's accuracy on one seed."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    z, p = _z(level), successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    spread = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return Interval(p, centre - spread, centre + spread, level)


def paired_difference_normal(a: np.ndarray, b: np.ndarray, level: float = LEVEL) -> Interval:
    """The normal interval of a paired difference of proportions (one seed each): var = (b + c)/n^2 - (b - c)^2/n^3,
    with b the examples only ``a`` gets right and c those only ``b`` gets right."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    n = a.size
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    difference = (only_a - only_b) / n
    spread = _z(level) * math.sqrt(max((only_a + only_b) / n**2 - (only_a - only_b) ** 2 / n**3, 0.0))
    return Interval(difference, difference - spread, difference + spread, level)


def pass_ratios(numerators: Sequence[Sequence[float]], denominators: Sequence[Sequence[float]]) -> list[float]:
    """Each pass's ratio of two models' median round latencies (``numerators``, ``denominators``: each pass's
    rounds): one draw of a speed-up per independent pass, whose range is its run-to-run spread."""
    return [float(np.median(n) / np.median(d)) for n, d in zip(numerators, denominators, strict=True) if n and d]


def pass_speedup(numerators: Sequence[Sequence[float]],
                 denominators: Sequence[Sequence[float]]) -> tuple[float, list[float]]:
    """A speed-up timed in passes: the median of the passes' speed-ups (:func:`pass_ratios`), which always lies in
    their range, and those speed-ups."""
    passes = pass_ratios(numerators, denominators)
    return float(np.median(passes)), passes


def median_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """The median of ``values`` and a distribution-free interval for it: the order statistics between which a
    binomial(n, 1/2) count of values below the true median falls with probability ``level`` (normal approximation,
    widened to the next order statistic; the whole range when there are too few values)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no value to take the median of")
    n = len(ordered)
    half = _z(level) * math.sqrt(n) / 2
    low, high = math.floor(n / 2 - half), math.ceil(n / 2 + half)   # 1-based: the low-th and (high + 1)-th values
    return Interval(float(np.median(ordered)), ordered[max(low - 1, 0)], ordered[min(high, n - 1)], level)


def ratio_quartiles(numerators: list[float], denominators: list[float]) -> tuple[float, float, float]:
    """``(median, q1, q3)`` of the per-round ratios ``n_r / d_r`` of two models timed in the same rounds: a
    speed-up and its interquartile range (how much the machine moved it from round to round)."""
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True) if d > 0]
    if not ratios:
        raise ValueError("no round was timed")
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    return float(median), float(q1), float(q3)
