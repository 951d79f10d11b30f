"""Classification metrics of one evaluation: accuracy, macro-F1 and mean cross-entropy.

A leaf module: the training loop, the quantized predictors and the run records all read these, and
none of them should need the others to do so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass
class Metrics:
    """Classification metrics of one evaluation."""

    accuracy: float
    macro_f1: float
    loss: float
    examples: int

    def to_dict(self) -> dict[str, float]:
        return asdict(self)



def classification_metrics(logits: torch.Tensor, labels: torch.Tensor) -> Metrics:
    """Accuracy and macro-F1 (scikit-learn) and mean cross-entropy of ``logits`` against ``labels``."""
    from sklearn.metrics import accuracy_score, f1_score  # here: importing scikit-learn takes a second

    predictions = logits.argmax(-1).numpy()
    gold = labels.numpy()
    return Metrics(
        accuracy=float(accuracy_score(gold, predictions)),
        macro_f1=float(f1_score(gold, predictions, average="macro")),
        loss=float(nn.functional.cross_entropy(logits, labels)),
        examples=len(gold),
    )
