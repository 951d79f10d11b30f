"""Small shared pieces for the tests: tiny shapes, a padded batch, running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from compress.models.config import EncoderConfig

REPO = Path(__file__).resolve().parent.parent


def tiny_config(**changes) -> EncoderConfig:
    """A 4-layer, 32-wide encoder: big enough to exercise every knob, small enough to be instant."""
    base = EncoderConfig(vocab_size=101, embedding_size=32, hidden_size=32, num_layers=4, num_heads=4,
                         ffn_size=64, max_positions=40, num_labels=3)
    return base.replace(**changes)


def padded_batch(vocab_size: int = 101, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three sequences of lengths 9, 5 and 2, right-padded with token 0."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab_size, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    for row, length in enumerate((9, 5, 2)):
        ids[row, length:] = 0
        mask[row, length:] = 0
    types = torch.zeros_like(ids)
    types[0, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m compress ARGS`` as a user would, capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "compress", *args], capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd or REPO, timeout=600,
    )
