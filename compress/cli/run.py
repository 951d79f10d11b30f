"""`compress run METHOD[+TRANSFORM...]`: train a student and/or transform a model, writing a run directory per step.

The methods' own flags (``--embedding-size``, ``--layers``, ``--backend``, ...) are made from their
options dataclasses (see :mod:`compress.registry`); ``--set KEY=VALUE`` reaches every option.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from compress.cli.common import (
    COPIES_PER_EPOCH,
    DECAY,
    LABEL_COLUMN,
    METRIC,
    PRECISION,
    RECIPE,
    SPEED_DEVICE,
    TASK,
    TEACHER_LAYER_DECAY,
    TEXT_COLUMN,
    TEXT_PAIR_COLUMN,
    TRANSFER_TEXT,
    WARMUP,
    console,
    print_json,
    teacher_finetune,
)
from compress.cli.method_flags import SET_OPTION, given_options, with_method_flags
from compress.data.named import DEFAULT_DATASET
from compress.registry import get_method, names
from compress.reports.records import RunRecord, score_text
from compress.teachers.registry import DEFAULT_TEACHER
from compress.train_config import DEFAULT_EVERY, DEFAULT_SEED

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject


def _run(*, method: str, teacher: str, dataset: str, text_column: str | None, text_pair_column: str | None,
         label_column: str | None, task: str, dedupe: bool, epochs: int | None, batch_size: int, lr: float | None, seed: int,
         layer_map: str | None, patience: int | None, stop_below: float | None, out: str | None, overwrite: bool,
         device: str,
         teacher_epochs: int | None, teacher_lr: float | None, teacher_batch_size: int | None,
         teacher_layer_decay: float | None, target: str,
         then: list[str] | None, set_: list[str] | None, threads: int | None, as_json: bool, precision: str,
         checkpoint_every: int, speed_device: str, metric: str | None, recipe: str, transfer_text: str | None,
         warmup: float | None, decay: str | None, copies_per_epoch: int | None, eval_every: int | None,
         **flags: Any) -> None:
    """Train a student or transform a model, or both in a pipeline; the command's help (:func:`_help`) names the
    methods from the registry."""
    from compress.registry.pipeline import resolve

    options = given_options(flags, set_)
    # a bad step, order or option: refused before torch loads
    steps = resolve(method, list(then or []), options, target)

    from compress.runs.config import RunConfig, check_copies_chosen

    config = RunConfig(   # its own values checked: refused before torch loads too
        method=method, teacher=teacher, dataset=dataset, text_column=text_column,
        text_pair_column=text_pair_column, label_column=label_column, task=task, dedupe=dedupe, options=options, epochs=epochs,
        lr=lr, batch_size=batch_size, seed=seed, layer_map=layer_map, patience=patience, stop_below=stop_below,
        device=device, out=out,
        overwrite=overwrite, target=target, then=list(then or []), threads=threads, precision=precision,
        checkpoint_every=checkpoint_every, speed_device=speed_device, metric=metric, recipe=recipe,
        transfer_text=transfer_text, warmup=warmup, decay=decay, copies_per_epoch=copies_per_epoch,
        eval_every=eval_every,
        teacher_finetune=teacher_finetune(teacher_epochs, teacher_lr, teacher_batch_size, teacher_layer_decay),
    )
    check_copies_chosen(recipe, copies_per_epoch, [(step.method, step.options) for step in steps])
    from compress.runs.pipeline import run as run_method

    result = run_method(config, show_progress=not as_json)
    if result.record is None:  # another rank of a data-parallel run: rank 0 reports
        return
    if as_json:
        print_json(_printed(result))
        return
    for r in result.steps():
        _summary(r.record, r.directory)


def _printed(result) -> JSONObject:
    printed = {**result.record.to_dict(), "directory": str(result.directory)}
    if result.chained:
        printed["chained"] = _printed(result.chained)
    return printed


def _settings() -> list[tuple[str, Any, Any]]:
    O = typer.Option  # noqa: N806, E741
    # Help text is rich markup: \\[ shows a bracket ([sharing=...] alone would be read as a style).
    common: list[tuple[str, Any, Any]] = [
        ("method", str, typer.Argument(..., help=f"One of {', '.join(names())}, or a pipeline: "
                                       "distilbert+int8, albert\\[sharing=attention,embedding_size=256]+int8.")),
        ("teacher", str, O(DEFAULT_TEACHER, "--teacher", "-t", help="Teacher alias, checkpoint directory or hub id.")),
        ("dataset", str, O(DEFAULT_DATASET, "--dataset", "-d", help="Dataset name, file, or hf:NAME[:CONFIG].")),
        ("text_column", str | None, TEXT_COLUMN),
        ("text_pair_column", str | None, TEXT_PAIR_COLUMN),
        ("label_column", str | None, LABEL_COLUMN),
        ("task", str, TASK),
        ("dedupe", bool, O(False, help="Drop the dev and test rows whose text also occurs in the training split.")),
        ("epochs", int | None, O(None, help="Epochs of every training stage (default: the method's).")),
        ("batch_size", int, O(32, help="Training batch size.")),
        ("lr", float | None, O(None, help="Learning rate of every stage (default: the method's).")),
        ("seed", int, O(DEFAULT_SEED, help="Seed: same seed, same metrics.")),
        ("layer_map", str | None, O(None, help="Student-teacher layer pairing: uniform, last, every_other, or "
                                             "teacher layers like 2,4,6.")),
        ("recipe", str, RECIPE),
        ("transfer_text", str | None, TRANSFER_TEXT),
        ("patience", int | None, O(None, help="Stop a stage after this many epochs without a better dev score "
                                             "(default: the recipe's).")),
        ("copies_per_epoch", int | None, COPIES_PER_EPOCH),
        ("eval_every", int | None, O(None, help="Training steps between dev evaluations inside an epoch, besides "
                                               "every epoch's end (default: the recipe's).")),
        ("warmup", float | None, WARMUP),
        ("decay", str | None, DECAY),
        ("stop_below", float | None, O(None, help="Stop a stage once its dev accuracy cannot reach this (0 to 1) in "
                                                 "the epochs left (what compress search sets); the record says so.")),
        ("out", str | None, O(None, help="Run directory (default: runs/METHOD-DATASET-TIME); later pipeline "
                                        "steps write OUT-STEP.")),
        ("overwrite", bool, O(False, help="Replace an existing --out directory.")),
        ("device", str, O("auto", help="Where it trains: auto, cpu or cuda.")),
        ("speed_device", str, SPEED_DEVICE),
        ("precision", str, PRECISION),
        ("metric", str | None, METRIC),
        ("checkpoint_every", int, O(DEFAULT_EVERY, help="Steps between checkpoints of unfinished training, besides "
                                                     "every epoch end (0: epoch ends only); rerunning an "
                                                     "interrupted command continues from the last one.")),
        ("teacher_epochs", int | None, O(None, help="Epochs of teacher fine-tuning (default 3).")),
        ("teacher_lr", float | None, O(None, help="Learning rate of teacher fine-tuning.")),
        ("teacher_batch_size", int | None, O(None, help="Batch size of teacher fine-tuning (default 32).")),
        ("teacher_layer_decay", float | None, TEACHER_LAYER_DECAY),
        ("target", str, O("teacher", help="What a transform (int8, bf16, onnx, ...) takes when it is the first "
                                         "step: 'teacher' or an earlier run directory.")),
        ("then", list[str] | None, O(None, help="A transform to apply to the previous step's model (repeatable): "
                                               "int8, bf16, ...")),
        SET_OPTION,
        ("threads", int | None, O(None, help="Threads speed is measured with (default: CPUs, at most 4).")),
        ("as_json", bool, O(False, "--json", help="Print metrics.json instead of a summary.")),
    ]
    return common


def _help() -> str:
    """`compress run --help`'s first paragraph; the methods come from the registry, so none is left out."""
    return (f"Train a student ({', '.join(names('student'))}) or transform a model ({', '.join(names('transform'))}), "
            "or both in a pipeline (distilbert+int8, or --then int8), evaluate against the fine-tuned teacher, and "
            "write a run directory per step.")


run = with_method_flags(_run, _settings())
run.__doc__ = _help()


def _summary(record: RunRecord, directory) -> None:
    """The run in a few lines: the numbers every run has, then the method's own lines (its ``summary_lines``)."""
    from compress.reports.run_record import retention_summary

    t, s = record.teacher, record.student
    what = f"{s.dtype} on {s.backend}" if record.quantized else f"{s.params / 1e6:.1f}M params"
    console.print(
        f"[bold]{escape(record.method)}[/]: teacher {t.params / 1e6:.1f}M params, {t.size_bytes / 1e6:.1f} MB, test "
        f"{score_text(t)}; student {what}, {s.size_bytes / 1e6:.1f} MB "
        f"({record.ratios['size_bytes']:.2f}x smaller), test {score_text(s)}; "
        f"retention [bold]{escape(retention_summary(record))}[/]"
    )
    if record.details is not None:
        for line in get_method(record.method).summary_lines(record):
            console.print(f"  {escape(line)}")
    console.print(f"run directory: {escape(str(directory))} (report.md, metrics.json)")
