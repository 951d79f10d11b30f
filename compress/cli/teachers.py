"""`compress teachers`: list the teacher aliases; `compress teachers verify`: parity with transformers."""

from __future__ import annotations

import typer
from rich.table import Table

from compress.cli.common import console, print_json
from compress.models.accounting import count_parameters
from compress.teachers.registry import TEACHERS, weights_available

app = typer.Typer(help="Teachers: list the aliases, verify a checkpoint against transformers.",
                  invoke_without_command=True)

PARITY_TOLERANCE = 1e-5


@app.callback()
def list_teachers(ctx: typer.Context,
                  as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """List the teacher aliases, their architecture, parameters and whether the weights are here."""
    if ctx.invoked_subcommand is not None:
        return
    rows = []
    for spec in TEACHERS.values():
        c = spec.config
        rows.append({
            "alias": spec.alias, "description": spec.description, "source": spec.source,
            "location": spec.location,
            "architecture": f"L={c.num_layers} H={c.hidden_size} heads={c.num_heads} FFN={c.ffn_size} V={c.vocab_size}",
            "params": count_parameters(c).backbone, "available": weights_available(spec),
            "default": spec.alias == "minilm",
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
