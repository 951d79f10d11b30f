"""What one `compress run` is asked to do, what it gives back, and where it writes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compress.data.load import load_task
from compress.data.task import TaskData
from compress.errors import CompressError
from compress.teachers.finetune import FinetuneConfig
from compress.teachers.registry import DEFAULT_TEACHER


@dataclass
class RunConfig:
    """One `compress run`: method, teacher, data and training settings.

    ``epochs``, ``lr`` and ``layer_map`` override a distillation method's recipe when set.
    ``target``, ``backend`` and ``threads`` concern quantization methods: what to quantize (``teacher``
    or an earlier run directory), on which backend (``auto`` measures and picks the fastest), and the
    threads speed is measured with. ``then`` chains a quantization method after a distillation run.
    """

    method: str
    teacher: str = DEFAULT_TEACHER
    dataset: str = "mr"
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    epochs: int | None = None
    lr: float | None = None
    layer_map: str | None = None      # overrides the recipe's: uniform, last, every_other or "2,4,6"
    patience: int | None = None       # early stopping: epochs without a better dev score
    batch_size: int = 32
    seed: int = 13
    device: str = "auto"
    teacher_finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    target: str = "teacher"
    backend: str = "auto"
    then: str | None = None
    threads: int | None = None
    out: str | None = None
    overwrite: bool = False


@dataclass
class RunResult:
    directory: Path
    metrics: dict[str, Any]
    chained: RunResult | None = None   # the run ``then`` started


def out_dir(config: RunConfig, dataset_name: str) -> Path:
    """The run directory: ``--out`` or runs/METHOD-DATASET-TIME; an existing non-empty one needs ``overwrite``."""
    if config.out:
        out = Path(config.out)
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = Path("runs") / f"{config.method}-{Path(dataset_name).stem}-{stamp}"
    if out.exists() and any(out.iterdir()) and not config.overwrite:
        raise CompressError(f"{out} already exists and is not empty; choose another --out or pass --overwrite.")
    return out


def run_task(config: RunConfig) -> TaskData:
    """The task a run reads: its dataset with its column choices."""
    return load_task(config.dataset, text_column=config.text_column, text_pair_column=config.text_pair_column,
                     label_column=config.label_column)
