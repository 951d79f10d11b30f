"""Teacher logits computed once per dataset and cached on disk: the targets of a stage that reads nothing else
(ALBERT's default, or any kd_kl / soft_ce / hard_ce recipe, :mod:`compress.distill.teacher_targets`), and the
teacher's dev and test predictions that searches and comparisons score students against.

The cache key is the fine-tuned teacher's fingerprint plus the tokenization key, so a change of either
recomputes it. Each entry is a directory
``teacher_logits/<teacher>-<tokenization>-<split>/`` holding ``logits.safetensors`` and the
checksums verified on every use; a damaged entry is recomputed (:mod:`compress.cache`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from compress.cache import cached, unreadable
from compress.data.batching import TokenizedTask
from compress.models.encoder import Encoder
from compress.paths import as_ordinary_file, cache_dir
from compress.training import predict, with_progress

LOGITS = "logits.safetensors"


def teacher_logits(teacher: Encoder, data: TokenizedTask, split: str, teacher_fingerprint: str,
                   device: torch.device, show_progress: bool = True) -> torch.Tensor:
    """(examples, classes) logits of the teacher on ``split``, in dataset order, cached (computing them, a
    progress bar: for a large teacher or an augmented split this pass takes minutes)."""
    target = cache_dir() / "teacher_logits" / f"{teacher_fingerprint}-{data.split_key(split)}"
    examples = len(data.split(split))

    def build(tmp: Path) -> None:
        batches = data.eval_batches(split)
        logits, _ = predict(teacher, with_progress(batches, f"teacher logits ({split})", show_progress), device)
        save_file({"logits": logits.contiguous()}, tmp / LOGITS)
        as_ordinary_file(tmp / LOGITS)

    def load(directory: Path) -> torch.Tensor:
        try:
            logits = load_file(directory / LOGITS)["logits"]
        except (OSError, KeyError, SafetensorError) as e:
            raise unreadable(e) from e
        if len(logits) != examples:
            raise ValueError(f"it holds {len(logits)} logits for a split of {examples} examples")
        return logits

    return cached(target, "teacher logits", build, load)[0]
