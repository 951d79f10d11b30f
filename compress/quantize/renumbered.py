"""A model with a pruned vocabulary fed another tokenizer's ids: the table that renumbers them (numpy alone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from compress.bench.measurement import Predictor


@dataclass
class RenumberedPredictor:
    """A predictor whose model has its own vocabulary (``prune-vocab``), fed the teacher's token ids:
    ``table[teacher id]`` is the model's id of the same token (its [UNK] where it has none), so it can be
    timed on the very inputs every other model is timed on."""

    predictor: Predictor
    table: np.ndarray

    @property
    def backend(self) -> str:
        return self.predictor.backend

    @property
    def dtype(self) -> str:
        return self.predictor.dtype

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.predictor({**inputs, "input_ids": self.table[inputs["input_ids"]]})


def renumbering(teacher_vocab: Mapping[str, int], vocab: Mapping[str, int], unk: int) -> np.ndarray | None:
    """The teacher-id -> model-id table of :class:`RenumberedPredictor`; None when the vocabularies agree."""
    if vocab == teacher_vocab:
        return None
    table = np.full(max(teacher_vocab.values()) + 1, unk, dtype=np.int64)
    for token, old in teacher_vocab.items():
        table[old] = vocab.get(token, unk)
    return table

