"""One distillation stage from a recipe: the objective, the batches (with the teacher's outputs the stage reads
stored on disk once and read back, :mod:`compress.distill.teacher_targets`), and the training loop. Student methods
train every stage of their recipe with it; pruning and low-rank factorization recover with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import IO

import torch

from compress.bench.machine import device_name
from compress.data.batching import TokenizedTask, for_device, make_dataloader
from compress.data.transfer_split import epoch_rows
from compress.distill.losses import kd_kl
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import Recipe, Stage
from compress.distill.teacher_logits import teacher_logits
from compress.distill.teacher_targets import (
    IndexCollator,
    StoredTargets,
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
    """The stage's training settings: its own epochs (raised to the run's recipe's ceiling, ``settings.min_epochs``, or
    a part's share of it), learning rate, warm-up and decay, and the run's batch size, seed, patience and precision."""
    return TrainConfig(epochs=max(stage.epochs, stage.sharing(settings.min_epochs or 0)), lr=stage.lr,
                       warmup_ratio=stage.warmup_ratio, decay=stage.decay, batch_size=settings.batch_size,
                       seed=settings.seed, patience=settings.patience,
                       metric="loss" if stage.select_on == "loss" else settings.metric,
                       precision=settings.precision, stop_below=settings.stop_below,
                       select=settings.select if stage.select_on != "loss" else "metric",
                       eval_every=settings.eval_every, evals_per_epoch=settings.evals_per_epoch,
                       average=settings.average)


def divergence_from(targets: torch.Tensor) -> Callable[[torch.Tensor], float]:
    """How far a student's dev logits are from the teacher's, ``targets``: the mean over dev sentences of
    KL(teacher || student) of their answers at temperature 1, or for a regression the mean squared difference of the
    two values. What a prediction stage keeps its weights by under ``select = divergence``: on MR's 1,031 dev sentences
    it moves smoothly where gold accuracy moves by whole sentences."""
    targets = targets.float().cpu()
    return lambda logits: float(kd_kl(logits.float(), targets, temperature=1.0, scale_by_t2=False))


def distil_stage(stage: Stage, recipe: Recipe, teacher: Encoder, student: Encoder, data: TokenizedTask,
                 teacher_fingerprint: str, settings: TrainSettings, device: torch.device, log: IO[str] | None,
                 show_progress: bool, checkpoints: StageCheckpoints | None = None,
                 answers: Callable[[str], torch.Tensor] | None = None) -> StageRecord:
    """Train ``student`` on one stage of ``recipe``; the stage's record (best epoch, best dev, seconds, ...).
    ``teacher_fingerprint`` keys the on-disk cache of the teacher's outputs ("" turns the cache off: the teacher
    runs in every step). ``answers(split)``: the logits of another model than ``teacher`` on a split of ``data``,
    which the terms reading logits and the dev divergence learn from instead of ``teacher``'s (a recovery taught by the
    fine-tuned teacher, its hidden-state terms still against the model it recovers from, whose shape matches)."""
    objective = DistillationObjective(stage, teacher, student, recipe.layer_map, recipe.channels).to(device)
    train_config = stage_config(stage, settings)
    positions = min(student.config.max_positions, teacher.config.max_positions)
    padding = for_device(data, device, positions).collator   # on a GPU, to a few shapes
    # the training sentences, and after them the transfer data (augmented copies, unlabeled text) where the run has it
    split = data.training_split
    train_set, collator = data.split(split), padding
    taught = False   # whether the terms reading logits learn ``answers`` (they can only where the targets are stored)
    if teacher_fingerprint and objective.targets is not None:
        # what the stage reads of the teacher, computed once per teacher and dataset (cached on disk), not per step
        spec = objective.targets
        if answers is not None and spec.logits_only:   # nothing of ``teacher`` is read: the answers alone
            targets: StoredTargets | None = StoredTargets(spec, answers(split), None, None, None, None)
        else:
            targets = stored_targets(teacher, data, split, teacher_fingerprint, spec, device, show_progress)
            if targets is not None and answers is not None:
                targets = replace(targets, logits=answers(split))
        taught = targets is not None and answers is not None
        if targets is not None:
            objective.resident = resident_targets(targets, device)
            train_set = with_target_index(data, split)
            collator = IndexCollator(padding) if objective.resident is not None else TargetsCollator(padding, targets)

    def epoch_set(epoch: int):
        """What epoch ``epoch`` learns from: every row, or with ``copies_per_epoch`` the training sentences, the
        epoch's copies and the user's texts (the rows keep their positions in the stored targets)."""
        rows = epoch_rows(data, epoch, settings.copies_per_epoch)
        return train_set if rows is None else train_set.select(rows)

    def train_batches(epoch: int):
        return make_dataloader(epoch_set(epoch), collator, batch_size=settings.batch_size, shuffle=True,
                               seed=settings.seed + epoch, pin_memory=device.type == "cuda")

    def dev_loss(model: Encoder) -> dict[str, float]:
        return objective.mean_loss(model, data.eval_batches("dev"), device)

    result = train_stage(
        student, objective, train_batches, lambda: data.eval_batches("dev"), train_config,
        device=device, name=f"{recipe.method}: {stage.name}", log=log,
        extra_parameters=list(objective.projections.parameters()),
        evaluate_fn=dev_loss if stage.select_on == "loss" else None, show_progress=show_progress,
        divergence_fn=divergence_from(answers("dev") if answers else teacher_logits(
            teacher, data, "dev", teacher_fingerprint, device, show_progress=False))
        if train_config.select == "divergence" else None,
        checkpoints=checkpoints,
    )
    measured = {"examples_per_second": result.examples_per_second, "peak_memory_bytes": result.peak_memory_bytes}
    return StageRecord(stage=stage.name, best_epoch=result.best_epoch, best_dev=result.best_dev,
                       epochs=len(result.history), max_epochs=train_config.epochs, steps=result.steps,
                       examples_per_epoch=len(epoch_set(0)), seconds=round(result.seconds, 1),
                       stopped_early=result.stopped_early,
                       **({"stop_reason": result.stop_reason} if result.stop_reason else {}),
                       **({"cooldown_steps": result.cooldown_steps} if result.cooldown_steps else {}),
                       selected_on="divergence" if train_config.select == "divergence" else train_config.metric,
                       kept_step=result.kept_step, kept_average=result.kept_average,
                       **({"soft_targets": "teacher"} if taught else {}),
                       precision=result.precision, **({"step_ms": result.step_ms} if result.step_ms else {}),
                       warnings=result.warnings, device=device_name(device),
                       **{k: v for k, v in measured.items() if v is not None})
