"""`compress teachers`: list the teacher aliases; `compress teachers verify`: parity with transformers."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from compress.cli.common import LABEL_COLUMN, TASK, TEXT_COLUMN, TEXT_PAIR_COLUMN, console, print_json
from compress.data.named import DEFAULT_DATASET
from compress.errors import CompressError
from compress.teachers.registry import DEFAULT_TEACHER, TEACHERS, weights_available
from compress.train_config import FinetuneConfig

app = typer.Typer(help="Teachers: list the aliases, verify a checkpoint, fine-tune on a task.",
                  invoke_without_command=True)

PARITY_TOLERANCE = 1e-5


@app.callback()
def list_teachers(ctx: typer.Context,
                  as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """List the teacher aliases, their architecture, parameters and whether the weights are here."""
    if ctx.invoked_subcommand is not None:
        return
    from compress.models.accounting import count_parameters

    rows = []
    for spec in TEACHERS.values():
        c = spec.config
        rows.append({
            "alias": spec.alias, "description": spec.description, "source": spec.source,
            "location": spec.location,
            "architecture": f"L={c.num_layers} H={c.hidden_size} heads={c.num_heads} FFN={c.ffn_size} V={c.vocab_size}",
            "params": count_parameters(c).backbone, "available": weights_available(spec),
            "default": spec.alias == DEFAULT_TEACHER,
        })
    if as_json:
        print_json(rows)
        return
    table = Table(title="Teachers (or pass a local checkpoint directory / hub id to --teacher)",
                  title_justify="left")
    for col in ("alias", "source", "architecture", "params", "weights here"):
        table.add_column(col, justify="right" if col == "params" else "left")
    for r in rows:
        alias = f"{r['alias']} (default)" if r["default"] else r["alias"]
        table.add_row(alias, f"{r['source']}: {r['location']}", r["architecture"],
                      f"{r['params'] / 1e6:.1f}M", "[green]yes[/]" if r["available"] else "[yellow]no[/]")
    console.print(table)


@app.command()
def verify(
    name_or_dir: str = typer.Argument(..., help="Teacher alias, checkpoint directory or hub id."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run one batch through our encoder and through transformers; print the largest difference."""
    from compress.teachers.verify import verify_parity

    with console.status(f"loading {name_or_dir} into compress and into transformers"):
        result = verify_parity(name_or_dir)
    ok = result.max_abs_diff < PARITY_TOLERANCE
    if as_json:
        print_json({**result.__dict__, "tolerance": PARITY_TOLERANCE, "ok": ok})
    else:
        verdict = "[green]match[/]" if ok else "[red]MISMATCH[/]"
        console.print(
            f"{result.checkpoint} ({result.source}): max |ours - transformers| over the last hidden state "
            f"= {result.max_abs_diff:.3g} on a batch of {result.batch_shape[0]}x{result.batch_shape[1]} "
            f"tokens (tolerance {PARITY_TOLERANCE:g}): {verdict}"
        )
    if not ok:
        raise typer.Exit(1)


@app.command()
def init(
    out: Path = typer.Argument(..., help="New directory to write the checkpoint into."),
    like: str = typer.Option("bert-large", "--like", help="The teacher alias whose shape it takes."),
    seed: int = typer.Option(0, help="Seed of the random weights."),
) -> None:
    """Write a teacher checkpoint of a known shape with random weights (for bert-large where the hub is out of
    reach: its real size, for timing training and distillation; not its accuracy)."""
    from compress.models.accounting import count_parameters
    from compress.teachers.random_init import random_teacher

    with console.status(f"drawing {like}'s weights"):
        written = random_teacher(out, like, seed)
    params = count_parameters(TEACHERS[like].config).backbone
    console.print(f"{like}-shaped teacher with random weights ({params / 1e6:.1f}M parameters) in {written}; "
                  f"fine-tune it with `compress teacher finetune --teacher {written}`.")


@app.command()
def finetune(
    teacher: str = typer.Option(DEFAULT_TEACHER, "--teacher", "-t",
                                help="Teacher alias, checkpoint directory or hub id."),
    dataset: str = typer.Option(DEFAULT_DATASET, "--dataset", "-d", help="Dataset name, file, or hf:NAME[:CONFIG]."),
    text_column: str | None = TEXT_COLUMN,
    text_pair_column: str | None = TEXT_PAIR_COLUMN,
    label_column: str | None = LABEL_COLUMN,
    task_kind: str = TASK,
    epochs: int = typer.Option(FinetuneConfig().train.epochs, help="Training epochs (the best dev epoch is kept)."),
    batch_size: int = typer.Option(FinetuneConfig().train.batch_size, help="Training batch size."),
    lr: float = typer.Option(FinetuneConfig().train.lr, help="Peak learning rate (AdamW, linear warm-up and decay)."),
    layer_decay: float = typer.Option(FinetuneConfig().train.layer_decay,
                                      help="Layer-wise lr decay: each layer below the top learns this much slower."),
    seed: int = typer.Option(FinetuneConfig().train.seed, help="Seed for shuffling, dropout and the classifier."),
    max_length: int | None = typer.Option(None, help="Truncation length (default: 99th percentile of train, capped)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    force: bool = typer.Option(False, "--force", help="Train again even when a cached result exists."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as JSON."),
) -> None:
    """Fine-tune a teacher on a task (or reuse the cached result) and report dev and test scores."""
    from dataclasses import replace

    from compress.data.load import check_dataset, load_task
    from compress.device import resolve_device
    from compress.teachers.finetune import finetune_teacher

    base = FinetuneConfig()
    try:
        train = replace(base.train, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed, layer_decay=layer_decay)
    except ValueError as e:
        raise CompressError(f"teacher fine-tuning: {e}") from None
    config = FinetuneConfig(train=train, max_length=max_length)
    columns = {"text_column": text_column, "text_pair_column": text_pair_column, "label_column": label_column,
               "task": task_kind}
    check_dataset(dataset, **columns)  # every refusal before anything is fetched
    resolve_device(device)
    task = load_task(dataset, **columns)
    result = finetune_teacher(teacher, task, config, device=device, force=force, show_progress=not as_json)
    record = result.record
    if as_json:
        print_json({**record, "directory": str(result.directory), "cache_hit": result.cache_hit})
        return
    origin = "cache hit" if result.cache_hit else f"trained in {record['train_seconds']:.0f} s"
    console.print(
        f"{teacher} on {task.name} ({origin}): dev accuracy {record['dev']['accuracy']:.4f}, "
        f"test accuracy [bold]{record['test']['accuracy']:.4f}[/], test macro-F1 {record['test']['macro_f1']:.4f}"
    )
    console.print(f"saved in {result.directory}")
