"""Confidence intervals for accuracy, for the difference of two models' accuracies, and for retention.

A test accuracy is one draw: another test split, or another training seed, gives another number. The intervals
here count both sources of noise with one percentile bootstrap (Efron & Tibshirani 1993, ch. 13). Correctness is
given as a 0/1 array of shape ``(n,)`` (one model, one seed) or ``(seeds, n)`` (one row per training seed, the
same ``n`` test examples in every row). Each bootstrap resample draws ``n`` test examples with replacement and,
when there are several seeds, as many seeds with replacement (a two-level bootstrap: seeds and examples together),
and computes the statistic on the draw:

- accuracy: the mean over the drawn seeds and examples;
- difference ``a - b`` and retention ``a / b``: both models on the *same* drawn examples (and, where both have
  seeds, the same drawn seed positions), so what the two models share (an easy sentence both get right) cancels:
  the paired interval, narrower than comparing two independent intervals when their errors are correlated.

The analytic references the tests hold the bootstrap against are here too: Wilson's score interval for one
proportion (Wilson 1927) and the normal interval of a paired difference of proportions, whose variance is
``(b + c) / n**2 - (b - c)**2 / n**3`` with ``b`` and ``c`` the discordant counts (the quantity McNemar's test
reads; Agresti, *Categorical Data Analysis*, 10.1).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

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


def _rows(correct: np.ndarray) -> np.ndarray:
    """``correct`` as a float array of shape (seeds, n), checked."""
    rows = np.asarray(correct, dtype=np.float64)
    rows = rows[None, :] if rows.ndim == 1 else rows
    if rows.ndim != 2 or rows.shape[1] == 0 or rows.shape[0] == 0:
        raise ValueError(f"correctness must have shape (n,) or (seeds, n) with n > 0, got {np.shape(correct)}")
    return rows


@dataclass(frozen=True)
class _Resamples:
    """The bootstrap's draws, shared by every model scored on the same test examples: how many times each resample
    draws each example (resamples x n), and which seed positions it draws (resamples x seeds)."""

    counts: np.ndarray
    seeds: np.ndarray

    def draws(self, rows: np.ndarray) -> np.ndarray:
        """The mean correctness of ``rows`` on each resample: over the drawn examples, then over the drawn seeds
        (or the one row of a model with one seed)."""
        per_seed = rows @ self.counts.T / rows.shape[1]                 # (seeds, resamples)
        if rows.shape[0] == 1:
            return per_seed[0]
        return np.take_along_axis(per_seed.T, self.seeds[:, :rows.shape[0]], axis=1).mean(axis=1)


def _interval(estimate: float, draws: np.ndarray, level: float) -> Interval:
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), level)


def _resamples(n: int, seeds: int, resamples: int, seed: int) -> _Resamples:
    rng = np.random.default_rng(seed)
    examples = rng.integers(0, n, (resamples, n))
    counts = np.stack([np.bincount(drawn, minlength=n) for drawn in examples]).astype(np.float64)
    return _Resamples(counts, rng.integers(0, seeds, (resamples, seeds)))


def accuracy_interval(correct: np.ndarray, *, resamples: int = RESAMPLES, level: float = LEVEL,
                      seed: int = 0) -> Interval:
    """Accuracy (the mean of ``correct``) with its bootstrap interval over test examples and, for a (seeds, n)
    array, over seeds too."""
    rows = _rows(correct)
    return _interval(float(rows.mean()), _resamples(rows.shape[1], rows.shape[0], resamples, seed).draws(rows), level)


def _checked_pair(a_rows: np.ndarray, b_rows: np.ndarray) -> None:
    if a_rows.shape[1] != b_rows.shape[1]:
        raise ValueError(f"paired intervals need the same test examples, got {a_rows.shape[1]} and {b_rows.shape[1]}")
    if a_rows.shape[0] != b_rows.shape[0] and 1 not in (a_rows.shape[0], b_rows.shape[0]):
        # A drawn seed position means one seed of each; with 2 seeds against 3 some would be drawn more often.
        raise ValueError(f"paired intervals need the same seeds or one run, got {a_rows.shape[0]} and "
                         f"{b_rows.shape[0]}")


def _paired(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                            np.ndarray]:
    """Both models' rows and their means on the same resampled examples (and seed positions)."""
    a_rows, b_rows = _rows(a), _rows(b)
    _checked_pair(a_rows, b_rows)
    drawn = _resamples(a_rows.shape[1], max(a_rows.shape[0], b_rows.shape[0]), resamples, seed)
    return a_rows, b_rows, drawn.draws(a_rows), drawn.draws(b_rows)


def difference_interval(a: np.ndarray, b: np.ndarray, *, resamples: int = RESAMPLES, level: float = LEVEL,
                        seed: int = 0) -> Interval:
    """Accuracy of ``a`` minus accuracy of ``b`` on the same test examples, with its paired bootstrap interval."""
    a_rows, b_rows, a_draws, b_draws = _paired(a, b, resamples, seed)
    return _interval(float(a_rows.mean() - b_rows.mean()), a_draws - b_draws, level)


def difference_intervals(correct: dict[str, np.ndarray], *, resamples: int = RESAMPLES, level: float = LEVEL,
                         seed: int = 0) -> dict[tuple[str, str], Interval]:
    """:func:`difference_interval` of every two models of ``correct`` (``a`` before ``b`` in its order), each model's
    resample means computed once: the same intervals as pair by pair, in a fraction of the time."""
    rows = {name: _rows(c) for name, c in correct.items()}
    for a, b in itertools.combinations(rows.values(), 2):
        _checked_pair(a, b)
    if not rows:
        return {}
    first = next(iter(rows.values()))
    drawn = _resamples(first.shape[1], max(r.shape[0] for r in rows.values()), resamples, seed)
    draws = {name: drawn.draws(r) for name, r in rows.items()}
    return {(a, b): _interval(float(rows[a].mean() - rows[b].mean()), draws[a] - draws[b], level)
            for a, b in itertools.combinations(rows, 2)}


def retention_interval(student: np.ndarray, teacher: np.ndarray, *, resamples: int = RESAMPLES,
                       level: float = LEVEL, seed: int = 0) -> Interval:
    """The student's accuracy as a fraction of the teacher's on the same test examples, with its paired bootstrap
    interval (the student may have several seeds; the teacher is usually one model)."""
    s_rows, t_rows, s_draws, t_draws = _paired(student, teacher, resamples, seed)
    if not t_rows.mean() > 0:
        raise ValueError("retention needs a teacher with some correct answers")
    return _interval(float(s_rows.mean() / t_rows.mean()), s_draws / np.maximum(t_draws, 1e-12), level)


def _z(level: float) -> float:
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


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


def ratio_quartiles(numerators: list[float], denominators: list[float]) -> tuple[float, float, float]:
    """``(median, q1, q3)`` of the per-round ratios ``n_r / d_r`` of two models timed in the same rounds: a
    speed-up and its interquartile range (how much the machine moved it from round to round)."""
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True) if d > 0]
    if not ratios:
        raise ValueError("no round was timed")
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    return float(median), float(q1), float(q3)
