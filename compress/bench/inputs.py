"""The inputs speed is measured on: real examples of the task at a fixed length taken from the data."""

from __future__ import annotations

import numpy as np

from compress.data.batching import TokenizedTask
from compress.errors import CompressError
from compress.models.config import INPUT_NAMES

__all__ = ["INPUT_NAMES", "speed_batch", "speed_seq_len"]


def speed_seq_len(data: TokenizedTask, percentile: float = 95.0, split: str = "test") -> int:
    """The ``percentile`` of the split's token lengths (after truncation): the length a typical request has."""
    lengths = [len(ids) for ids in data.splits[split]["input_ids"]]
    return max(2, int(np.ceil(np.percentile(lengths, percentile))))


def check_seq_len(seq_len: int | None, max_positions: int) -> None:
    """Refuse, before any work, a speed sequence length the teacher's position table cannot take (None: chosen
    from the data, see :func:`speed_seq_len`)."""
    if seq_len is not None and not 2 <= seq_len <= max_positions:
        raise CompressError(f"--seq-len must be between 2 and the teacher's {max_positions} positions.")


def speed_batch(data: TokenizedTask, batch_size: int, seq_len: int, split: str = "test") -> dict[str, np.ndarray]:
    """``batch_size`` real examples of ``split``, each exactly ``seq_len`` tokens long.

    Longer examples are cut; shorter ones are filled by repeating their own tokens, so every row is
    real text and the attention mask is all ones (padding would let a runtime skip work and look
    faster). The split is cycled when it has fewer examples. Token types are all 0.
    """
    if batch_size < 1 or seq_len < 2:
        raise ValueError("batch_size must be >= 1 and seq_len >= 2")
    split_data = data.splits[split]
    if len(split_data) == 0:
        raise CompressError(f"the {split} split is empty; speed is measured on its examples.")
    batch = {name: np.zeros((batch_size, seq_len), dtype=np.int64) for name in INPUT_NAMES}
    pad = data.collator.pad_token_id
    for row in range(batch_size):
        example = split_data[row % len(split_data)]
        ids = list(example["input_ids"])
        # Fill a short example by repeating its tokens (a real, non-padding sequence of the right length).
        ids = (ids * (seq_len // len(ids) + 1))[:seq_len] if ids else [pad] * seq_len
        batch["input_ids"][row] = ids
        batch["attention_mask"][row] = 1
    return batch
