"""The screening rule: whether a candidate trained on one seed can still meet the bar, judged on the held-out sentences.

The search selects on sentences no model it judges was trained on or picked an epoch on: training examples its task
holds out (``--select-on held-out``, the default), or dev where it holds none out. A candidate is *kept* when its
held-out retention cannot be told below the bar: the upper end of its paired interval (the candidate and the teacher
on the same held-out sentences, :mod:`compress.stats`) reaches ``min_retention``. It *missed the bar* when that upper
end lies below it: then it, every pipeline that extends it and every candidate that compresses at least as much are
ruled out (:mod:`.walk`). One seed on about a thousand sentences is one draw with an interval of a few points; the
screen drops only what that draw shows is below the bar, and the finals (:mod:`.finals`) decide with every seed.

While a candidate trains, each stage stops once its dev score cannot come near the bar (:meth:`Selection.stop_below`):
dev is what a stage evaluates every epoch, and the held-out sentences stay unseen until the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from compress.data.splits import SELECT
from compress.distill.teacher_logits import teacher_logits
from compress.errors import CompressError
from compress.predictions import Predictions, load_predictions
from compress.quantize.predictors import predict_batches
from compress.reports.records import RunRecord
from compress.runs.compare import run_predictor
from compress.runs.paired import method_evidence, method_intervals, teacher_interval
from compress.search.clock import Clock
from compress.task_metrics import TaskMetric
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer


@dataclass(frozen=True)
class Screen:
    """A trained step's held-out retention with its paired interval, against the bar."""

    score: float          # in the search's metric
    retention: float
    low: float
    high: float

    def below(self, min_retention: float) -> bool:
        return self.high < min_retention


class Selection:
    """The sentences a search selects on, the fine-tuned teacher's answers there (and on dev), and a run's retention
    of the teacher's score on them with its paired interval."""

    def __init__(self, task: Any, metric: TaskMetric, clock: Clock, threads: int, show_progress: bool) -> None:
        # Training examples the task holds out (nothing trains or picks an epoch on them), or dev where it holds
        # none out.
        self.split = SELECT if SELECT in task.splits else "dev"
        self.task, self.metric, self.clock, self.threads, self.show_progress = task, metric, clock, threads, \
            show_progress

    def prepare(self, config: Any) -> None:
        """The fine-tuned teacher (cached) and its predictions on the held-out sentences and on dev (cached)."""
        with self.clock.on("teacher"):
            self.finetuned = finetune_teacher(config.teacher, self.task, config.teacher_finetune,
                                              device=config.device, show_progress=self.show_progress,
                                              metric=config.metric)   # as its runs' teacher picks
            self.data = tokenized_for(self.finetuned, self.task)
            self.vocab = load_tokenizer(str(self.finetuned.directory)).get_vocab()
            model = self.finetuned.load().model
            fingerprint = self.finetuned.record["fingerprint"]
            teacher = {split: Predictions.of(teacher_logits(model, self.data, split, fingerprint, torch.device("cpu"),
                                                            show_progress=False), self.data.splits[split]["labels"])
                       for split in {self.split, "dev"}}
        self.teacher, self.teacher_dev = teacher[self.split], teacher["dev"]

    def teacher_score(self) -> dict[str, float]:
        """The teacher's score on the held-out sentences, in the metric, with its interval."""
        return teacher_interval(self.teacher, self.metric)

    def stop_below(self, min_retention: float) -> float | None:
        """The dev score below which a stage stops (what a stage evaluates each epoch, in the metric): the bar's share
        of the teacher's dev score less the interval's reach, what a candidate's interval could still carry to the bar
        (the teacher's own half-width, wider than a paired one); None where no score falls below it."""
        dev = teacher_interval(self.teacher_dev, self.metric)
        stop_below = min_retention * dev["estimate"] - (dev["high"] - dev["low"]) / 2
        return stop_below if stop_below > 0 else None

    def predictions(self, run_dir: Path, record: RunRecord) -> Predictions:
        """The run's predictions on the held-out sentences: kept by the run, or (a run made before runs kept them)
        made now."""
        kept = record.select_predictions if self.split == SELECT else record.dev_predictions
        if kept is not None:
            return load_predictions(run_dir, kept, self.split)
        with self.clock.on("evaluation and timing"):
            predictor = run_predictor(record, run_dir, self.threads, self.vocab)
            size = 1 if record.quantized else 128   # quantized models are scored a sentence at a time, as runs do
            return Predictions.of(*predict_batches(predictor, self.data.dataloader(self.split, batch_size=size)))

    def screen(self, run_dir: Path, record: RunRecord) -> Screen:
        """The run's score on the held-out sentences and its retention of the teacher's, with the paired interval."""
        predictions = self.predictions(run_dir, record)
        if not np.array_equal(predictions.labels, self.teacher.labels):
            raise CompressError(f"the {self.split} predictions of {run_dir} are not of the teacher's sentences; run "
                                "it again.")
        runs = method_evidence(str(run_dir), [predictions], self.teacher, self.metric)
        score, retention = method_intervals(runs, self.teacher)
        return Screen(score["estimate"], retention["estimate"], retention["low"], retention["high"])

    def retention_over_seeds(self, name: str, runs: list[tuple[Path, RunRecord]]) -> dict[str, float]:
        """The held-out retention of ``name``'s runs (one a seed) with its interval over seeds and sentences."""
        rows = method_evidence(name, [self.predictions(run_dir, record) for run_dir, record in runs], self.teacher,
                               self.metric)
        return method_intervals(rows, self.teacher)[1]
