"""A comparison's statistics from its runs' test predictions: every model scored on the same sentences.

Each method's correctness is a (seeds, examples) array, one row per seed it was trained with (one row for a
run that does not depend on the seed); the teacher's is one row. :mod:`compress.stats` turns these into the
intervals comparison.json keeps: each method's accuracy and retention, and the difference between every two
methods, all from one bootstrap over the test sentences with a t-based part for the seeds, paired.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from compress.errors import CompressError
from compress.predictions import Predictions
from compress.reports.records import Difference, IntervalRecord, IntervalSettings
from compress.stats import LEVEL, RESAMPLES, Interval, accuracy_interval, difference_tests, retention_interval

SETTINGS = IntervalSettings(
    level=LEVEL, resamples=RESAMPLES,
    method="percentile bootstrap over the test sentences (each resample draws as many sentences with replacement, "
           "every seed kept); with several seeds, each side widened by Student's t (seeds - 1 degrees of freedom) "
           "times the standard error over the seeds, the bootstrap's share of the seed-by-sentence interaction left "
           "out; retention and differences are paired: both models on the same drawn sentences, seed by seed")


def record(interval: Interval) -> IntervalRecord:
    return IntervalRecord(**asdict(interval))  # type: ignore[typeddict-item]


def correctness(name: str, runs: list[Predictions], teacher: Predictions) -> np.ndarray:
    """The (seeds, examples) right-or-wrong array of one method's runs. Which test sentences a run answered is
    part of its identity (the split's fingerprint); this checks what the files can tell: the same gold labels,
    in the same order, as the teacher's."""
    for predictions in runs:
        if not np.array_equal(predictions.labels, teacher.labels):
            raise CompressError(f"the test predictions of {name} are not of the teacher's test sentences in the "
                                "teacher's order; run it again.")
    return np.stack([predictions.correct for predictions in runs])


def teacher_interval(teacher: Predictions) -> IntervalRecord:
    return record(accuracy_interval(teacher.correct))


def method_intervals(rows: np.ndarray, teacher: Predictions) -> tuple[IntervalRecord, IntervalRecord]:
    """A method's accuracy and its retention of the teacher's accuracy, each with its interval."""
    return record(accuracy_interval(rows)), record(retention_interval(rows, teacher.correct))


def differences(rows: dict[str, np.ndarray]) -> list[Difference]:
    """The accuracy difference of every two models (the teacher among them; in the order given: ``a`` before
    ``b``), paired, with the p-value its intervals imply (the report corrects them for their number: Holm)."""
    return [Difference(a, b, record(interval), p=round(p, 6))
            for (a, b), (interval, p) in difference_tests(rows).items()]
