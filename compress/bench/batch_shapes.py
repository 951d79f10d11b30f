"""The batches throughput is timed on, shaped as a server would make them (``--batch-shape``).

A server that scores many sentences at once groups requests into batches of ``batch_size`` and pads each to a
shape; which shape decides how much of the work is padding and how many shapes a runtime must prepare for:

    filled    every row exactly ``seq_len`` real tokens, no padding (a short sentence repeats its own tokens):
              the cost of the model at one length, what compress timed before batch shapes existed (the default)
    real      sentences in arrival order, each batch padded to its own longest sentence (dynamic padding): as
              many shapes as there are batch lengths
    padded    sentences in arrival order, every batch padded to the split's longest sentence: one shape, the most
              padding
    bucketed  sentences grouped by length into buckets (powers of two from 16, the last the split's longest),
              each batch padded to its bucket's bound: a few shapes, little padding

Every shape but ``filled`` times the same sample of test sentences (seeded), :data:`SET_BATCHES` batches of them,
so their throughputs are of the same work; padding's share of the positions computed is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compress.bench.inputs import INPUT_NAMES, speed_batch
from compress.data.batching import TokenizedTask
from compress.errors import CompressError

BATCH_SHAPES = ("filled", "real", "padded", "bucketed")
SET_BATCHES = 4          # batches of sentences in a set timed as one call (every shape but filled)
FIRST_BUCKET = 16        # the smallest bucket's bound, in tokens; each next bound doubles


def check_batch_shape(name: str) -> None:
    if name not in BATCH_SHAPES:
        raise CompressError(f"unknown --batch-shape {name!r}; use one of {', '.join(BATCH_SHAPES)}.")


@dataclass
class BatchSet:
    """The batches one throughput call runs, one after another, and how much of their work is padding."""

    shape: str
    batches: list[dict[str, np.ndarray]]
    tokens: int              # real tokens over every batch
    positions: int           # positions computed: real tokens and padding

    @property
    def examples(self) -> int:
        return sum(len(batch["input_ids"]) for batch in self.batches)

    @property
    def padding(self) -> float:
        """Padding's share of the positions computed (0 to 1)."""
        return 1 - self.tokens / self.positions if self.positions else 0.0

    @property
    def lengths(self) -> list[int]:
        """Each batch's padded length, in the order they run."""
        return [batch["input_ids"].shape[1] for batch in self.batches]

    def largest(self) -> dict[str, np.ndarray]:
        """The batch with the most positions (the one whose memory peaks)."""
        return max(self.batches, key=lambda batch: batch["input_ids"].size)


def bucket_bounds(longest: int) -> list[int]:
    """Bucket bounds for sentences of at most ``longest`` tokens: powers of two from :data:`FIRST_BUCKET` below
    ``longest``, then ``longest`` itself."""
    bounds, bound = [], FIRST_BUCKET
    while bound < longest:
        bounds.append(bound)
        bound *= 2
    return [*bounds, longest]


def _padded(rows: list[list[int]], length: int, pad: int) -> dict[str, np.ndarray]:
    batch = {name: np.zeros((len(rows), length), dtype=np.int64) for name in INPUT_NAMES}
    batch["input_ids"][:] = pad
    for i, ids in enumerate(rows):
        batch["input_ids"][i, :len(ids)] = ids
        batch["attention_mask"][i, :len(ids)] = 1
    return batch


def batch_set(data: TokenizedTask, shape: str, batch_size: int, seq_len: int, split: str = "test",
              batches: int = SET_BATCHES, seed: int = 0) -> BatchSet:
    """The batches of ``batch_size`` a throughput call of ``shape`` runs (see the module docstring)."""
    check_batch_shape(shape)
    if shape == "filled":
        return BatchSet(shape, [speed_batch(data, batch_size, seq_len, split)], batch_size * seq_len,
                        batch_size * seq_len)
    ids = data.splits[split]["input_ids"]
    if len(ids) == 0:
        raise CompressError(f"the {split} split is empty; speed is measured on its examples.")
    wanted = batches * batch_size
    order = np.concatenate([np.random.default_rng(seed + turn).permutation(len(ids))
                            for turn in range(-(-wanted // len(ids)))])[:wanted]   # cycled when the split is small
    rows = [list(ids[int(i)]) for i in order]
    pad = data.collator.pad_token_id
    if shape == "bucketed":
        bounds = bucket_bounds(max(len(row) for row in ids))
        by_bucket: dict[int, list[list[int]]] = {}
        for row in rows:
            by_bucket.setdefault(next(b for b in bounds if len(row) <= b), []).append(row)
        made = [_padded(group[start:start + batch_size], bound, pad)
                for bound, group in sorted(by_bucket.items()) for start in range(0, len(group), batch_size)]
    else:
        chunks = [rows[start:start + batch_size] for start in range(0, wanted, batch_size)]
        longest = max(len(row) for row in ids)
        made = [_padded(chunk, longest if shape == "padded" else max(len(row) for row in chunk), pad)
                for chunk in chunks]
    return BatchSet(shape, made, sum(len(row) for row in rows), sum(batch["input_ids"].size for batch in made))


def run_set(predictor, batch_set_: BatchSet) -> None:
    """One throughput call: every batch of the set, in order."""
    for batch in batch_set_.batches:
        predictor(batch)
