"""Teacher logits computed once per dataset and cached on disk, for stages that need nothing else.

A logits-only stage (ALBERT's default, or any kd_kl / soft_ce / hard_ce recipe) would otherwise
run the teacher on every batch of every epoch. The cache key is the fine-tuned teacher's
fingerprint plus the tokenization key, so a change of either recomputes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import torch
from safetensors.torch import load_file, save_file

from compress.data.batching import DynamicPaddingCollator, TokenizedTask
from compress.distill.training import predict
from compress.models.encoder import Encoder
from compress.paths import cache_dir


def teacher_logits(teacher: Encoder, data: TokenizedTask, split: str, teacher_fingerprint: str,
                   device: torch.device) -> torch.Tensor:
    """(examples, classes) logits of the teacher on ``split``, in dataset order, cached."""
    path = cache_dir() / "teacher_logits" / f"{teacher_fingerprint}-{data.cache_key}-{split}.safetensors"
    if path.is_file():
        try:
            cached = load_file(path)["logits"]
            if len(cached) == len(data.splits[split]):
                return cached
        except Exception:  # noqa: BLE001 - a damaged cache entry is recomputed
            pass
    logits, _ = predict(teacher, data.dataloader(split, batch_size=128, shuffle=False), device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({"logits": logits.contiguous()}, tmp)
    tmp.replace(path)
    return logits


def teacher_logits_dataset(teacher: Encoder, data: TokenizedTask, split: str, teacher_fingerprint: str,
                           device: torch.device) -> datasets.Dataset:
    """The tokenized split with a ``teacher_logits`` column."""
    logits = teacher_logits(teacher, data, split, teacher_fingerprint, device)
    return data.splits[split].add_column("teacher_logits", logits.tolist())


@dataclass(frozen=True)
class TeacherLogitsCollator:
    """Pads as ``base`` does and stacks the examples' ``teacher_logits`` into (B, C)."""

    base: DynamicPaddingCollator

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.base(features)
        batch["teacher_logits"] = torch.tensor([f["teacher_logits"] for f in features], dtype=torch.float32)
        return batch
