"""`compress compare`: every method on one teacher and task, then one comparison measured in one process.

Layout of a comparison directory (default ``runs/compare-TEACHER-DATASET``)::

    .compress.json        the marker that makes it ours (compress.ownership): what compare wrote here
    runs/seed-S/NAME/     one ordinary run directory per method and seed, and one per step of a pipeline:
                          runs/seed-13/distilbert, then runs/seed-13/distilbert+int8 (which records its
                          parent); NAME is the pipeline text, or a slug of it and a digest when the text
                          holds characters a file name should not (options: albert[sharing=ffn]). A run
                          whose result does not depend on the seed (int8 of the teacher: nothing trained,
                          nothing sampled) is made once, under the first seed.
    comparison.json       the numbers (a compress.reports.records.Comparison)
    comparison.md/.html   the table, the plots and what each method changed
    *.png                 the plots

A run whose directory already holds a complete run made with the same configuration (and, for a
later step of a pipeline, from its parent as it is now) is reused, so an interrupted comparison
resumes where it stopped and a repeated one trains nothing; a step shared by pipelines runs once
(the ``distilbert`` of ``distilbert+int8`` is the ``distilbert`` row).
Every run keeps its test predictions, so the comparison's statistics are paired: each method's accuracy and
retention come with a 95% interval over the test sentences (one bootstrap) and the seeds (Student's t)
(:mod:`compress.stats`), and so does the difference between every two methods.
Speed is always measured afresh at the end: the teacher and every method (its first seed's model) in this
process, on the same inputs and threads, in independent passes (:func:`compress.bench.speed.timed_passes`): each
pass loads every model afresh, times rounds of batch-1 latency (every model once a round, in an order new each
pass) and then each model's large batch. A row's latency, p90, throughput and speed-up all come from these passes:
the latency is the median of its rounds, and its speed-up the median of the passes' speed-ups (each the teacher's
median round over the model's, in that pass), so the two columns agree up to how the machine moved between passes;
the lowest and highest pass's speed-up are its run-to-run spread, and a verdict calls one model faster than another
only when it is faster in every pass by a margin (compress.reports.verdicts). ONNX Runtime's workers do not
spin-wait between calls here, so one model's runtime does not take the cores of the next
(``benchmarks/contamination.py`` measures each model alone against inside the passes).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch

from compress.bench.contention import OtherLoad
from compress.bench.inputs import check_seq_len, speed_seq_len
from compress.bench.machine import device_name, manifest
from compress.bench.measurement import Predictor
from compress.bench.speed import PASSES, ROUND_WARMUP, ROUNDS, PassTimings, SpeedConfig, batch_calls, timed_passes
from compress.bench.timing import default_threads
from compress.data.batching import TokenizedTask
from compress.data.load import check_dataset, dataset_args, load_task
from compress.data.splits import SELECT
from compress.data.task import TaskData
from compress.distill.teacher_logits import teacher_logits
from compress.errors import CompressError
from compress.metrics import Metrics
from compress.models.accounting import flops_per_sequence
from compress.models.checkpoints import load_encoder
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.ownership import foreign, mark_comparison
from compress.paths import locked
from compress.predictions import Predictions, load_predictions
from compress.quantize.artefacts import load_artefact
from compress.quantize.predictors import RenumberedPredictor, TorchPredictor, renumbering
from compress.registry import StudentMethod, Transform, format_value, get_method
from compress.reports.comparison import write_comparison
from compress.reports.records import (
    ChainStep,
    ComparedModel,
    ComparedTeacher,
    Comparison,
    DatasetRecord,
    IntervalRecord,
    RunRecord,
    RunSettings,
    Section,
    SeedResult,
    read_run_record,
)
from compress.reports.run_record import explanation
from compress.runs.compare_plan import CompareConfig, PlannedRun, SeededRun, plan_runs, plan_seeds, run_config_of
from compress.runs.config import RunConfig, result_settings
from compress.runs.distillation import check_student
from compress.runs.executors import run_all
from compress.runs.paired import (
    SETTINGS,
    differences,
    method_evidence,
    method_intervals,
    score_interval,
    teacher_evidence,
    teacher_interval,
)
from compress.runs.pipeline import check_student_inputs, run
from compress.runs.store import restore, run_key
from compress.runs.writer import check_transform
from compress.stats import Scored, pass_speedup, ratio_quartiles
from compress.task_metrics import TaskMetric, also_reported, resolve_metric
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.teachers.registry import load_tokenizer, saved_tokenizer, teacher_config, teacher_weights
from compress.training import run_precision


def _config_key(run: RunSettings) -> str:
    return json.dumps(result_settings(run), sort_keys=True, default=str)


def _as_recorded(value: Any) -> Any:
    """``value`` as config.json holds it after the JSON round trip (paths and other objects as strings)."""
    return json.loads(json.dumps(value, default=str))


def completed_run(directory: Path, config: RunConfig, split_fingerprint: str,
                  parent_chain: list[ChainStep] | None = None) -> RunRecord | None:
    """The record of a complete run in ``directory`` made with ``config`` on the same data split (and,
    for a later step of a pipeline, from the parent run as it is now: ``parent_chain``), or None."""
    try:
        full = json.loads((directory / "config.json").read_text())
        recorded = full["run"]
        record = read_run_record(directory)
    except (OSError, ValueError, KeyError, CompressError):
        return None
    same = _config_key(recorded) == _config_key(_as_recorded(asdict(config)))
    method = get_method(config.method)
    if "options" in full:  # every option as the run resolved it: a default changed since then means run again
        options = method.make_options(config.options)
        same = same and method.as_recorded(full["options"]) == _as_recorded(method.as_recorded(asdict(options)))
        if "recipe" in full and isinstance(method, StudentMethod):  # and so does a recipe's (its epochs, its lr)
            followed = method.recipe(options).for_run(config.epochs, config.lr, config.layer_map)
            recorded_recipe, expected = full["recipe"], _as_recorded(followed.to_dict())
            for part in method.prepared_parts:   # set by the run from its data: not known before it
                recorded_recipe.pop(part, None)
                expected.pop(part, None)
            same = same and recorded_recipe == expected
    if parent_chain is not None and record.chain[:-1] != parent_chain:
        return None   # the parent was run again since this step transformed it
    made_from = full.get("teacher_weights")   # absent in a run made before runs recorded it: judged as before
    if made_from is not None and made_from != teacher_weights(config.teacher):
        return None   # another teacher at the same path
    if stopped_by_bar(record) and recorded.get("stop_below") != config.stop_below:
        return None   # cut short by a bar this run does not set: its model is not what training to the end gives
    try:
        load_predictions(directory, record.predictions)
    except CompressError:
        return None   # made before runs kept their predictions, or they changed since
    return record if same and record.dataset.fingerprint == split_fingerprint else None


def stopped_by_bar(record: RunRecord) -> bool:
    """Whether a stage of the run stopped because its dev accuracy could not reach its bar (``stop_below``)."""
    return any(stage.get("stop_reason") == "bar" for stage in record.stages)


def run_dir_name(text: str) -> str:
    """The directory name of a run inside a comparison's ``runs/``: the pipeline text where it is a plain
    name (``distilbert+int8``), else a slug of it plus a digest of the whole text, so an option value such
    as ``init_from=../../x`` can never name a path: ``albert-init_from=..-..-x-1a2b3c4d``."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9_+=,.-]", "-", text)).strip("-.")[:80]
    if slug == text:
        return text
    return f"{slug or 'run'}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def run_dir_of(out: Path, name: str, seed: int) -> Path:
    """``out/runs/seed-S/DIR`` for the run ``name`` with ``seed``, checked to resolve inside ``out/runs/seed-S``,
    itself inside ``out/runs`` (a symbolic link planted there cannot send a run elsewhere)."""
    runs = out / "runs" / f"seed-{seed}"
    run_dir = runs / run_dir_name(name)
    if runs.resolve().parent != (out / "runs").resolve() or run_dir.resolve().parent != runs.resolve():
        raise CompressError(f"the run directory of {name!r} would resolve to {run_dir.resolve()}, outside "
                            f"{(out / 'runs').resolve()}; remove that link or choose another --out.")
    return run_dir


def check_out(out: Path, planned: list[SeededRun]) -> None:
    """Refuse, before any work, an ``out`` compress may not write in: a file, an existing directory that is
    not a comparison of ours, or one whose run directories hold something compress did not write."""
    if out.exists() and not out.is_dir():
        raise CompressError(f"--out {out} is a file, not a directory; choose another --out.")
    if out.is_dir() and any(out.iterdir()) and (reason := foreign(out, "comparison")) is not None:
        raise CompressError(f"--out {out.resolve()} is not a comparison compress wrote: it {reason}; choose a new "
                            "or empty directory.")
    for step in planned:
        run_dir = run_dir_of(out, step.planned.name, step.seed)
        if run_dir.is_dir() and any(run_dir.iterdir()) and (reason := foreign(run_dir, "run")) is not None:
            raise CompressError(f"{run_dir.resolve()} is not a run compress wrote: it {reason}; move it away or "
                                "choose another --out.")


def _run_or_reuse(config: CompareConfig, step: SeededRun, out: Path, parent: tuple[Path, RunRecord, bool] | None,
                  split_fingerprint: str, show_progress: bool = True) -> tuple[Path, RunRecord, bool]:
    """One run of the comparison, after its parent's: reused when its directory under ``out/runs`` already
    holds it as this configuration (and the parent as it is now) would make it, with its test predictions
    intact, or when the run store holds it from another directory or an earlier `compress run`
    (:mod:`compress.runs.store`), else trained (resuming an unfinished one from its checkpoint), which keeps it in
    the store (:func:`compress.runs.pipeline.run`). Returns its directory, its record and whether it was reused."""
    run_dir = run_dir_of(out, step.planned.name, step.seed)
    run_config = run_config_of(config, step.planned, str(parent[0]) if parent else "teacher", run_dir, step.seed)
    chain = parent[1].chain if parent else None
    record = completed_run(run_dir, run_config, split_fingerprint, chain)
    if record is not None:
        return run_dir, record, True
    storable = parent is None or parent[1].predictions is not None
    key = run_key(run_config, parent[1] if parent else None, split_fingerprint) if storable else None
    if key and restore(key, run_dir, run_config, parent[:2] if parent else None):
        record = completed_run(run_dir, run_config, split_fingerprint, chain)
        if record is not None:
            return run_dir, record, True
    return run_dir, run(run_config, show_progress).record, False   # run() keeps it in the store


def run_predictor(record: RunRecord, run_dir: Path, threads: int, teacher_vocab: dict[str, int],
                  device: str = "cpu") -> Predictor:
    """The run's model on ``device``, fed the teacher's token ids (renumbered when its vocabulary was pruned)."""
    model_dir = run_dir / ("model" if record.quantized else "student")
    predictor = load_artefact(model_dir, threads, device=device) if record.quantized else \
        TorchPredictor(load_encoder(model_dir).model, device=device)
    tokenizer = saved_tokenizer(model_dir)
    table = renumbering(teacher_vocab, tokenizer.get_vocab(), tokenizer.unk_token_id)
    return predictor if table is None else RenumberedPredictor(predictor, table)


@dataclass(frozen=True)
class CheckedComparison:
    """A comparison every check has passed (:func:`check_comparison`), ready to run."""

    config: CompareConfig
    planned: list[PlannedRun]
    runs: list[SeededRun]
    task: TaskData
    out: Path
    threads: int
    speed: SpeedConfig


def check_comparison(config: CompareConfig) -> CheckedComparison:
    """Every check of a comparison that needs no training, each failing in one sentence: its methods and
    pipelines, each step's own checks, its speed settings, dataset, metric and ``--out`` (its seeds: when it is
    made, :class:`~compress.runs.compare_plan.CompareConfig`)."""
    planned = plan_runs(config.methods)
    by_name = {step.name: step for step in planned}
    for step in planned:  # every step's own checks fail before any training (the teacher's fine-tuning included)
        if isinstance(step.method, StudentMethod):  # its shape, its recipe and its --init-from checkpoint
            check_student(run_config_of(config, step, "teacher"), step.method)
        if isinstance(step.method, Transform):  # a backend this CPU lacks
            check_transform(run_config_of(config, step, "teacher"), step.method, step.method.options(**step.options))
            parent = by_name.get(step.parent or "")
            if parent is not None:
                check_student_inputs([(s.method, s.method.options(**s.options)) for s in (parent, step)],
                                     config.teacher)
    threads = default_threads() if config.threads is None else config.threads
    # bad values fail here, before training
    speed_config = SpeedConfig(threads=threads, repeats=config.repeats, batch_repeats=batch_calls(config.repeats),
                               device=config.speed_device, batch_shape=config.batch_shape)
    check_seq_len(config.seq_len, teacher_config(config.teacher).max_positions)
    check_dataset(**dataset_args(config))
    out = Path(config.out or f"runs/compare-{Path(config.teacher).name}-{Path(config.dataset).stem}")
    runs = plan_seeds(planned, config.seeds)
    check_out(out, runs)
    task = load_task(**dataset_args(config)).hold_out(config.hold_out)
    resolve_metric(config.metric, regression=task.regression, classes=task.num_labels)   # fits the task: before work
    return CheckedComparison(config, planned, runs, task, out, threads, speed_config)


def compare(config: CompareConfig | CheckedComparison,
            progress: Callable[[str], None] | None = None) -> tuple[Path, Comparison]:
    """Run (or reuse) every method and pipeline once per seed, measure them all, write the comparison; return
    its directory and the comparison (``to_dict()`` is its comparison.json)."""
    say = progress or (lambda message: None)
    checked = config if isinstance(config, CheckedComparison) else check_comparison(config)
    out, runs = checked.out, checked.runs
    # One comparison at a time per directory: a second process fails at once instead of racing this one.
    with locked(out, wait=False, what=f"the comparison in {out}"):
        check_out(out, runs)  # again: another process may have written there meanwhile
        out.mkdir(parents=True, exist_ok=True)
        mark_comparison(out, ["runs"])
        return _compare(checked.config, checked.planned, runs, checked.task, out, checked.threads, checked.speed,
                        say)


def _compare(config: CompareConfig, planned: list[PlannedRun], seeded_runs: list[SeededRun], task, out: Path,
             threads: int, speed_config: SpeedConfig, say: Callable[[str], None]) -> tuple[Path, Comparison]:
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return clock[-1] - clock[-2]

    metric = resolve_metric(config.metric, regression=task.regression, classes=task.num_labels)
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, device=config.device,
                                 metric=config.metric)
    data = tokenized_for(finetuned, task)
    teacher_s = lap()

    made = run_all(seeded_runs, lambda step, parent, show_progress=True: _run_or_reuse(
        config, step, out, parent, task.fingerprint, show_progress), config.executor, say)
    reused = [name for name, (_, _, was_reused) in made.items() if was_reused]
    if reused:
        say(f"reused {len(reused)} finished run(s) in {out / 'runs'}: {', '.join(reused)}")
    # Each method's runs, first seed first (one run where the result does not depend on the seed).
    runs = {step.name: [(s.seed, *made[s.name][:2]) for s in seeded_runs if s.planned.name == step.name]
            for step in planned}

    seq_len = config.seq_len or speed_seq_len(data)
    say(f"measuring speed: teacher and {len(runs)} models, {threads} threads, {seq_len} tokens, {PASSES} passes")
    vocab = load_tokenizer(str(finetuned.directory)).get_vocab()

    def load() -> dict[str, Predictor]:   # every model afresh, for each pass
        device = config.speed_device
        return {"teacher": TorchPredictor(finetuned.load().model, device=device)} | {
            name: run_predictor(record, run_dir, threads, vocab, device)
            for name, [(_, run_dir, record), *_] in runs.items()}

    runs_s = lap()
    with OtherLoad() as load_meanwhile:
        timings = timed_passes(load, data, seq_len, speed_config)
    speed_s = lap()
    if load_meanwhile.busy:
        say(load_meanwhile.warning())
    teacher = finetuned.load().model

    say("intervals: bootstrap over the test sentences" + (" and the seeds" if len(config.seeds) > 1 else ""))
    # The teacher's test logits: computed once per teacher and tokenization (cached as distillation's are), and
    # the one source of the teacher row's accuracy and of every paired interval.
    teacher_predictions = Predictions.of(
        teacher_logits(teacher, data, "test", finetuned.record["fingerprint"], torch.device("cpu"),
                       show_progress=False), data.splits["test"]["labels"])
    kept = {name: [load_predictions(d, r.predictions) for _, d, r in made_runs] for name, made_runs in runs.items()}
    scored = {name: method_evidence(name, kept[name], teacher_predictions, metric) for name in runs}
    held_out = _held_out_retentions(runs, teacher, data, finetuned.record["fingerprint"], metric)
    teacher_record = runs[planned[0].name][0][2].teacher
    by_name = {step.name: step for step in planned}
    test_size = len(task.splits["test"])
    teacher_metrics = teacher_predictions.metrics()
    score = teacher_metrics.score(metric.name)
    accuracy = teacher_metrics.accuracy
    teacher_intervals = {m.name: teacher_interval(teacher_predictions, m) for m in shown_metrics(metric, task)}
    comparison = Comparison(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"), seq_len=seq_len, threads=threads,
        speed={k: v for k, v in asdict(speed_config).items() if k != "warmup"} | {   # the rounds' own warm-up
            "passes": PASSES, "rounds": ROUNDS, "round_warmup": ROUND_WARMUP, "other_cpus": load_meanwhile.cpus,
            "speedup": "passes"} | timings["teacher"].shape |
        ({"gpu": device_name(speed_config.device)} if speed_config.device == "cuda" else {}),
        dataset=DatasetRecord(task.name, task.fingerprint, {name: len(split) for name, split in task.splits.items()},
                              test_classes=None if task.regression else
                              {name: list(task.splits["test"]["label"]).count(i)
                               for i, name in enumerate(task.label_names)}),
        accuracy_standard_error=math.sqrt(accuracy * (1 - accuracy) / test_size) if test_size and accuracy else 0.0,
        manifest=manifest(threads=threads, seed=config.seeds[0], split_fingerprint=task.fingerprint),
        teacher=ComparedTeacher(
            name=config.teacher, params=teacher_record.params, params_by_component=teacher_record.params_by_component,
            size_bytes=teacher_record.size_bytes, accuracy=score, macro_f1=teacher_metrics.macro_f1,
            scores=shown_scores(teacher_metrics, metric, task), score_intervals=teacher_intervals,
            flops=flops_per_sequence(teacher.config, seq_len), **_timings(timings["teacher"], speed_config),
            accuracy_interval=teacher_intervals[metric.name]),
        methods=[replace(_with_shown_intervals(
                    _compared(step, by_name, runs, timings, speed_config, scored[step.name], teacher_predictions,
                              seq_len, task, [p.metrics() for p in kept[step.name]], score),
                    kept[step.name], teacher_predictions, teacher_metrics, metric, task),
                    held_out_retention=held_out.get(step.name), recipe=_recipe(step, runs))
                 for step in planned],
        metric=metric.name,
        reused=reused,
        command=config.command,
        seeds=list(config.seeds),
        intervals=SETTINGS,
        differences=differences({"teacher": teacher_evidence(teacher_predictions, metric), **scored}),
        precision=run_precision(config.precision, config.device),   # as every RunConfig here resolved it
        config={k: v for k, v in config.settings().items() if v is not None},
        config_file=config.config_file,
        time=comparison_time([record for name, (_, record, was_reused) in made.items() if not was_reused],
                             teacher_s=teacher_s, runs_s=runs_s, speed_s=speed_s, intervals_s=lap(),
                             total_s=clock[-1] - clock[0]),
    )
    write_comparison(comparison.to_dict(), out)
    return out, comparison


def comparison_time(made: list[RunRecord], **spent: float) -> dict[str, float]:
    """Where a comparison's time went (comparison.json's ``time``), in seconds: ``spent`` by this process's
    phases (the teacher's fine-tuning or cache, the runs, timing every model together, the intervals, the total),
    and the runs made now (not reused) by theirs, summed (their ``phases``: training, making, evaluating, timing,
    saving)."""
    phases: dict[str, float] = {}
    for record in made:
        for phase, seconds in (record.phases or {}).items():
            phases[f"runs_{phase}_s"] = phases.get(f"runs_{phase}_s", 0.0) + seconds
    return {name: round(seconds, 1) for name, seconds in (spent | phases).items()} | {"runs_made": len(made)}


class _Timings(TypedDict):
    """A row's speed (ComparedMeasures' fields of it), as :func:`_timings` measures it."""

    latency_ms_p50: float
    latency_ms_p90: float
    throughput: float
    peak_memory_bytes: int
    latency_passes_ms: list[list[float]]
    batch_passes_ms: list[float]


def _timings(timing: PassTimings, config: SpeedConfig) -> _Timings:
    """A row's speed, all from its passes: batch-1 latency p50 (the median of its rounds), p90 (the slowest tenth
    of its timed calls), the rounds themselves, throughput at the large batch (its passes' median) and peak memory."""
    return {"latency_ms_p50": timing.latency_ms_p50, "latency_ms_p90": float(np.percentile(timing.calls_ms, 90)),
            "throughput": config.batch_size / (float(np.median(timing.batch_ms)) / 1000),
            "peak_memory_bytes": timing.peak_memory_bytes, "latency_passes_ms": timing.rounds_ms,
            "batch_passes_ms": timing.batch_ms}


def _label(step: PlannedRun) -> str:
    options = ", ".join(f"{k}={format_value(v)}" for k, v in step.options.items())
    return step.method.label + (f" [{options}]" if options else "")


def _compared(step: PlannedRun, planned: dict[str, PlannedRun], runs: dict[str, list[tuple[int, Path, RunRecord]]],
              timings: dict[str, PassTimings], speed_config: SpeedConfig, scored: Scored,
              teacher: Predictions, seq_len: int, task: TaskData, seed_metrics: list[Metrics],
              teacher_score: float) -> ComparedModel:
    """The comparison's row for one run: its model (its first seed's), its metric over its seeds with the
    intervals (and the other metrics shown, averaged over the seeds), its speed measured here, and the steps that
    made it; ``seed_metrics``: each seed's test metrics, ``teacher_score``: the teacher's of the metric."""
    _, run_dir, record = runs[step.name][0]
    student, timing, reference = record.student, timings[step.name], timings["teacher"]
    first = {name: made[0][1:] for name, made in runs.items()}
    labels = [_label(planned[name]) for name in step.steps]
    inputs = ["the teacher", *(f"its input, {name}" for name in step.steps[:-1])]
    sentences = [explanation(planned[name].method.name, ratios, against)
                 for name, ratios, against in zip(step.steps, _step_ratios(step, first), inputs)]
    accuracy, retention = method_intervals(scored, teacher)
    _, q1, q3 = ratio_quartiles(_flat(reference.rounds_ms), _flat(timing.rounds_ms))   # the rounds' spread
    speedup, speedup_passes = pass_speedup(reference.rounds_ms, timing.rounds_ms)
    name = scored.metric.name
    per_seed = [SeedResult(seed, str(d), m.score(name), m.macro_f1, m.score(name) / teacher_score)
                for (seed, d, _), m in zip(runs[step.name], seed_metrics, strict=True)]
    scores = [shown_scores(m, scored.metric, task) for m in seed_metrics]
    return ComparedModel(
        method=step.name, label=" → ".join(labels), run_dir=str(run_dir),
        kind="pipeline" if len(step.steps) > 1 else record.kind, steps=list(step.steps),
        backend=student.backend or "torch", dtype=student.dtype or "fp32", params=student.params,
        params_by_component=student.params_by_component, size_bytes=student.size_bytes,
        accuracy=accuracy["estimate"], macro_f1=_mean([r.macro_f1 for r in per_seed]),
        scores={name: float(np.mean([one[name] for one in scores])) for name in scores[0]},
        flops=flops_per_sequence(EncoderConfig.from_dict(student.config), seq_len),
        retention=retention["estimate"], **_timings(timing, speed_config),
        speedup=speedup, speedup_passes=speedup_passes,
        throughput_speedup=float(np.median(np.divide(reference.batch_ms, timing.batch_ms))),   # per pass, as latency
        explanation=sentences[0] if len(sentences) == 1 else
        " ".join(f"{label}: {sentence}" for label, sentence in zip(labels, sentences)),
        note=record.details.warning if record.details else None,
        runtime_note=record.details.runtime_note if record.details else None,
        sections=_sections(step, first),
        accuracy_interval=accuracy, retention_interval=retention, speedup_iqr=[q1, q3], per_seed=per_seed,
    )


def _held_out_retentions(runs: dict[str, list[tuple[int, Path, RunRecord]]], teacher: Encoder, data: TokenizedTask,
                         fingerprint: str, metric: TaskMetric) -> dict[str, IntervalRecord]:
    """Each row's retention on the training sentences held out (``--hold-out``), paired with the teacher's answers on
    them, over them and the seeds; none where nothing was held out or a row's runs kept no answers there."""
    if SELECT not in data.splits:
        return {}
    answers = Predictions.of(teacher_logits(teacher, data, SELECT, fingerprint, torch.device("cpu"),
                                            show_progress=False), data.splits[SELECT]["labels"])
    found = {}
    for name, made in runs.items():
        if all(record.select_predictions for _, _, record in made):
            kept = [load_predictions(d, record.select_predictions, SELECT) for _, d, record in made]
            found[name] = method_intervals(method_evidence(name, kept, answers, metric), answers)[1]
    return found


def _recipe(step: PlannedRun, runs: dict[str, list[tuple[int, Path, RunRecord]]]) -> str | None:
    """The recipe a row's training followed (its own step's or an earlier one's), or None where none trained."""
    for name in reversed(step.steps):
        _, run_dir, record = runs[name][0]
        if record.stages:
            return json.loads((run_dir / "config.json").read_text())["run"].get("recipe")
    return None


def shown_metrics(metric: TaskMetric, task: TaskData) -> tuple[TaskMetric, ...]:
    """The comparison's metric and those the papers print beside it (:func:`compress.task_metrics.also_reported`)."""
    return metric, *also_reported(metric, task.regression, task.num_labels)


def shown_scores(metrics: Metrics, metric: TaskMetric, task: TaskData) -> dict[str, float]:
    return {m.name: metrics.score(m.name) for m in shown_metrics(metric, task)}


def _with_shown_intervals(row: ComparedModel, runs: list[Predictions], teacher: Predictions,
                          teacher_metrics: Metrics, metric: TaskMetric, task: TaskData) -> ComparedModel:
    """``row`` with its intervals of every metric shown, its score's and its retention's: the comparison's own metric's
    as the row has them, each other bootstrapped the same way; no retention where the teacher's score is not above 0
    (a Matthews of 0: a teacher that always gives one answer)."""
    scores = {metric.name: row.accuracy_interval} if row.accuracy_interval else {}
    retentions = {metric.name: row.retention_interval} if row.retention_interval else {}
    for other in also_reported(metric, task.regression, task.num_labels):
        evidence = method_evidence(row.method, runs, teacher, other)
        if teacher_metrics.score(other.name) > 0:
            scores[other.name], retentions[other.name] = method_intervals(evidence, teacher)
        else:
            scores[other.name] = score_interval(evidence)
    return replace(row, score_intervals=scores, retention_intervals=retentions)


def _mean(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(np.mean(values))


def _flat(rounds: list[list[float]]) -> list[float]:
    return [ms for one_pass in rounds for ms in one_pass]


def _step_ratios(step: PlannedRun, runs: dict[str, tuple[Path, RunRecord]]) -> list[dict[str, float]]:
    """What each step of ``step`` changed, as the model before it / the model after it (parameters, FLOPs,
    bytes): the first step against the teacher, each later one against the step before, so a pipeline's
    int8 step says what int8 did, not what the whole chain did."""
    cumulative = [runs[name][1].ratios for name in step.steps]
    return cumulative[:1] + [{k: after[k] / before[k] for k in after}
                             for before, after in zip(cumulative, cumulative[1:])]


def _sections(step: PlannedRun, runs: dict[str, tuple[Path, RunRecord]]) -> list[Section]:
    """The method's own part of the row (the per-layer picture of a pruned model): that of the last of the
    row's steps whose method has one, so ``distilbert+prune+int8`` shows what its prune step kept."""
    for name in reversed(step.steps):
        record = runs[name][1]
        if record.details is not None and (found := get_method(record.method).compared_sections(record)):
            return found
    return []
