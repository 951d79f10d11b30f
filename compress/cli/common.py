"""Console objects and output helpers shared by the CLI commands."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from rich.console import Console

from compress.errors import CompressError
from compress.train_config import FinetuneConfig

console = Console()
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout, untouched by rich's markup and wrapping."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=str))


def teacher_finetune(epochs: int | None, lr: float | None, batch_size: int | None) -> FinetuneConfig:
    """The teacher's fine-tuning from --teacher-epochs/--teacher-lr/--teacher-batch-size (None: the default)."""
    base = FinetuneConfig()
    given = {"epochs": epochs, "lr": lr, "batch_size": batch_size}
    try:
        return replace(base, train=replace(base.train, **{k: v for k, v in given.items() if v is not None}))
    except ValueError as e:
        raise CompressError(f"teacher fine-tuning: {e}") from None
