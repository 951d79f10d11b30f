"""`compress search`: the fastest (or smallest) model that keeps a share of the teacher's score."""

from __future__ import annotations

import shlex
import sys

import typer
from rich.markup import escape

from compress.cli.common import (
    ADDRESS,
    BATCH_SHAPE,
    COPIES_PER_EPOCH,
    CPUS_PER_RUN,
    DEVICE,
    EXECUTOR,
    GPUS_PER_RUN,
    LABEL_COLUMN,
    METRIC,
    PRECISION,
    RECIPE,
    REPEATS,
    SEQ_LEN,
    TASK,
    TEACHER_BATCH_SIZE,
    TEACHER_EPOCHS,
    TEACHER_LAYER_DECAY,
    TEACHER_LR,
    TEXT_COLUMN,
    TEXT_PAIR_COLUMN,
    THREADS,
    console,
    err_console,
    parsed_seeds,
    print_json,
    teacher_finetune,
)
from compress.cli.compare import MAX_RETRIES
from compress.data.named import DEFAULT_DATASET
from compress.teachers.registry import DEFAULT_TEACHER


def search(
    minimize: str = typer.Option("latency", help="What to make smallest: latency (batch 1), throughput (batch 32, "
                                                 "as time per example) or size (bytes on disk)."),
    min_retention: float = typer.Option(0.97, help="The share of the teacher's score (in --metric) a model must "
                                                   "keep, in (0, 1]."),
    select_on: str = typer.Option("held-out", help="What the search selects on: held-out (training sentences held "
                                                   "out, which nothing trains or picks an epoch on) or dev."),
    selection_size: int | None = typer.Option(None, help="Training sentences held out to select on (default: twice "
                                                         "the dev split; stratified by label)."),
    budget: str = typer.Option("90m", help="Wall time the search may take, finals included: 90m, 1h30m, 5400s."),
    seeds: str = typer.Option("3", help="Seeds the finalists are trained with: 13,14,15, or a count N (the N seeds "
                                        "from 13 on); the search itself trains on the first."),
    methods: str | None = typer.Option(None, help="Search only these methods, e.g. distilbert,prune,int8 (default: "
                                                  "every method this CPU runs well)."),
    space: str | None = typer.Option(None, help="A space file (TOML or JSON): the methods to search and the values "
                                                "of their options, e.g. [prune] keep_heads = [0.5, 0.25]."),
    against: str = typer.Option("distilbert+prune+int8", help="The pipeline the finals pair the chosen model with "
                                                              "('none': no reference)."),
    finalists: int = typer.Option(2, help="Candidates that met the bar taken to the finals, best first."),
    teacher: str = typer.Option(DEFAULT_TEACHER, "--teacher", "-t", help="Teacher alias, checkpoint directory or "
                                                                         "hub id."),
    dataset: str = typer.Option(DEFAULT_DATASET, "--dataset", "-d", help="Dataset name or file."),
    text_column: str | None = TEXT_COLUMN,
    text_pair_column: str | None = TEXT_PAIR_COLUMN,
    label_column: str | None = LABEL_COLUMN,
    task: str = TASK,
    dedupe: bool = typer.Option(False, help="Drop the dev and test rows whose text also occurs in the training split."),
    metric: str | None = METRIC,
    out: str | None = typer.Option(None, help="Search directory (default: runs/search-TEACHER-DATASET); also a "
                                              "comparison directory, so compress compare --out reuses its runs."),
    batch_size: int = typer.Option(32, help="Training batch size."),
    threads: int | None = THREADS,
    seq_len: int | None = SEQ_LEN,
    repeats: int = REPEATS,
    batch_shape: str = BATCH_SHAPE,
    teacher_epochs: int | None = TEACHER_EPOCHS,
    teacher_lr: float | None = TEACHER_LR,
    teacher_batch_size: int | None = TEACHER_BATCH_SIZE,
    teacher_layer_decay: float | None = TEACHER_LAYER_DECAY,
    device: str = DEVICE,
    precision: str = PRECISION,
    recipe: str = RECIPE,
    copies_per_epoch: int | None = COPIES_PER_EPOCH,
    executor: str = EXECUTOR,
    address: str | None = ADDRESS,
    cpus_per_run: float = CPUS_PER_RUN,
    gpus_per_run: float = GPUS_PER_RUN,
    max_retries: int = MAX_RETRIES,
    as_json: bool = typer.Option(False, "--json", help="Print search.json instead of a summary."),
) -> None:
    """Find the fastest (or smallest) model that keeps --min-retention of the teacher's score: candidates across
    every method and pipeline, timed untrained, trained in order of the objective (bisecting after a miss) until two
    meet the bar on held-out training sentences, then the best with every seed, judged on test against a
    reference."""
    from compress.registry.pipeline import split_list
    from compress.runs.executors import Executor
    from compress.quantities import parse_duration
    from compress.search.search import SearchConfig
    from compress.search.search import search as run_search

    config = SearchConfig(minimize=minimize, min_retention=min_retention, select_on=select_on,
                          selection_size=selection_size, budget_s=parse_duration(budget, "--budget", bare="m"),
                          seeds=parsed_seeds(seeds), methods=split_list(methods) if methods else None, space=space,
                          against=None if against.lower() == "none" else against, finalists=finalists,
                          teacher=teacher, dataset=dataset, text_column=text_column,
                          text_pair_column=text_pair_column, label_column=label_column, task=task, dedupe=dedupe,
                          metric=metric, out=out, batch_size=batch_size,
                          threads=threads, seq_len=seq_len, repeats=repeats, batch_shape=batch_shape, device=device,
                          precision=precision, recipe=recipe, copies_per_epoch=copies_per_epoch,
                          teacher_finetune=teacher_finetune(teacher_epochs, teacher_lr, teacher_batch_size,
                                                           teacher_layer_decay),
                          executor=Executor(executor, address, cpus_per_run, gpus_per_run, max_retries),
                          command=shlex.join(["compress", *sys.argv[1:]]))
    directory, record = run_search(config, progress=lambda m: err_console.print(f"[dim]{escape(m)}[/]"),
                                   show_progress=not as_json)
    if as_json:
        print_json(record.to_dict())
        return
    from compress.search.report import summary_lines

    for line in summary_lines(record):
        console.print(escape(line))
    console.print(f"search: {escape(str(directory / 'search.html'))} (and search.md, search.json, comparison.html)")
    if record.chosen_run:
        from compress.inference.export_plan import export_command

        console.print(f"export the chosen model: {escape(export_command(record.chosen_run))}", highlight=False,
                      soft_wrap=True)
