"""One student method's run: fine-tune (or reuse) the teacher, build and train the student (resuming from its
checkpoint when interrupted), then hand it to the one run writer (:func:`compress.runs.writer.write_run`), which
evaluates, times, saves and records it as it does every method's model; this module adds ``log.jsonl`` (the
losses of every step and the dev metrics of every epoch) and the recipe to config.json.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from compress.device import resolve_device
from compress.distill.layer_maps import teacher_layers
from compress.distill.recipe import Recipe
from compress.distill.stage import distil_stage
from compress.distributed import world
from compress.errors import CompressError
from compress.paths import notice
from compress.predictions import Predictions
from compress.registry import Preparation, StageTurn, StudentMethod, Transformed, get_method
from compress.resume import Resume
from compress.runs.config import RunConfig, RunResult, claimed, out_dir, result_settings, run_directory, run_task
from compress.runs.source import finetuned_source, teacher_outputs
from compress.runs.writer import train_settings, transfer_request, write_run
from compress.students.transfer import with_transfer
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir, teacher_config
from compress.training import check_precision, predict, seed_everything, slow_bf16_warning


def check_student(config: RunConfig, method: StudentMethod) -> tuple[Any, Recipe]:
    """Every check of a student method's run that needs no data, no teacher weights and no device work (its
    options, the student's shape, the recipe and layer map, the precision): a pipeline and a comparison run it
    before anything is fetched. Gives the method's options and the recipe the run follows."""
    options = method.make_options(config.options)
    if config.layer_map and "layer_map" in method.prepared_parts:
        raise CompressError(f"--layer-map does not apply to {method.name}: its layers face the teacher's layers they "
                            "were cut from.")
    teacher_shape = teacher_config(config.teacher)
    try:
        student_shape = method.student_config(teacher_shape, options)
    except ValueError as e:
        raise CompressError(f"invalid {method.name} student: {e}") from None
    try:
        recipe = method.recipe(options).for_run(config.epochs, config.lr, config.layer_map, config.warmup,
                                                config.decay)
        teacher_layers(recipe.layer_map, student_shape.num_layers, teacher_shape.num_layers)
    except ValueError as e:
        raise CompressError(f"invalid layer map: {e}") from None
    check_precision(config.precision, resolve_device(config.device))
    return options, recipe


def distillation_run(config: RunConfig, show_progress: bool = True, pipeline: str | None = None) -> RunResult:
    """Train the student of one student method; every check that can fail on bad input happens before
    any training. ``pipeline``, when this run is a pipeline's first step, is recorded in config.json."""
    w = world(config.device)
    method = get_method(config.method)
    if method.kind != "student":
        raise CompressError(f"{method.name} trains no student; run it with compress.runs.pipeline.run.")
    options, recipe = check_student(config, method)
    resolve_teacher_dir(config.teacher)  # unreachable weights fail here, before any work
    task = run_task(config)
    student_shape = method.student_config(teacher_config(config.teacher).replace(num_labels=task.num_labels), options)
    device = resolve_device(config.device)
    if w.is_main and (slow := slow_bf16_warning(config.precision, device)):
        notice(slow)
    with claimed(out_dir(config, task.name), config.overwrite) as out:
        return _distil(config, method, options, task, student_shape, recipe, out, show_progress, pipeline)


def _distil(config: RunConfig, method: StudentMethod, options, task, student_shape, recipe: Recipe, out: Path,
            show_progress: bool, pipeline: str | None) -> RunResult:
    device = resolve_device(config.device)
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, device=config.device,
                                 show_progress=show_progress, metric=config.metric)
    # the training sentences and, when a stage first asks, the transfer data after them (copies, the user's texts)
    copies = method.copies(options) if method.copies is not None else None
    data = with_transfer(tokenized_for(finetuned, task), task, transfer_request(config, copies),
                         load_tokenizer(str(finetuned.directory)), show_progress)
    teacher = finetuned.load().model
    preparation = Preparation(data, task, config.teacher, student_shape, config.device, show_progress, teacher,
                              config.seed)

    def followed() -> Recipe:   # the method's recipe again, once what it learns from the data may have changed it
        return method.recipe(options).for_run(config.epochs, config.lr, config.layer_map, config.warmup, config.decay)

    if method.prepare is not None:
        data = method.prepare(options, preparation)
        preparation, recipe = replace(preparation, data=data), followed()
    seed_everything(config.seed)
    # Built from the teacher on the CPU, as every initialisation is tested (an SVD, a fit of the embeddings), then
    # both go where they train.
    student = method.build(teacher, options).to(device)
    teacher.to(device)

    start = time.perf_counter()
    resume = Resume({"run": result_settings(asdict(config)), "teacher": finetuned.record["fingerprint"]},
                    f"the run {out}", config.checkpoint_every)
    with resume, run_directory(out) as tmp, open(tmp / "log.jsonl", "w") as log:
        log.write(resume.log())
        stages = resume.finished_stages()
        for index in range(len(stages), len(recipe.stages)):
            if method.restage is not None:   # a student cut again while it distils
                student = method.restage(options, StageTurn(preparation, index, stages, student)).to(device)
                recipe = followed()
            stage = recipe.stages[index]
            stages.append(distil_stage(stage, recipe, teacher, student, data, finetuned.record["fingerprint"],
                                       train_settings(config), device, log, show_progress,
                                       resume.stage(index, stages, tmp / "log.jsonl")))
        student_test = Predictions.of(*predict(student, data.eval_batches("test"), device,
                                               collective=True))
        answers = teacher_outputs(finetuned, teacher, data)   # every rank: the cache's main process computes them
        if not world().is_main:
            return RunResult(out, None)
        source = finetuned_source(config, task, finetuned, teacher.cpu(), data, answers)
        made = Transformed(student.cpu(), stages=stages, recipe=recipe.to_dict(), test=student_test)
        # A resumed run's time counts the training before its checkpoint too.
        record = write_run(tmp, out, config, method, options, source, made,
                           seconds=time.perf_counter() - start + resume.seconds_before(),
                           pipeline=pipeline, more_config={"teacher_dir": str(finetuned.directory),
                                                           "teacher_config": teacher.config.to_dict(),
                                                           "processes": world().size})
    return RunResult(out, record)
