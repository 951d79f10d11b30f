"""One distillation stage from a recipe: the objective, the batches (with the teacher's outputs the stage reads
stored on disk once and read back, :mod:`compress.distill.teacher_targets`), and the training loop. Student methods
train every stage of their recipe with it; pruning and low-rank factorization recover with it."""

from __future__ import annotations

from typing import IO

import torch

from compress.bench.machine import device_name
from compress.data.batching import TokenizedTask, for_device, make_dataloader
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import Recipe, Stage
from compress.distill.teacher_targets import (
    IndexCollator,
    TargetsCollator,
    resident_targets,
    stored_targets,
    with_target_index,
)
from compress.models.encoder import Encoder
from compress.resume import StageCheckpoints
from compress.train_config import StageRecord, TrainConfig, TrainSettings
from compress.training import train_stage


def stage_config(stage: Stage, settings: TrainSettings) -> TrainConfig:
    """The stage's training settings: its own epochs (raised to the run's recipe's ceiling, ``settings.min_epochs``),
    learning rate, warm-up and decay, and the run's batch size, seed, patience and precision."""
    return TrainConfig(epochs=max(stage.epochs, settings.min_epochs or 0), lr=stage.lr,
                       warmup_ratio=stage.warmup_ratio, decay=stage.decay, batch_size=settings.batch_size,
                       seed=settings.seed, patience=settings.patience,
                       metric="loss" if stage.select_on == "loss" else settings.metric,
                       precision=settings.precision, stop_below=settings.stop_below)


def distil_stage(stage: Stage, recipe: Recipe, teacher: Encoder, student: Encoder, data: TokenizedTask,
                 teacher_fingerprint: str, settings: TrainSettings, device: torch.device, log: IO[str] | None,
                 show_progress: bool, checkpoints: StageCheckpoints | None = None) -> StageRecord:
    """Train ``student`` on one stage of ``recipe``; the stage's record (best epoch, best dev, seconds, ...).
    ``teacher_fingerprint`` keys the on-disk cache of the teacher's outputs ("" turns the cache off: the teacher
    runs in every step)."""
    objective = DistillationObjective(stage, teacher, student, recipe.layer_map).to(device)
    train_config = stage_config(stage, settings)
    positions = min(student.config.max_positions, teacher.config.max_positions)
    padding = for_device(data, device, positions).collator   # on a GPU, to a few shapes
    # the training sentences, and after them the transfer data (augmented copies, unlabeled text) where the run has it
    split = data.training_split
    train_set, collator = data.split(split), padding
    if teacher_fingerprint and objective.targets is not None:
        # what the stage reads of the teacher, computed once per teacher and dataset (cached on disk), not per step
        targets = stored_targets(teacher, data, split, teacher_fingerprint, objective.targets, device, show_progress)
        if targets is not None:
            objective.resident = resident_targets(targets, device)
            train_set = with_target_index(data, split)
            collator = IndexCollator(padding) if objective.resident is not None else TargetsCollator(padding, targets)

    def train_batches(epoch: int):
        return make_dataloader(train_set, collator, batch_size=settings.batch_size, shuffle=True,
                               seed=settings.seed + epoch, pin_memory=device.type == "cuda")

    def dev_loss() -> dict[str, float]:
        return objective.mean_loss(student, data.eval_batches("dev"), device)

    result = train_stage(
        student, objective, train_batches, lambda: data.eval_batches("dev"), train_config,
        device=device, name=f"{recipe.method}: {stage.name}", log=log,
        extra_parameters=list(objective.projections.parameters()),
        evaluate_fn=dev_loss if stage.select_on == "loss" else None, show_progress=show_progress,
        checkpoints=checkpoints,
    )
    measured = {"examples_per_second": result.examples_per_second, "peak_memory_bytes": result.peak_memory_bytes}
    return StageRecord(stage=stage.name, best_epoch=result.best_epoch, best_dev=result.best_dev,
                       epochs=len(result.history), max_epochs=train_config.epochs, steps=result.steps,
                       examples_per_epoch=len(train_set), seconds=round(result.seconds, 1),
                       stopped_early=result.stopped_early,
                       **({"stop_reason": result.stop_reason} if result.stop_reason else {}),
                       precision=result.precision, **({"step_ms": result.step_ms} if result.step_ms else {}),
                       warnings=result.warnings, device=device_name(device),
                       **{k: v for k, v in measured.items() if v is not None})
