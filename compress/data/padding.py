"""Tokenized examples into padded batches, with numpy alone: what answering texts needs, without torch.

* :func:`pad_features`: a batch padded to its longest example (what :class:`~compress.data.batching.
  DynamicPaddingCollator` pads, as ``int64`` arrays; the collator turns them into tensors).
* :func:`length_sorted_batches`: the examples shortest first, cut into batches, so a batch pads little.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

PADDED_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")


def pad_features(features: Sequence[Mapping[str, Any]], pad_token_id: int = 0,
                 pad_to_multiple_of: int | None = None) -> dict[str, np.ndarray]:
    """``input_ids`` (padded with ``pad_token_id``), ``attention_mask`` and ``token_type_ids`` (padded with 0) of
    tokenized examples, ``int64`` arrays of shape ``[batch, length]``: ``length`` is the longest example's, rounded up
    to a multiple of ``pad_to_multiple_of`` when set. A missing ``attention_mask`` is ones, missing
    ``token_type_ids`` zeros."""
    length = max(len(f["input_ids"]) for f in features)
    if pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    batch = {"input_ids": np.full((len(features), length), pad_token_id, dtype=np.int64),
             "attention_mask": np.zeros((len(features), length), dtype=np.int64),
             "token_type_ids": np.zeros((len(features), length), dtype=np.int64)}
    for row, feature in enumerate(features):
        n = len(feature["input_ids"])
        batch["input_ids"][row, :n] = feature["input_ids"]
        mask = feature.get("attention_mask")
        batch["attention_mask"][row, :n] = mask if mask is not None else 1
        types = feature.get("token_type_ids")
        if types is not None:
            batch["token_type_ids"][row, :n] = types
    return batch


def pad_token_id_of(tokenizer: Any) -> int:
    """The tokenizer's pad token id (0 when it has none)."""
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else 0


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """The examples shortest first (ties in dataset order), cut into batches of ``batch_size``."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
