"""What a comparison may claim: which models are on the Pareto front, and which differences are real.

A comparison of schema 3 has intervals: each model's accuracy and retention (95%, over the test sentences and
the seeds), the paired difference of every two models' accuracies, and each model's batch-1 latency in every
round of each pass of timing. There a difference is claimed only beyond its interval: model A is *faster* than B
when B took more than 5% longer than A in every pass (each pass loads every model afresh: the lowest pass's ratio
of medians is above 1.05; a record timed before passes: in at least three rounds out of four, B took longer than
A); A is *more accurate* when A's accuracy minus B's is above 0 and "no difference" is rejected
among all of the comparison's pairwise differences at a family-wise 5% by Holm's step-down correction (each
difference's p-value is the one its interval implies: the smallest 1 - level at which it leaves out 0). A
comparison recorded before p-values were keeps the uncorrected rule: the whole 95% interval above 0. The front
keeps a model unless another is both, and a "keeps >= 97%" claim needs the retention interval's lower end at or
above 97%.

An older comparison (one seed, no intervals) keeps the rule it was written with: accuracy differences within
one standard error of the teacher's accuracy are ties, and the faster model wins them.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from compress.reports.comparison_data import ShownComparison, ShownInterval, ShownModel
from compress.stats import holm, pass_speedup, ratio_quartiles

RETENTION_TARGET = 0.97   # "keeps >= 97% of the teacher's accuracy": the bar the reference numbers use


def pareto_front(points: list[tuple[float, float]], tie: float = 0.0) -> list[int]:
    """Indices (ascending) of the ``(latency, accuracy)`` points on the front: lower latency and higher
    accuracy are better.

    Walking from the fastest point to the slowest, a point joins the front when it is more accurate
    than every faster point on the front by more than ``tie``: an accuracy difference inside ``tie``
    (the test split's standard error) is a tie, and at a tie the faster model wins. With ``tie`` 0
    this is the usual front (no other point at least as fast and as accurate, better on one); exact
    duplicates are all kept. NaN points are never on the front.
    """
    valid = [i for i, (x, y) in enumerate(points) if not (math.isnan(x) or math.isnan(y))]
    front: list[int] = []
    for i in sorted(valid, key=lambda i: (points[i][0], -points[i][1])):
        if not front or points[i][1] > points[front[-1]][1] + tie or points[i] == points[front[-1]]:
            front.append(i)
    return sorted(front)


FASTER_MARGIN = 0.05   # "faster" needs more than this in every pass: what timing alone and in rounds may differ by


@dataclass(frozen=True)
class SpeedRatio:
    """How many times faster one model is than another: the median of the per-round ratios and their quartiles,
    or, timed in passes, the median of the passes' ratios and the lowest and highest of them."""

    median: float
    q1: float
    q3: float
    passes: tuple[float, ...] = ()   # each pass's ratio (none: one process's rounds, recorded before passes)

    @property
    def beyond(self) -> bool:
        """Faster by more than :data:`FASTER_MARGIN` in every pass; recorded before passes, in at least three
        rounds of four."""
        return min(self.passes) > 1 + FASTER_MARGIN if len(self.passes) > 1 else self.q1 > 1

    def text(self) -> str:
        if len(self.passes) > 1:
            return f"{self.median:.2f}× (passes {min(self.passes):.2f}–{max(self.passes):.2f}×)"
        return f"{self.median:.2f}× (IQR {self.q1:.2f}–{self.q3:.2f}×)"


def speed_ratio(fast: ShownModel, slow: ShownModel) -> SpeedRatio | None:
    """``slow``'s latency over ``fast``'s, round by round and pass by pass (None without rounds timed together)."""
    if not fast.latency_rounds or [len(p) for p in fast.latency_passes] != [len(p) for p in slow.latency_passes]:
        return None
    median, q1, q3 = ratio_quartiles(list(slow.latency_rounds), list(fast.latency_rounds))
    if len(fast.latency_passes) < 2:
        return SpeedRatio(median, q1, q3)
    speedup, passes = pass_speedup(slow.latency_passes, fast.latency_passes)
    return SpeedRatio(speedup, q1, q3, tuple(passes))


def points_text(interval: ShownInterval) -> str:
    """A difference of accuracies in points with its interval: ``+0.4 points (interval −0.8 to +1.6)``."""
    def signed(x: float) -> str:
        points = round(100 * x, 1)
        return "0.0" if points == 0 else f"{points:+.1f}".replace("-", "−")
    return f"{signed(interval.estimate)} points (interval {signed(interval.low)} to {signed(interval.high)})"


def percent_range(interval: ShownInterval) -> str:
    return f"{100 * interval.low:.1f}–{100 * interval.high:.1f}%"


def _latency(model: ShownModel) -> float:
    """The latency a front is ordered by: the median of the rounds the speed-ups come from, where timed."""
    return statistics.median(model.latency_rounds) if model.latency_rounds else model.latency_ms_p50  # type: ignore


def front_names(comparison: ShownComparison) -> list[str]:
    """The models on the accuracy / latency Pareto front, fastest first: by the intervals where the comparison
    has them, else by the standard-error tie rule."""
    return _front_of(comparison, corrected(comparison) if comparison.has_intervals else None)


def _front_of(comparison: ShownComparison, differing: set[frozenset[str]] | None) -> list[str]:
    """:func:`front_names`, given the pairs that differ after the correction (:func:`corrected`)."""
    models = [(name, m) for name, m in comparison.models() if m.latency_ms_p50 is not None and m.accuracy is not None]
    if comparison.has_intervals:
        front = [(name, m) for name, m in models if _beaten_by(comparison, name, differing) is None]
    else:
        tie = comparison.context.accuracy_standard_error or 0.0
        front = [models[i] for i in pareto_front([(m.latency_ms_p50, m.accuracy) for _, m in models], tie)]
    return [name for name, _ in sorted(front, key=lambda item: (_latency(item[1]), -(item[1].accuracy or 0)))]


def _has_p_values(comparison: ShownComparison) -> bool:
    return bool(comparison.differences) and all(d.p is not None for d in comparison.differences.values())


def corrected(comparison: ShownComparison) -> set[frozenset[str]] | None:
    """The pairs whose accuracies differ after Holm's correction over every recorded difference, or None when the
    comparison recorded no p-values (then a difference counts when its 95% interval leaves out 0)."""
    if not _has_p_values(comparison):
        return None
    p_values = {pair: d.p for pair, d in comparison.differences.items()}
    return {frozenset(pair) for pair in holm(p_values)}  # type: ignore[arg-type]


def more_accurate(comparison: ShownComparison, a: str, b: str,
                  differing: set[frozenset[str]] | None) -> ShownInterval | None:
    """``a``'s accuracy minus ``b``'s when ``a`` is more accurate beyond the intervals (after the correction where
    ``differing`` holds it: :func:`corrected`), else None."""
    difference = comparison.difference(a, b)
    if difference is None or not difference.low > 0:
        return None
    return difference if differing is None or frozenset((a, b)) in differing else None


def _beaten_by(comparison: ShownComparison, name: str,
               differing: set[frozenset[str]] | None) -> tuple[str, SpeedRatio, ShownInterval] | None:
    """A model faster and more accurate than ``name`` beyond the intervals (the fastest such), or None."""
    models = dict(comparison.models())
    found = []
    for other, model in models.items():
        ratio = speed_ratio(model, models[name])
        if other != name and ratio is not None and ratio.beyond and \
                (difference := more_accurate(comparison, other, name, differing)) is not None:
            found.append((ratio.median, other, ratio, difference))
    return max(found)[1:] if found else None


Retained = tuple[tuple[str, str], ...]   # (model, its retention interval as text), in the comparison's order
PAIR_HEADERS = ("neighbours on the front", "faster by", "told apart in speed", "accuracy, slower − faster",
                "told apart in accuracy")


@dataclass(frozen=True)
class FrontPair:
    """Two neighbours on the front, the faster first: how much faster, and the slower's accuracy minus the faster's,
    each with whether the intervals tell them apart ("yes", "no", or "yes: X is more accurate", "no: X is faster by
    ..." where the passes order them against the medians, "no, after the correction")."""

    faster: str
    slower: str
    speed: str
    speed_told: str
    accuracy: str
    accuracy_told: str


@dataclass(frozen=True)
class Verdict:
    """What a comparison with intervals may claim, as a short list and a table: the models that keep the bar
    beyond their interval, those the interval cannot tell from it, those below it; the front (and why each model
    off it is off); each two neighbours on the front; and ``scope``, what the intervals count."""

    scope: str
    keep: Retained
    unsure: Retained
    below: Retained
    front: tuple[str, ...]
    off_front: tuple[str, ...]
    pairs: tuple[FrontPair, ...]

    def items(self) -> list[tuple[str, str]]:
        """The list: (what, which models), one entry per claim that has models."""
        target = f"{100 * RETENTION_TARGET:.0f}%"

        def shown(models: Retained) -> tuple[str, ...]:
            return tuple(f"{name} ({interval})" for name, interval in models)

        entries = [(f"Keep at least {target} of the teacher (the whole retention interval at or above it)",
                    shown(self.keep)),
                   (f"Cannot be told from {target} (the interval holds it)", shown(self.unsure)),
                   (f"Below {target} beyond the interval", shown(self.below)),
                   ("On the front (no other model both faster and more accurate beyond the intervals), fastest "
                    "first", tuple(map(called, self.front))),
                   ("Off the front", self.off_front)]
        return [(what, ", ".join(models)) for what, models in entries if models]

    def pair_rows(self) -> list[list[str]]:
        """The table of neighbouring pairs: ``faster → slower``, the speed-up with its passes, the slower's accuracy
        minus the faster's with its interval, and whether each is told apart."""
        return [[f"{called(p.faster)} → {called(p.slower)}", p.speed, p.speed_told, p.accuracy, p.accuracy_told]
                for p in self.pairs]


def verdict(comparison: ShownComparison) -> Verdict | None:
    """What the intervals of a comparison support (see the module docstring); None for one without intervals."""
    if not comparison.has_intervals:
        return None
    keep, unsure, below = _retention(comparison)
    front, off_front, pairs = _front(comparison)
    return Verdict(_scope(comparison), keep, unsure, below, front, off_front, pairs)


def chosen(comparison: ShownComparison) -> str | None:
    """The model a comparison answers with: the fastest on the front whose whole retention interval keeps the bar;
    None when none does (or the comparison has no intervals)."""
    found = verdict(comparison)
    if found is None:
        return None
    return next((name for name in found.front if name != "teacher" and name in dict(found.keep)), None)


def _scope(comparison: ShownComparison) -> str:
    seeds, test = comparison.context.seeds, comparison.dataset.test_size
    sentences = f"{test:,} test sentences" if test else "the test sentences"
    if len(seeds) > 1:
        counted = (f"{len(seeds)} training seeds ({', '.join(map(str, seeds))}) and {sentences}: each interval is a "
                   "95% interval over both")
    else:
        counted = (f"one training seed and {sentences}: each interval counts the test sentences only, and another "
                   "seed moves a student's accuracy too (compare with --seeds 3 to count it)")
    context = comparison.context
    rounds = (f"; speed-ups are from {context.passes} passes of {context.rounds} rounds (each pass loading every "
              f"model afresh), with the lowest and highest pass's, and a model is called faster only when it is "
              f"more than {FASTER_MARGIN:.0%} faster in every pass" if context.passes and context.passes > 1 else
              f"; speed-ups are medians of {context.rounds} rounds with their interquartile range"
              if context.rounds else "")
    pairs = len(comparison.differences)
    family = (f" {pairs} pairwise accuracy differences were compared: one is claimed only where it holds after "
              f"Holm's correction for all {pairs} (a family-wise 5%)" if _has_p_values(comparison) else
              f" {pairs} pairwise accuracy differences were compared, each at 95% and uncorrected for their number "
              "(recorded before p-values were)")
    return f"Measured with {counted}{rounds}.{family}."


def _retention(comparison: ShownComparison) -> tuple[Retained, Retained, Retained]:
    """The models whose retention interval lies at or above the bar, across it, and below it."""
    kept: list[tuple[str, str]] = []
    unsure: list[tuple[str, str]] = []
    below: list[tuple[str, str]] = []
    for m in comparison.methods:
        interval = m.retention_interval
        if interval is None:
            continue
        entry = (m.method, percent_range(interval))
        (kept if interval.low >= RETENTION_TARGET else below if interval.high < RETENTION_TARGET else unsure).append(
            entry)
    return tuple(kept), tuple(unsure), tuple(below)


def called(name: str) -> str:
    """How a verdict names a model: the teacher as such."""
    return "the teacher" if name == "teacher" else name


def _front(comparison: ShownComparison) -> tuple[tuple[str, ...], tuple[str, ...], tuple[FrontPair, ...]]:
    """The front (fastest first), why each model off it is off, and each two neighbours on it."""
    differing = corrected(comparison)
    front = _front_of(comparison, differing)
    models = dict(comparison.models())
    off = []
    for name in models:
        beaten = _beaten_by(comparison, name, differing) if name not in front else None
        if beaten is not None:
            other, ratio, difference = beaten
            off.append(f"{called(name)} ({called(other)} is faster by {ratio.text()} and more accurate by "
                       f"{points_text(difference)})")
    pairs = []
    for fast, slow in itertools.pairwise(front):
        ratio, difference = speed_ratio(models[fast], models[slow]), comparison.difference(slow, fast)
        if ratio is None or difference is None:
            continue
        reverse = speed_ratio(models[slow], models[fast])
        # the medians order them one way, the passes (or rounds) may order them the other
        told = "yes" if ratio.beyond else f"no: {called(slow)} is faster by {reverse.text()}" \
            if reverse is not None and reverse.beyond else "no"
        if more_accurate(comparison, slow, fast, differing) is not None:
            accurate = f"yes: {called(slow)} is more accurate"
        elif more_accurate(comparison, fast, slow, differing) is not None:
            accurate = f"yes: {called(fast)} is more accurate"
        else:
            accurate = "no, after the correction" if differing is not None and \
                not difference.low <= 0 <= difference.high else "no"
        pairs.append(FrontPair(fast, slow, ratio.text(), told, points_text(difference), accurate))
    return tuple(front), tuple(off), tuple(pairs)
