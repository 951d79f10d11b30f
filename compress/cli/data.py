"""`compress data list` and `compress data show NAME_OR_PATH`: thin views over :mod:`compress.data`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from compress.cli.common import TASK, console, print_json
from compress.data.named import DEFAULT_DATASET
from compress.teachers.registry import DEFAULT_TEACHER

if TYPE_CHECKING:
    from compress.data.describe import TaskDescription

app = typer.Typer(help="Named datasets, local files and raw-text corpora.", no_args_is_help=True)


@app.command("list")
def list_datasets(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """List the named datasets: source archive, size, label names, and whether they are cached."""
    from compress.data import describe_named_datasets

    rows = describe_named_datasets()
    if as_json:
        print_json(rows)
        return
    table = Table(title="Named datasets (or give a data file path, or hf:NAME[:CONFIG])", title_justify="left")
    for column in ("name", "dataset", "source", "size", "labels", "cached"):
        table.add_column(column, justify="right" if column == "size" else "left", overflow="fold")
    for r in rows:
        name = f"{r['name']} (default)" if r["name"] == DEFAULT_DATASET else r["name"]
        table.add_row(
            name,
            r["title"],
            r["source_short"],
            f"{r['size']:,}",
            ", ".join(r["labels"]),
            "[green]yes[/]" if r["cached"] else "[yellow]no[/] (fetched on first use)",
        )
    console.print(table)


@app.command()
def show(
    name_or_path: str = typer.Argument(
        DEFAULT_DATASET, help="Dataset name (see `compress data list`), file/dir path, or hf:NAME[:CONFIG]."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    teacher: str = typer.Option(DEFAULT_TEACHER, "--teacher", help="Teacher whose tokenizer measures token lengths."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column (default: text, else sentence)."),
    text_pair_column: str | None = typer.Option(None, "--text-pair-column", help="Second-text column for pairs."),
    label_column: str | None = typer.Option(None, "--label-column", help="Label column (default: label)."),
    task_kind: str = TASK,
    examples: int = typer.Option(3, "--examples", min=0, help="How many train examples to show."),
) -> None:
    """Sizes, label balance and token lengths per split, the split recipe and fingerprint, examples."""
    from compress.data import describe_task, load_task
    from compress.teachers import load_tokenizer

    with console.status(f"loading {name_or_path}"):
        task = load_task(
            name_or_path, text_column=text_column, text_pair_column=text_pair_column, label_column=label_column,
            task=task_kind,
        )
        tokenizer = load_tokenizer(teacher)
        info = describe_task(task, tokenizer, examples=examples)
    info["teacher"] = teacher
    if as_json:
        print_json(info)
        return
    _print_description(info)


def _print_description(info: TaskDescription) -> None:
    from compress.data.batching import PERCENTILES

    split = info["split"]
    recipe = split["method"]
    console.print(f"[bold]{info['name']}[/]  {info['source']}", highlight=False, soft_wrap=True)
    console.print(f"labels: {', '.join(info['labels']) or 'a number (regression)'}  ({info['label_source']})",
                  highlight=False, soft_wrap=True)
    console.print(f"split: {recipe}", highlight=False, soft_wrap=True)
    console.print(
        f"fingerprint: [bold]{info['fingerprint']}[/]   max length for {info['teacher']}: "
        f"{info['max_length']} (p99 of train, capped)",
        highlight=False,
        soft_wrap=True,
    )

    sizes = Table(title="Splits and label balance", title_justify="left")
    sizes.add_column("split")
    sizes.add_column("size", justify="right")
    targets = ("mean", "sd", "min", "max") if not info["labels"] else ()    # a regression's target, per split
    for label in [*info["labels"], *(f"target {t}" for t in targets)]:
        sizes.add_column(label, justify="right", overflow="fold")
    for name, s in info["splits"].items():
        sizes.add_row(
            name,
            f"{s['size']:,}",
            *(f"{s['label_counts'][label]:,} ({s['label_fractions'][label]:.1%})" for label in info["labels"]),
            *(f"{s['target'][t]:.2f}" for t in targets),
        )
    console.print(sizes)

    percentiles = (*(f"p{p}" for p in PERCENTILES), "max")
    lengths = Table(
        title=f"Token lengths under the {info['teacher']} tokenizer (special tokens included)", title_justify="left"
    )
    lengths.add_column("split")
    for p in percentiles:
        lengths.add_column(p, justify="right")
    for name, s in info["splits"].items():
        lengths.add_row(name, *(str(s["token_lengths"][p]) for p in percentiles))
    console.print(lengths)

    if info["examples"]:
        ex = Table(title="Examples (train)", title_justify="left", show_lines=True)
        ex.add_column("id")
        ex.add_column("label")
        ex.add_column("text")
        if info["text_pair"]:
            ex.add_column("text pair")
        for e in info["examples"]:
            ex.add_row(e["id"], e["label"], e["text"], *([e["text_pair"]] if info["text_pair"] else []))
        console.print(ex)
