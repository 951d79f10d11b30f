"""`compress explain METHOD --teacher NAME`: the arithmetic of each method on a real teacher."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.panel import Panel
from rich.table import Table

from compress.cli.common import console, print_json
from compress.cli.method_flags import SET_OPTION, given_options, with_method_flags
from compress.reports.explain import DEFAULT_SEQ_LEN, topics
from compress.reports.explain import explain as explain_method
from compress.teachers.registry import DEFAULT_TEACHER

if TYPE_CHECKING:
    from compress.reports.footprint import ExplainTable, Explanation


def _side_by_side(data: Explanation) -> Table:
    from compress.models.accounting import COMPONENTS

    teacher, student = data["teacher"], data["student"]
    table = Table(title=f"{data['method']}: teacher {teacher['name']} vs student", title_justify="left")
    table.add_column("component")
    table.add_column("teacher", justify="right")
    table.add_column("student", justify="right")
    table.add_column("student / teacher", justify="right")
    for key, label in COMPONENTS.items():
        t, s = teacher["params_by_component"][key], student["params_by_component"][key]
        if t or s:
            table.add_row(label, f"{t:,}", f"{s:,}", f"{s / t:.3f}" if t else "new")
    table.add_section()
    rows = [("parameters (embeddings + encoder + pooler)", "params", "{:,}"),
            (f"FLOPs per sequence of {data['seq_len']} tokens", "flops", "{:,}"),
            ("size in bytes", "size_bytes", "{:,}")]
    for label, key, fmt in rows:
        t, s = teacher[key], student[key]
        table.add_row(f"[bold]{label}[/]", fmt.format(t), fmt.format(s), f"{s / t:.3f}")
    return table


def _table(spec: ExplainTable) -> Table:
    """A method's own table (``tables`` in its explanation): title, columns as (name, justify), rows of text."""
    table = Table(title=spec["title"], title_justify="left")
    for name, justify in spec["columns"]:
        table.add_column(name, justify=justify)
    for row in spec["rows"]:
        table.add_row(*row)
    return table


def _render(data: Explanation) -> None:
    console.print(Panel("\n".join(data["formula"]), title=f"[bold]{data['method']}[/]: what changes",
                        expand=False))
    console.print(_side_by_side(data))
    ratios = data["ratios"]
    console.print(
        f"teacher / student: parameters [bold]{ratios['params']}x[/], FLOPs [bold]{ratios['flops']}x[/], "
        f"bytes [bold]{ratios['size']}x[/]"
    )
    for spec in data.get("tables", []):   # the method's own tables and lines (ALBERT's ablations, ...)
        console.print(_table(spec))
    for line in data.get("lines", []):
        console.print(line)
    for note in data["notes"]:
        console.print(f"• {note}")
    console.print()


def _explain(*, method: str, teacher: str, seq_len: int, as_json: bool, set_: list[str] | None, **flags: Any) -> None:
    """Explain why a method saves what it saves, with the teacher's real numbers, for the shape the method's
    options give (the same flags as compress run: --embedding-size, --sharing, --groups, --keep-heads, ...)."""
    data = explain_method(method, teacher, seq_len, given_options(flags, set_))
    if as_json:
        print_json(data)
        return
    for item in data["methods"].values() if "methods" in data else [data]:
        _render(item)


# Help text is rich markup: \\[ shows a bracket ([sharing=...] alone would be read as a style).
explain = with_method_flags(_explain, [
    ("method", str, typer.Argument("all", help=f"One of {', '.join(topics())} (or any method, with options in "
                                   "brackets: albert\\[sharing=attention]), or all.")),
    ("teacher", str, typer.Option(DEFAULT_TEACHER, "--teacher", "-t",
                                  help="Teacher alias, local checkpoint directory or hub id.")),
    ("seq_len", int, typer.Option(DEFAULT_SEQ_LEN, "--seq-len", help="Sequence length for FLOPs.")),
    ("as_json", bool, typer.Option(False, "--json", help="Print one JSON object instead of tables.")),
    SET_OPTION,
])
