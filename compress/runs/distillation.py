"""One student method's run: fine-tune (or reuse) the teacher, build and train the student, evaluate
both on the test split, and write a run directory.

Run directory (written to a temporary sibling and renamed when complete, so an interrupted run
leaves nothing behind):

    config.json    everything needed to run it again (RunConfig + the recipe it ran)
    student/       the student: transformers BERT/ALBERT layout when the shape allows, else compress format
    metrics.json   teacher and student parameters, size, FLOPs, accuracy, macro-F1, retention, the chain
    log.jsonl      the losses of every step and the dev metrics of every epoch
    report.md      the same, for people
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from compress.bench.inputs import speed_seq_len
from compress.bench.speed import SpeedConfig, measure_speed
from compress.bench.timing import default_threads
from compress.data.batching import make_dataloader
from compress.device import resolve_device
from compress.distill.layer_maps import parse_layer_map, teacher_layers
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import Recipe, Stage
from compress.distill.teacher_logits import TeacherLogitsCollator, teacher_logits_dataset
from compress.distributed import world
from compress.errors import CompressError
from compress.methods.pipeline import Step
from compress.methods.registry import Preparation, StudentMethod, get_method
from compress.models.checkpoints import save_encoder
from compress.models.encoder import Encoder
from compress.paths import notice
from compress.quantize.predictors import TorchPredictor
from compress.reports.run_record import run_metrics, write_run_record
from compress.resume import Resume, StageCheckpoints
from compress.runs.config import RunConfig, RunResult, claimed, out_dir, result_settings, run_directory, run_task
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir, teacher_config
from compress.training import TrainConfig, check_precision, evaluate, seed_everything, slow_bf16_warning, train_stage


def _recipe(config: RunConfig, method_recipe: Recipe) -> Recipe:
    stages = [replace(s, epochs=s.epochs if config.epochs is None else config.epochs,
                      lr=s.lr if config.lr is None else config.lr) for s in method_recipe.stages]
    layer_map = parse_layer_map(config.layer_map) if config.layer_map else method_recipe.layer_map
    return replace(method_recipe, stages=stages, layer_map=layer_map)


def _stage_config(stage: Stage, config: RunConfig) -> TrainConfig:
    return TrainConfig(epochs=stage.epochs, lr=stage.lr, batch_size=config.batch_size, seed=config.seed,
                       patience=config.patience, metric="loss" if stage.select_on == "loss" else "accuracy",
                       precision=config.precision)


def distillation_run(config: RunConfig, show_progress: bool = True, pipeline: str | None = None) -> RunResult:
    """Train the student of one student method; every check that can fail on bad input happens before
    any training. ``pipeline``, when this run is a pipeline's first step, is recorded in config.json."""
    w = world(config.device)
    method = get_method(config.method)
    if method.kind != "student":
        raise CompressError(f"{method.name} trains no student; run it with compress.runs.pipeline.run.")
    options = method.make_options(config.options)
    teacher_shape = teacher_config(config.teacher)
    resolve_teacher_dir(config.teacher)  # unreachable weights fail here, before any work
    task = run_task(config)
    try:
        student_shape = method.student_config(teacher_shape.replace(num_labels=task.num_labels), options)
    except ValueError as e:
        raise CompressError(f"invalid {method.name} student: {e}") from None
    try:
        recipe = _recipe(config, method.recipe(options))
        teacher_layers(recipe.layer_map, student_shape.num_layers, teacher_shape.num_layers)
    except ValueError as e:
        raise CompressError(f"invalid layer map: {e}") from None
    device = resolve_device(config.device)
    check_precision(config.precision, device)
    if w.is_main and (slow := slow_bf16_warning(config.precision, device)):
        notice(slow)
    with claimed(out_dir(config, task.name), config.overwrite) as out:
        return _distil(config, method, options, task, student_shape, recipe, out, show_progress, pipeline)


def _distil(config: RunConfig, method: StudentMethod, options, task, student_shape, recipe: Recipe, out: Path,
            show_progress: bool, pipeline: str | None) -> RunResult:
    device = resolve_device(config.device)
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, device=config.device,
                                 show_progress=show_progress)
    data = tokenized_for(finetuned, task)
    if method.prepare is not None:
        data = method.prepare(options, Preparation(data, task, config.teacher, student_shape, config.device,
                                                   show_progress))
    teacher = finetuned.load().model.to(device)
    seed_everything(config.seed)
    student = method.build(teacher, options).to(device)

    start = time.perf_counter()
    resume = Resume({"run": result_settings(asdict(config)), "teacher": finetuned.record["fingerprint"]},
                    f"the run {out}", config.checkpoint_every)
    with resume, run_directory(out) as tmp, open(tmp / "log.jsonl", "w") as log:
        log.write(resume.log())
        stages = resume.finished_stages()
        for index, stage in enumerate(recipe.stages[len(stages):], start=len(stages)):
            stages.append(distil_stage(stage, recipe, teacher, student, data, finetuned.record["fingerprint"],
                                       config, device, log, show_progress,
                                       resume.stage(index, stages, tmp / "log.jsonl")))
        student_test = evaluate(student, data.dataloader("test", batch_size=128), device, collective=True)
        if not world().is_main:
            return RunResult(out, None)
        student.cpu()
        speed = measure_models(config, data, teacher=teacher.cpu(), student=student)
        layout = save_encoder(student, tmp / "student", tokenizer=load_tokenizer(str(finetuned.directory)),
                              label_names=task.label_names)
        record = run_metrics(
            method=method.name, step=str(Step(method.name, config.options)), out=out, teacher=teacher.cpu(),
            student=student, student_test=student_test, seq_len=data.max_length, teacher_finetuned=finetuned.record,
            teacher_dir=finetuned.directory, student_dir=tmp / "student", layout=layout, stages=stages, task=task,
            seconds=time.perf_counter() - start, speed=speed,
        )
        full_config = {"run": asdict(config), "recipe": recipe.to_dict(), "options": asdict(options),
                       "teacher_dir": str(finetuned.directory), "teacher_config": teacher.config.to_dict(),
                       "max_length": data.max_length, "processes": world().size}
        if pipeline:
            full_config["pipeline"] = pipeline
        write_run_record(tmp, record, full_config, seed=config.seed)
    return RunResult(out, record)


def measure_models(config: RunConfig, data, seq_len: int | None = None, **models: Encoder) -> dict[str, dict]:
    """Each model's speed, measured one after another in this process on the same inputs, at ``seq_len``
    tokens (default: the test split's 95th percentile)."""
    speed = SpeedConfig(threads=config.threads or default_threads())
    seq_len = seq_len or speed_seq_len(data)
    return {name: measure_speed(TorchPredictor(model), data, seq_len, speed) for name, model in models.items()}


def distil_stage(stage: Stage, recipe: Recipe, teacher, student, data, teacher_fingerprint: str,
                 config: RunConfig, device: torch.device, log, show_progress: bool,
                 checkpoints: StageCheckpoints | None = None) -> dict[str, Any]:
    objective = DistillationObjective(stage, teacher, student, recipe.layer_map).to(device)
    train_config = _stage_config(stage, config)
    if objective.needs_teacher_forward:
        train_set, collator = data.splits["train"], data.collator
    else:  # only logits: compute the teacher's once per dataset (cached on disk), not once per step
        train_set = teacher_logits_dataset(teacher, data, "train", teacher_fingerprint, device, show_progress)
        collator = TeacherLogitsCollator(data.collator)

    def train_batches(epoch: int):
        return make_dataloader(train_set, collator, batch_size=config.batch_size, shuffle=True,
                               seed=config.seed + epoch)

    def dev_loss() -> dict[str, float]:
        return objective.mean_loss(student, data.dataloader("dev", batch_size=128), device)

    result = train_stage(
        student, objective, train_batches, lambda: data.dataloader("dev", batch_size=128), train_config,
        device=device, name=f"{recipe.method}: {stage.name}", log=log,
        extra_parameters=list(objective.projections.parameters()),
        evaluate_fn=dev_loss if stage.select_on == "loss" else None, show_progress=show_progress,
        checkpoints=checkpoints,
    )
    return {"stage": stage.name, "best_epoch": result.best_epoch, "best_dev": result.best_dev,
            "seconds": round(result.seconds, 1), "stopped_early": result.stopped_early, "warnings": result.warnings}
