"""A comparison's statistics from its runs' test predictions: every model scored on the same sentences.

Each method's evidence is its test sentences' statistics of the comparison's metric (for accuracy: right or
wrong), one row per seed it was trained with (one row for a run that does not depend on the seed); the teacher's
is one row. :mod:`compress.stats` turns these into the intervals comparison.json keeps: each method's metric and
retention, and the difference between every two methods, all from one bootstrap over the test sentences with a
t-based part for the seeds, paired.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from compress.errors import CompressError
from compress.predictions import Predictions
from compress.reports.records import Difference, IntervalRecord, IntervalSettings
from compress.stats import LEVEL, RESAMPLES, Interval, Scored, difference_tests, metric_interval, retention_interval
from compress.task_metrics import ACCURACY, TaskMetric

SETTINGS = IntervalSettings(
    level=LEVEL, resamples=RESAMPLES,
    method="percentile bootstrap over the test sentences (each resample draws as many sentences with replacement, "
           "every seed kept); with several seeds, each side widened by Student's t (seeds - 1 degrees of freedom) "
           "times the standard error over the seeds, the bootstrap's share of the seed-by-sentence interaction left "
           "out; retention and differences are paired: both models on the same drawn sentences, seed by seed")


def record(interval: Interval) -> IntervalRecord:
    return IntervalRecord(**asdict(interval))  # type: ignore[typeddict-item]


def method_evidence(name: str, runs: list[Predictions], teacher: Predictions, metric: TaskMetric) -> Scored:
    """One method's runs as the evidence of ``metric``: each test sentence's statistics, seed by seed. Which test
    sentences a run answered is part of its identity (the split's fingerprint); this checks what the files can tell:
    the same gold labels, in the same order, as the teacher's."""
    for predictions in runs:
        if not np.array_equal(predictions.labels, teacher.labels):
            raise CompressError(f"the test predictions of {name} are not of the teacher's test sentences in the "
                                "teacher's order; run it again.")
    return Scored(np.stack([predictions.statistics(metric) for predictions in runs]), metric,
                  teacher.logits.shape[-1])


def teacher_evidence(teacher: Predictions, metric: TaskMetric) -> Scored:
    return method_evidence("the teacher", [teacher], teacher, metric)


def teacher_interval(teacher: Predictions, metric: TaskMetric = ACCURACY) -> IntervalRecord:
    return record(metric_interval(teacher_evidence(teacher, metric)))


def score_interval(runs: Scored) -> IntervalRecord:
    """A method's metric with its interval."""
    return record(metric_interval(runs))


def method_intervals(runs: Scored, teacher: Predictions) -> tuple[IntervalRecord, IntervalRecord]:
    """A method's metric and its retention of the teacher's, each with its interval."""
    return score_interval(runs), record(retention_interval(runs, teacher_evidence(teacher, runs.metric)))


def differences(scored: dict[str, Scored]) -> list[Difference]:
    """The metric's difference of every two models (the teacher among them; in the order given: ``a`` before
    ``b``), paired, with the p-value its intervals imply (the report corrects them for their number: Holm)."""
    return [Difference(a, b, record(interval), p=round(p, 6))
            for (a, b), (interval, p) in difference_tests(scored).items()]


def run_retentions(student: dict[str, Predictions], teacher: dict[str, Predictions],
                   metric: TaskMetric) -> dict[str, IntervalRecord]:
    """One run's retention on each split both models answered (test, dev), with its interval over that split's
    sentences, paired with the teacher on the same sentences; a split whose teacher scores 0 or less has none."""
    retentions = {}
    for split in (split for split in student if split in teacher):   # in the order ``student`` gives them
        evidence = teacher_evidence(teacher[split], metric)
        if evidence.value() > 0:
            runs = method_evidence(f"the run's {split} answers", [student[split]], teacher[split], metric)
            retentions[split] = record(retention_interval(runs, evidence))
    return retentions
