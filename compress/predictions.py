"""A model's answers on the test split, example by example: what makes paired statistics possible.

Every run keeps its test predictions in ``predictions.safetensors`` (``predicted``: the label it answered, int64;
``logits``: examples x classes, float32; ``labels``: the gold labels, int64; a regression's ``predicted`` and
``labels`` are its values, float32, and its ``logits`` one column), in the split's own order, so two
models of one comparison are scored on the same sentences: the teacher against a student, one student against
another, seed after seed. The run record keeps the file's SHA-256; a comparison reads the file only when it still
matches. Its dev predictions go beside them, in ``dev_predictions.safetensors``, and where its task holds training
examples out for a search to select on, their predictions in ``select_predictions.safetensors``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compress.errors import CompressError
from compress.metrics import Metrics
from compress.task_metrics import TaskMetric

PREDICTIONS_FILE = "predictions.safetensors"
FILES = {"test": PREDICTIONS_FILE, "dev": "dev_predictions.safetensors", "select": "select_predictions.safetensors",
         # the teacher's, on the same sentences: what the run's retention intervals are paired with
         "teacher_test": "teacher_predictions.safetensors", "teacher_dev": "teacher_dev_predictions.safetensors"}


@dataclass(frozen=True)
class Predictions:
    """Logits and gold labels of one model on one split, in the split's order."""

    logits: np.ndarray    # (examples, classes); a regression's (examples, 1)
    labels: np.ndarray    # (examples,): class ids, or a regression's targets

    def __post_init__(self) -> None:
        if self.logits.ndim != 2 or self.labels.shape != (self.logits.shape[0],):
            raise ValueError(f"predictions need logits (n, classes) and labels (n,), got {self.logits.shape} and "
                             f"{self.labels.shape}")

    @classmethod
    def of(cls, logits, labels) -> Predictions:
        """From torch tensors or numpy arrays."""
        as_array = (lambda x: x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x))
        logits = as_array(logits).astype(np.float32)
        return cls(logits, as_array(labels).astype(np.float32 if logits.shape[-1] == 1 else np.int64))

    @property
    def regression(self) -> bool:
        return self.logits.shape[-1] == 1

    @property
    def outputs(self) -> np.ndarray:
        """What the model answered: the class with the largest logit, or a regression's value."""
        return self.logits[:, 0] if self.regression else self.logits.argmax(-1)

    @property
    def correct(self) -> np.ndarray:
        """Whether each example was answered right (bool, one per example)."""
        return self.logits.argmax(-1) == self.labels

    def statistics(self, metric: TaskMetric) -> np.ndarray:
        """Each example's statistics of ``metric`` (:mod:`compress.task_metrics`), (examples, k)."""
        return metric.statistics(self.outputs, self.labels, self.logits.shape[-1])

    def metrics(self) -> Metrics:
        import torch

        from compress.metrics import metrics_of

        return metrics_of(torch.from_numpy(self.logits), torch.from_numpy(self.labels))


def save_predictions(predictions: Predictions, directory: Path, split: str = "test") -> str:
    """Write ``directory/predictions.safetensors`` (a split's file: :data:`FILES`); return its SHA-256 (the run record
    keeps it)."""
    from safetensors.numpy import save

    data = save({"predicted": predictions.outputs.astype(np.float32 if predictions.regression else np.int64),
                 "logits": np.ascontiguousarray(predictions.logits),
                 "labels": np.ascontiguousarray(predictions.labels)})
    (directory / FILES[split]).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def load_predictions(directory: Path, sha256: str | None, split: str = "test") -> Predictions:
    """The predictions a run kept, checked against the SHA-256 its record holds; one sentence when they are missing,
    changed since, or of another shape."""
    from safetensors.numpy import load

    path = Path(directory) / FILES[split]
    if sha256 is None:
        raise CompressError(f"the run {directory} kept no {split} predictions (it was made by an older compress); "
                            "run it again.")
    try:
        data = path.read_bytes()
    except OSError:
        raise CompressError(f"{path} is missing; run {directory} again.") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CompressError(f"{path} changed since its run wrote it (its SHA-256 differs); run it again.")
    try:
        tensors = load(data)
        return Predictions(tensors["logits"], tensors["labels"])
    except (KeyError, ValueError) as error:
        raise CompressError(f"{path} does not hold a run's {split} predictions ({error}); run it again.") from None
