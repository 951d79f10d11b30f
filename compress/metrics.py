"""The metrics of one evaluation: every task metric that fits the task (:mod:`compress.task_metrics`) and the mean loss.

A classification task gets accuracy, macro-F1, Matthews correlation, F1 of the positive class where it has two
classes, and the mean cross-entropy; a regression task (one output: a head of one unit) gets Pearson and Spearman
correlation and the mean squared error as its loss.

A leaf module: the training loop, the quantized predictors and the run records all read these, and
none of them should need the others to do so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from compress.task_metrics import METRICS


@dataclass
class Metrics:
    """The metrics of one evaluation (``None``: the metric does not fit the task)."""

    accuracy: float | None
    macro_f1: float | None
    loss: float                     # mean cross-entropy, or mean squared error for a regression
    examples: int
    f1: float | None = None         # of the positive class (label 1) of a two-class task
    mcc: float | None = None
    pearson: float | None = None
    spearman: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        """Every metric that scores the task; accuracy and macro-F1 always (None for a regression), so the dict
        makes the Metrics again."""
        return {k: v for k, v in asdict(self).items() if v is not None or k in ("accuracy", "macro_f1")}

    @property
    def primary(self) -> float:
        """The task's default metric (:func:`compress.task_metrics.default_metric`): accuracy, or a regression's
        Pearson correlation."""
        return self.pearson if self.accuracy is None else self.accuracy   # type: ignore[return-value]

    def present(self) -> dict[str, float]:
        """What this evaluation measured: the metrics that score the task, the loss and the examples."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def scores(self) -> dict[str, float]:
        """Every task metric of this evaluation, by name (not the loss)."""
        return {k: v for k, v in self.present().items() if k not in ("loss", "examples")}

    def score(self, metric: str) -> float:
        """The value of ``metric`` (a task metric's name)."""
        value = getattr(self, metric)
        if value is None:
            raise ValueError(f"{metric} does not score this task")
        return value


def is_regression(logits: torch.Tensor) -> bool:
    """Whether ``logits`` are a regression's outputs: a head of one unit."""
    return logits.shape[-1] == 1


def metrics_of(logits: torch.Tensor, labels: torch.Tensor) -> Metrics:
    """Every metric of ``logits`` against ``labels`` that fits the task (a one-unit head is a regression)."""
    gold = labels.numpy()
    if is_regression(logits):
        values = logits[:, 0].float().numpy()
        return Metrics(accuracy=None, macro_f1=None, examples=len(gold),
                       loss=float(nn.functional.mse_loss(logits[:, 0].float(), labels.float())),
                       pearson=METRICS["pearson"].score(values, gold), spearman=METRICS["spearman"].score(values, gold))
    classes = logits.shape[-1]
    predicted = logits.argmax(-1).numpy()
    gold = gold.astype(np.int64)
    return Metrics(
        accuracy=METRICS["accuracy"].score(predicted, gold, classes),
        macro_f1=METRICS["macro_f1"].score(predicted, gold, classes),
        loss=float(nn.functional.cross_entropy(logits, labels.long())),
        examples=len(gold),
        f1=METRICS["f1"].score(predicted, gold, classes) if classes == 2 else None,
        mcc=METRICS["mcc"].score(predicted, gold, classes),
    )
