"""The one run writer: every run directory, whatever made its model, is evaluated, timed, saved and recorded here.

A transform's run (:func:`transform_run`) loads its input (the fine-tuned teacher, a run directory, or the
previous step of a pipeline: :mod:`compress.runs.source`), calls the method's verb (``apply``,
:mod:`compress.registry.contract`) and hands the result to :func:`write_run`; a student method's run
(:mod:`compress.runs.distillation`) trains and hands its student to the same function. So there is one
record builder, and ``kind`` comes from the method.

Run directory (written to a temporary sibling and renamed when complete, like every run)::

    config.json    the RunConfig, the method's options as resolved, and what the model came from
    student/       an fp32 model (compress or transformers layout) + tokenizer; or
    model/         a quantized artefact (compress.quantize.artefacts) + tokenizer
    metrics.json   the run record (compress.reports.records.RunRecord), the method's details included
    manifest.json  versions, CPU, threads, seed, split fingerprint
    log.jsonl      training losses, when the run trained (students, pruning's recovery)
    predictions.safetensors  the test split's logits and labels, example by example (compress.predictions)
    dev_predictions.safetensors  the same on dev; teacher_predictions.safetensors and
                   teacher_dev_predictions.safetensors the teacher's, which the retention intervals pair with
    report.md      the same, for people; the method writes its own section
    ...            files of the method's own (pruning: importance.json, head_curve.png)
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from compress.bench.inputs import speed_seq_len
from compress.bench.machine import manifest
from compress.bench.measurement import Speed
from compress.bench.speed import SpeedConfig, measure_speed
from compress.bench.timing import default_threads
from compress.data.batching import TokenizedTask, tokenize_task
from compress.data.splits import SELECT
from compress.device import resolve_device
from compress.distill.schedule import get_schedule
from compress.inference.loaded import model_dir_of, model_files
from compress.models.checkpoints import TOKENIZER_FILES, save_encoder
from compress.models.encoder import Encoder
from compress.paths import notice
from compress.predictions import Predictions, save_predictions
from compress.quantize.artefacts import artefact_bytes
from compress.quantize.predictors import TorchPredictor, predict_batches
from compress.registry import Context, Method, Transform, Transformed
from compress.registry.pipeline import Step
from compress.reports.records import ChainStep, RunRecord, SavedConfig, SourceRecord
from compress.reports.run_record import dataset_record, model_record, ratios, retention, weights_bytes, write_report
from compress.runs.config import RunConfig, RunResult, run_directory
from compress.runs.paired import run_retentions
from compress.runs.source import Source, claimed_source, teacher_answers
from compress.students.transfer import TransferRequest, with_transfer
from compress.task_metrics import resolve_metric
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir, teacher_weights
from compress.train_config import StageRecord, TrainSettings
from compress.training import predict


def train_settings(config: RunConfig) -> TrainSettings:
    """What every stage of the run trains with: its own settings, and where it gives none, its recipe's
    (``--recipe``: the ceiling of every stage's epochs, the patience and the copies each epoch learns from, the
    method's own where its curve chose another)."""
    schedule = get_schedule(config.recipe).for_method(config.method)
    return TrainSettings(batch_size=config.batch_size, seed=config.seed,
                         patience=config.patience if config.patience is not None else schedule.patience,
                         precision=config.precision, stop_below=config.stop_below,
                         metric=config.metric or "accuracy",   # a regression's stages read "accuracy" as Pearson
                         min_epochs=schedule.epochs if config.epochs is None else None,
                         copies_per_epoch=config.copies_per_epoch if config.copies_per_epoch is not None
                         else schedule.copies_per_epoch,
                         select=schedule.select, eval_every=config.eval_every,
                         evals_per_epoch=schedule.evals_per_epoch, average=schedule.average,
                         taught_by=schedule.taught_by)


def transfer_request(config: RunConfig, copies: int | None = None) -> TransferRequest:
    """The transfer data the run's stages learn from: its recipe's augmented copies (``copies`` where a student's
    ``--augment`` says) and its ``--transfer-text``."""
    schedule = get_schedule(config.recipe)
    return TransferRequest(copies=schedule.copies if copies is None else copies, texts=config.transfer_text,
                           teacher_dir=resolve_teacher_dir(config.teacher), masked_lm=schedule.masked_lm)


def check_transform(config: RunConfig, method: Transform, options: Any) -> None:
    """Every check of a transform's run that needs no data (the method's own; its --target is checked with the
    pipeline: :func:`compress.registry.pipeline.resolve`), so a pipeline fails before its first step trains."""
    method.check(config, options)


def transform_run(config: RunConfig, method: Transform, options: Any, show_progress: bool = True,
                  pipeline: str | None = None) -> RunResult:
    """Apply ``method`` to ``config.target`` (the teacher or a run directory) and write its run directory;
    ``pipeline``, when this run is a step of one, is recorded in config.json."""
    check_transform(config, method, options)
    with claimed_source(config, show_progress) as (config, source, out):
        start = time.perf_counter()
        with run_directory(out) as tmp:
            log_path = tmp / "log.jsonl"
            with open(log_path, "w") as log:
                tokenizer = load_tokenizer(str(source.directory))
                # a recovery trains on the transfer data too, made when its stage first asks
                data = with_transfer(source.data, source.task, transfer_request(config), tokenizer, show_progress)
                settings, device = train_settings(config), resolve_device(config.device)
                context = Context(data=data, task=source.task, tokenizer=tokenizer,
                                  device=config.device, speed_device=config.speed_device,
                                  train=settings, threads=config.threads,
                                  workdir=tmp / ".work", log=log, show_progress=show_progress, name=source.name,
                                  teacher_answers=teacher_answers(source, data, device)
                                  if settings.taught_by == "teacher" else None)
                context.workdir.mkdir()
                made = method.apply(source.model.to(device).eval(), options, context)
            if made.recipe is not None and settings.taught_by == "teacher" and context.teacher_answers is None:
                notice("the recipe teaches a recovery with the fine-tuned teacher's answers, but the teacher is not at "
                       "hand (its cache entry is gone) or this model numbers its tokens otherwise (prune-vocab): this "
                       "recovery learned its soft targets from the model it was given.")
            if made.recipe is None:
                log_path.unlink()  # a transform that never trains (quantization) keeps no training log
            record = write_run(tmp, out, config, method, options, source, made, seconds=time.perf_counter() - start,
                               pipeline=pipeline, source_tokenizer=context.tokenizer)
            shutil.rmtree(context.workdir)
    return RunResult(out, record)


def measure_models(config: RunConfig, data: TokenizedTask, seq_len: int | None = None,
                   **models: Any) -> dict[str, Speed]:
    """Each model's speed (an Encoder or a predictor), measured one after another in this process on the same
    inputs, at ``seq_len`` tokens (default: the test split's 95th percentile)."""
    speed = SpeedConfig(threads=config.threads or default_threads(), device=config.speed_device)
    seq_len = seq_len or speed_seq_len(data)
    measured = {name: measure_speed(TorchPredictor(model, device=speed.device) if isinstance(model, Encoder) else model,
                                    data, seq_len, speed) for name, model in models.items()}
    for model in models.values():
        if isinstance(model, Encoder):
            model.cpu()   # saved and compared from the CPU, wherever it was timed
    return measured


def write_run(tmp: Path, out: Path, config: RunConfig, method: Method, options: Any, source: Source,
              made: Transformed, *, seconds: float, pipeline: str | None,
              more_config: SavedConfig | None = None, source_tokenizer: Any = None) -> RunRecord:
    """Evaluate ``made.model`` on the test split, time it against ``source.model`` in this process, save it, and
    write config.json, metrics.json, manifest.json, report.md and the method's own files into ``tmp`` (the
    run ``out``'s temporary directory). ``source`` is what the model was made from: the fine-tuned teacher
    for a student method, else the transform's input; ``source_tokenizer`` its tokenizer, when the caller has it
    loaded already."""
    started = time.perf_counter()
    data = source.data if made.tokenizer is None else \
        tokenize_task(source.task, made.tokenizer, max_length=source.data.max_length)
    model = made.model
    predictions = made.test or Predictions.of(*predict(model, data.eval_batches("test"),
                                                       next(model.parameters()).device))
    test = predictions.metrics()
    # Dev too, so what a search selects on (dev) is in every record, and test stays the verdict.
    dev = made.dev or Predictions.of(*predict(model, data.eval_batches("dev"), next(model.parameters()).device))
    dev_accuracy = dev.metrics().accuracy
    select = _select_predictions(model, data)
    if isinstance(model, Encoder):
        model.cpu()
    evaluated = time.perf_counter()
    # Each on its own inputs (a pruned vocabulary numbers the tokens differently) of the same length.
    speed = made.speed or {}
    if "student" not in speed:
        seq_len = speed_seq_len(source.data)
        speed = measure_models(config, source.data, seq_len, source=source.model.cpu()) | \
            measure_models(config, data, seq_len, student=model)
    timed = time.perf_counter()
    if made.artefact is not None:
        model_dir = tmp / "model"
        made.artefact.directory.rename(model_dir)
        for name in TOKENIZER_FILES:
            if (source.directory / name).is_file():
                shutil.copy(source.directory / name, model_dir / name)
        student = model_record(source.model, test, data.max_length, artefact_bytes(model_dir),
                               layout=f"{made.artefact.backend}-{made.artefact.dtype}", backend=made.artefact.backend,
                               dtype=made.artefact.dtype, config=source.model.config.to_dict(),
                               dev_accuracy=dev_accuracy)
    else:
        tokenizer = made.tokenizer or source_tokenizer or load_tokenizer(str(source.directory))
        layout = save_encoder(model, tmp / "student", tokenizer=tokenizer, label_names=source.task.label_names)
        student = model_record(model, test, data.max_length, weights_bytes(tmp / "student"), layout=layout,
                               config=model.config.to_dict(), dev_accuracy=dev_accuracy)
    for name, content in made.files.items():
        (tmp / name).write_bytes(content)
    predictions_sha256 = save_predictions(predictions, tmp)
    dev_sha256 = save_predictions(dev, tmp, "dev")
    select_sha256 = save_predictions(select, tmp, SELECT) if select is not None else None
    teacher_sha256 = {split: save_predictions(kept, tmp, f"teacher_{split}")
                      for split, kept in source.teacher_outputs.items()}
    metric = resolve_metric(config.metric, regression=source.task.regression, classes=source.task.num_labels)
    teacher, entry = source.teacher, source.entry
    trained = method.kind == "student"   # a student is measured against its teacher, not "a source"
    speed = {"teacher" if trained else "source": speed["source"], "student": speed["student"]} | \
        ({"teacher": speed["source"]} if source.kind == "teacher" else {})
    record = RunRecord(
        method=method.name, kind=method.run_kind, seconds=round(seconds, 1), seq_len=data.max_length,
        dataset=dataset_record(source.task), teacher=teacher, student=student,
        source=None if trained else SourceRecord(source.kind, str(source.directory), source.parent, entry.params,
                                                 entry.size_bytes, entry.accuracy, entry.macro_f1, entry.scores),
        retention=retention(teacher, student, config.metric), ratios=ratios(teacher, student), stages=made.stages,
        chain=[*source.chain, ChainStep.of(str(Step(method.name, config.options)), out, student, speed["student"])],
        speed=speed, details=made.details, predictions=predictions_sha256, dev_predictions=dev_sha256,
        select_predictions=select_sha256, metric=config.metric,
        model_files=model_files(model_dir_of(tmp)),
        teacher_predictions=teacher_sha256 or None,
        retentions=run_retentions({"test": predictions, "dev": dev}, source.teacher_outputs, metric) or None,
        phases=run_phases(seconds, made.stages, evaluated - started, timed - evaluated, time.perf_counter() - timed),
    )
    full_config = SavedConfig(run=asdict(config), options=asdict(options),
                              teacher_weights=teacher_weights(config.teacher))
    if made.recipe is not None:
        full_config["recipe"] = made.recipe
    if not trained:
        full_config |= {"source": asdict(record.source), "parent": source.parent, "teacher": source.teacher_name}
    if source.finetuned is not None:   # where a later step finds the teacher (runs.source.recorded_teacher)
        full_config["teacher_dir"] = str(source.finetuned.directory)
    full_config |= (more_config or {}) | {"max_length": data.max_length}
    if pipeline:
        full_config["pipeline"] = pipeline
    write_run_record(tmp, record, full_config, seed=config.seed)
    return record


def _select_predictions(model: Any, data: TokenizedTask) -> Predictions | None:
    """The model's predictions on the training examples its task holds out for a search to select on (None where
    it holds none out): an encoder in batches, a quantized model a sentence at a time, as it is scored on test."""
    if SELECT not in data.splits:
        return None
    if isinstance(model, Encoder):
        return Predictions.of(*predict(model, data.eval_batches(SELECT), next(model.parameters()).device))
    return Predictions.of(*predict_batches(model, data.dataloader(SELECT, batch_size=1)))


def run_phases(made_s: float, stages: list[StageRecord], evaluating_s: float, timing_s: float,
               saving_s: float) -> dict[str, float]:
    """A run's seconds by phase: its stages' training, the rest of the ``made_s`` its method took, evaluation,
    timing and saving (metrics.json's ``phases``)."""
    training = sum(stage.get("seconds", 0.0) for stage in stages)
    return {name: round(seconds, 1) for name, seconds in (
        ("training", training), ("making", max(0.0, made_s - training)), ("evaluating", evaluating_s),
        ("timing", timing_s), ("saving", saving_s))}


def write_run_record(directory: Path, record: RunRecord, config: SavedConfig, *, seed: int) -> None:
    """config.json, metrics.json, manifest.json and report.md of a run directory."""
    (directory / "config.json").write_text(json.dumps(config, indent=2, default=str))
    (directory / "metrics.json").write_text(json.dumps(record.to_dict(), indent=2))
    machine = manifest(threads=record.speed["student"]["threads"], seed=seed,
                       split_fingerprint=record.dataset.fingerprint)
    (directory / "manifest.json").write_text(json.dumps(machine, indent=2))
    write_report(directory / "report.md", record, config)
