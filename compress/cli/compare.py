"""`compress compare` (every method, one comparison) and `compress report DIR` (render it again)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from compress.cli.common import (
    ADDRESS,
    BATCH_SHAPE,
    COPIES_PER_EPOCH,
    CPUS_PER_RUN,
    DECAY,
    DEVICE,
    EXECUTOR,
    GPUS_PER_RUN,
    LABEL_COLUMN,
    METRIC,
    PRECISION,
    RECIPE,
    REPEATS,
    SEQ_LEN,
    SPEED_DEVICE,
    TASK,
    TEACHER_BATCH_SIZE,
    TEACHER_EPOCHS,
    TEACHER_LAYER_DECAY,
    TEACHER_LR,
    TEXT_COLUMN,
    TEXT_PAIR_COLUMN,
    THREADS,
    TRANSFER_TEXT,
    WARMUP,
    console,
    err_console,
    parsed_seeds,
    print_json,
    teacher_finetune,
)
from compress.data.named import DEFAULT_DATASET
from compress.teachers.registry import DEFAULT_TEACHER

# Shared with `compress search` (compress/cli/search.py); 3 is compress.runs.executors.DEFAULT_MAX_RETRIES, not imported
# here so that --help stays light.
MAX_RETRIES = typer.Option(3, help="Times a run's Ray task is started again after its worker or node died (killed, out "
                                   "of memory, a lost node); a student run continues from its last checkpoint. An "
                                   "error of the run itself is never retried.")

if TYPE_CHECKING:
    from compress.reports.comparison_data import ShownComparison, ShownInterval, ShownModel
    from compress.runs.compare_plan import CompareConfig


def compare(
    ctx: typer.Context,
    teacher: str = typer.Option(DEFAULT_TEACHER, "--teacher", "-t",
                                help="Teacher alias, checkpoint directory or hub id."),
    dataset: str = typer.Option(DEFAULT_DATASET, "--dataset", "-d",
                                help="Dataset name or file; several separated by commas (mr,bbc-news,mr-score) "
                                     "compare every method on each and write one table across them (tasks.md)."),
    text_column: str | None = TEXT_COLUMN,
    text_pair_column: str | None = TEXT_PAIR_COLUMN,
    label_column: str | None = LABEL_COLUMN,
    task: str = TASK,
    dedupe: bool = typer.Option(False, help="Drop the dev and test rows whose text also occurs in the training split."),
    # Help text is rich markup: \\[ shows a bracket ([sharing=...] alone would be read as a style).
    methods: str | None = typer.Option(
        None, help="Comma-separated methods and pipelines, e.g. distilbert,distilbert+int8,"
                   "albert\\[sharing=attention]+int8 (default: every method this CPU runs well, and each "
                   "student followed by int8)."),
    out: str | None = typer.Option(None, help="Comparison directory (default: runs/compare-TEACHER-DATASET)."),
    epochs: int | None = typer.Option(None, help="Epochs of every student's stages (default: each method's)."),
    batch_size: int = typer.Option(32, help="Training batch size."),
    seed: int | None = typer.Option(None, help="Seed of every run (one seed; default 13)."),
    seeds: str | None = typer.Option(None, help="Train every run once per seed: 13,14,15, or a count N (the N seeds "
                                                "from 13 on); accuracies then come with intervals over seeds and test "
                                                "sentences together."),
    threads: int | None = THREADS,
    seq_len: int | None = SEQ_LEN,
    repeats: int = REPEATS,
    batch_shape: str = BATCH_SHAPE,
    choose_by: str = typer.Option(
        "latency", help="How a quantization left to choose its backend (auto) chooses: latency (the fastest at batch "
                        "1) or throughput (the fastest in batches shaped as --batch-shape says; its runs are named "
                        "so: int8\\[choose_by=throughput])."),
    teacher_epochs: int | None = TEACHER_EPOCHS,
    teacher_lr: float | None = TEACHER_LR,
    teacher_batch_size: int | None = TEACHER_BATCH_SIZE,
    teacher_layer_decay: float | None = TEACHER_LAYER_DECAY,
    device: str = DEVICE,
    speed_device: str = SPEED_DEVICE,
    hold_out: int = typer.Option(0, help="Training examples held out (stratified) for selecting on, as compress search "
                                         "holds them out: a comparison with a search's --hold-out reuses its runs."),
    precision: str = PRECISION,
    metric: str | None = METRIC,
    recipe: str = RECIPE,
    transfer_text: str | None = TRANSFER_TEXT,
    copies_per_epoch: int | None = COPIES_PER_EPOCH,
    warmup: float | None = WARMUP,
    decay: str | None = DECAY,
    executor: str = EXECUTOR,
    address: str | None = ADDRESS,
    cpus_per_run: float = CPUS_PER_RUN,
    gpus_per_run: float = GPUS_PER_RUN,
    max_retries: int = MAX_RETRIES,
    config_file: Path | None = typer.Option(
        None, "--config", help="A TOML or YAML file declaring the comparison: settings named as these options "
                               "(methods = [...], seeds = [13, 14, 15], ...); an option given here wins."),
    like: Path | None = typer.Option(
        None, "--like", help="Make again the comparison a comparison.json records: its methods, options, seeds, "
                             "precision and the backends --backend auto chose (an option given here wins)."),
    ignore_versions: bool = typer.Option(False, "--ignore-versions",
                                         help="With --like, go on where the installed packages differ from the "
                                              "record's."),
    as_json: bool = typer.Option(False, "--json", help="Print comparison.json instead of a table."),
) -> None:
    """Run every method on one teacher and dataset (reusing finished runs) and write one comparison."""
    from compress.runs.compare_plan import plan_runs, run_config_of
    from compress.runs.config import check_copies_chosen

    config = _compare_config(ctx, config_file, like, ignore_versions)
    # A bad method, pipeline or option, then a bad value of the settings every run takes (precision, device,
    # metric...): refused before torch loads.
    planned = plan_runs(config.methods)
    run_config_of(config, planned[0], "teacher")
    check_copies_chosen(config.recipe, config.copies_per_epoch,
                        [(run.method, run.method.make_options(run.options)) for run in planned])
    from compress.runs.compare import compare as run_compare

    say = (lambda m: err_console.print(f"[dim]{escape(m)}[/]"))
    from compress.runs.across_tasks import compare_tasks, datasets_of

    datasets = datasets_of(config.dataset)
    if len(datasets) > 1:
        directory, table = compare_tasks(config, datasets, progress=say)
        if as_json:
            print_json(table.to_dict())
            return
        console.print(_across_table(table))
        console.print(f"across tasks: {escape(str(directory / 'tasks.html'))} (and tasks.md, tasks.json)")
        return
    directory, comparison = run_compare(config, progress=say)
    if as_json:
        print_json(comparison.to_dict())
        return
    from compress.reports.comparison_data import read_comparison

    shown = read_comparison(comparison.to_dict())
    console.print(_table(shown))
    console.print(f"comparison: {escape(str(directory / 'comparison.html'))} (and comparison.md, comparison.json)")
    from compress.reports.verdicts import RETENTION_TARGET, chosen

    if (name := chosen(shown)) is not None and (run_dir := next(m for m in shown.methods if m.method == name).run_dir):
        from compress.inference.export_plan import export_command

        console.print(f"the fastest model that keeps {RETENTION_TARGET:.0%} of the teacher beyond its interval is "
                      f"{escape(name)}; export it: {escape(export_command(run_dir))}", highlight=False, soft_wrap=True)


def _compare_config(ctx: typer.Context, config_file: Path | None, like: Path | None,
                    ignore_versions: bool) -> CompareConfig:
    """The comparison the options ask for: a recorded one (--like), then a declared file (--config), then the
    options given on this command line, each over the one before; defaults where none says."""
    from compress.errors import CompressError
    from compress.registry.pipeline import split_list
    from compress.runs.compare_plan import CompareConfig, chosen_by
    from compress.runs.declared import SETTINGS, read_declared
    from compress.runs.executors import Executor
    from compress.train_config import DEFAULT_SEED

    given = {name: ctx.params[name] for name in SETTINGS}
    explicit = {name for name in SETTINGS if _on_command_line(ctx, name)}
    declared: dict[str, object] = {}
    if like is not None:
        declared |= _like_settings(ctx, like, ignore_versions)
    file_text = None
    if config_file is not None:
        found, file_text = read_declared(config_file)
        declared |= found
    if explicit & {"seed", "seeds"}:   # one seed or several: what this command line says replaces what was declared
        declared = {k: v for k, v in declared.items() if k not in ("seed", "seeds")}
    s = given | {k: v for k, v in declared.items() if k not in explicit}
    # The default set asks the CPU what it computes (bf16, fp16): made only when no method is given.
    methods = {} if s["methods"] is None else \
        {"methods": split_list(s["methods"]) if isinstance(s["methods"], str) else list(s["methods"])}
    if s["seeds"] is not None and s["seed"] is not None:
        raise CompressError("give --seed (one seed) or --seeds (several), not both.")
    seeds = [DEFAULT_SEED if s["seed"] is None else s["seed"]] if s["seeds"] is None else \
        list(s["seeds"]) if isinstance(s["seeds"], list) else parsed_seeds(str(s["seeds"]))
    config = CompareConfig(**methods,
        teacher=s["teacher"], dataset=s["dataset"] if isinstance(s["dataset"], str) else ",".join(s["dataset"]),
        text_column=s["text_column"], text_pair_column=s["text_pair_column"], label_column=s["label_column"],
        task=s["task"], dedupe=s["dedupe"], out=s["out"], epochs=s["epochs"],
        batch_size=s["batch_size"], seeds=seeds, threads=s["threads"],
        seq_len=s["seq_len"], repeats=s["repeats"], batch_shape=s["batch_shape"], device=s["device"],
        speed_device=s["speed_device"],
        hold_out=s["hold_out"], precision=s["precision"], metric=s["metric"], recipe=s["recipe"],
        transfer_text=s["transfer_text"], warmup=s["warmup"], decay=s["decay"],
        copies_per_epoch=s["copies_per_epoch"],
        executor=Executor(s["executor"], s["address"], s["cpus_per_run"], s["gpus_per_run"],
                          ctx.params["max_retries"]),
        teacher_finetune=teacher_finetune(s["teacher_epochs"], s["teacher_lr"], s["teacher_batch_size"],
                                          s["teacher_layer_decay"]),
        command=shlex.join(["compress", *sys.argv[1:]]),
        config_file={"name": config_file.name, "text": file_text} if config_file is not None else None)
    config.methods = chosen_by(config.methods, s["choose_by"], config.batch_shape)
    return config


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (typer carries its own copy of click, so its
    ParameterSource is compared by name)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _like_settings(ctx: typer.Context, path: Path, ignore_versions: bool) -> dict[str, object]:
    """The settings of the comparison ``path`` records (see :mod:`compress.runs.declared`); one that was recorded
    before comparisons kept them, from the command line it recorded, parsed as this command parses its own."""
    from compress.errors import CompressError
    from compress.runs.declared import SETTINGS, pin_backends, read_comparison_record, settings_of, version_differences

    record = read_comparison_record(path)
    differences = version_differences(record)
    if differences and not ignore_versions:
        raise CompressError(f"{path} was made with other package versions than these: {'; '.join(differences)} "
                            "(--ignore-versions goes on).")
    settings = settings_of(record, path)
    if settings is None:
        command = record.get("command")
        words = shlex.split(command) if command else []
        if words[:2] != ["compress", "compare"]:
            raise CompressError(f"{path} records neither its settings nor a compress compare command line, so it "
                                "cannot be made again.")
        try:
            recorded = ctx.command.make_context("compare", words[2:], parent=ctx.parent)
        except Exception as e:  # noqa: BLE001 - click's own errors, for a command line this version reads otherwise
            raise CompressError(f"{path}'s command line ({command}) does not parse here: {e}.") from None
        settings = {name: recorded.params[name] for name in SETTINGS
                    if name != "out" and _on_command_line(recorded, name)}
        settings["methods"] = pin_backends([row["method"] for row in record["methods"]], record)
        if record.get("seeds"):
            settings = {k: v for k, v in settings.items() if k != "seed"} | {"seeds": list(record["seeds"])}
        if record.get("precision"):
            settings["precision"] = record["precision"]
    return settings


def _cells(model: ShownModel, retention: float | None, speedup: float | None,
           retention_interval: ShownInterval | None = None, unit: str = "%") -> list[str]:
    """A model's numbers as the summary prints them (its score, x100 with ``unit``, and retention with their
    intervals, low to high, where the comparison has them); one not measured is "–"."""
    def cell(value: float | None, form: str, scale: float = 1.0, suffix: str = "") -> str:
        return "–" if value is None else f"{value / scale:{form}}{suffix}"

    def percent(value: float | None, interval: ShownInterval | None, sign: str = "%") -> str:
        return cell(value, ".1f", 0.01, sign) if interval is None or value is None else \
            f"{100 * value:.1f}{sign} ({100 * interval.low:.1f}–{100 * interval.high:.1f})"

    return [cell(model.params, ".1f", 1e6, "M"), cell(model.size_bytes, ".1f", 1e6),
            percent(model.accuracy, model.accuracy_interval, unit), percent(retention, retention_interval),
            cell(model.latency_ms_p50, ".1f"), cell(speedup, ".2f", suffix="x")]


def _across_table(table) -> Table:
    """The table `compress compare --dataset A,B,C` prints: each model's score on each task and the mean."""
    from compress.reports.across_tasks import table_rows

    headers, scores, _ = table_rows(table)
    shown = Table(title=f"{table.teacher} across {len(table.tasks)} tasks (scores x 100)", title_justify="left")
    shown.add_column(headers[0], overflow="fold", ratio=1)
    for header in headers[1:]:
        shown.add_column(header, justify="right", no_wrap=True)
    for cells in scores:
        shown.add_row(*cells)
    return shown


def _table(comparison: ShownComparison) -> Table:
    """The summary `compress compare` prints: the same rows as the report, read the same lenient way."""
    from compress.reports.comparison_data import ShownTeacher

    t = comparison.teacher or ShownTeacher()
    table = Table(title=f"{t.name or '?'} on {comparison.dataset.name}: {comparison.context.threads} threads, "
                        f"{comparison.context.seq_len} tokens", title_justify="left")
    # The numbers never shrink (a narrow or absent terminal truncated them to "accura…"); a long method name
    # folds onto more lines instead.
    table.add_column("method", overflow="fold", ratio=1)
    from compress.reports.comparison_data import in_metric

    for name in ("params", "MB", in_metric("accuracy (%)", comparison).removesuffix(" (%)"), "retention",
                 "latency ms", "speed-up"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    unit = "%" if comparison.context.metric == "accuracy" else ""    # a correlation, F1 or Matthews: x100
    teacher = _cells(t, None, speedup=1.0, unit=unit)
    teacher[3] = ""  # the teacher is the reference the retention of the others is taken against
    table.add_row("teacher", *teacher)
    for m in comparison.methods:
        table.add_row(escape(m.method), *_cells(m, m.retention, m.speedup, m.retention_interval, unit))
    return table


def report(directory: Path = typer.Argument(..., help="A comparison directory (holding comparison.json).")) -> None:
    """Render comparison.md, comparison.html and the plots again from comparison.json."""
    from compress.reports.comparison import render_directory

    for path in render_directory(directory):
        console.print(f"wrote {escape(str(path))}")


def results(
    directory: Path = typer.Argument(Path("docs/results"), help="A folder of comparison .json files."),
    out: Path = typer.Option(Path("docs/results.md"), "--out", help="The page to write."),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when the page is not what the files "
                                                      "give."),
) -> None:
    """Render every comparison in DIRECTORY as one results page (docs/results.md), each table with the command, CPU
    and date that made it."""
    from compress.reports.results_page import write_results

    current = write_results(directory, out, check=check)
    if check and not current:
        err_console.print(f"{escape(str(out))} is not what {escape(str(directory))} gives; run `compress results` "
                          "to write it again.")
        raise typer.Exit(1)
    console.print(f"{escape(str(out))} {'is current' if current else 'written'} ({escape(str(directory))})")
