"""`compress cache list|prune|clear`: what the cache holds, and freeing it; thin views over
:mod:`compress.cache_inventory`."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from compress.cli.common import console, print_json

if TYPE_CHECKING:
    from compress.cache_inventory import Entry, Removal

app = typer.Typer(help="The cache: what it holds by kind (list), and freeing it (prune, clear).", no_args_is_help=True)


def _entry_json(entry: Entry, now: float) -> dict[str, object]:
    return {**asdict(entry), "path": str(entry.path), "age_seconds": round(entry.age(now), 1)}


@app.command("list")
def list_cache(as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables.")) -> None:
    """What the cache holds, by kind: each entry's size, age and what made it, and the total (what `du -s` says of the
    root)."""
    from compress.cache_inventory import inventory
    from compress.quantities import human_age, human_size

    now = time.time()
    inv = inventory(now=now)
    if as_json:
        print_json({"root": str(inv.root), "total_bytes": inv.total, "folders_bytes": inv.folders,
                    "entries": [_entry_json(e, now) for e in inv.entries],
                    "others": [{**asdict(o), "path": str(o.path)} for o in inv.others],
                    "by_kind": [{"kind": g, "entries": n, "bytes": size} for g, n, size in inv.by_group()]})
        return
    if not inv.entries and not inv.others:
        console.print(f"the cache in {escape(str(inv.root))} is empty ({human_size(inv.total)}).", highlight=False,
                      soft_wrap=True)
        return
    table = Table(title=f"The cache in {escape(str(inv.root))}", title_justify="left")
    for column in ("kind", "entry", "size", "age", "made by"):
        table.add_column(column, justify="right" if column in ("size", "age") else "left", overflow="fold")
    for e in inv.entries:
        made_by = e.made_by + (f" [yellow]({escape(e.in_use)})[/]" if e.in_use else "")
        table.add_row(e.kind, escape(e.name), human_size(e.size), human_age(e.age(now)), made_by)
    for o in inv.others:
        table.add_row("other", escape(str(o.path.relative_to(inv.root))), human_size(o.size), "",
                      f"{escape(o.why)}; never removed")
    if inv.folders:
        table.add_row("", "(the folders and lock files)", human_size(inv.folders), "", "")
    console.print(table)
    sums = "; ".join(f"{group} {human_size(size)} ({n} entr{'y' if n == 1 else 'ies'})"
                     for group, n, size in inv.by_group())
    console.print(f"by kind: {sums or 'no entries'}", highlight=False, soft_wrap=True)
    console.print(f"total: {human_size(inv.total)} ({inv.total:,} bytes, as `du -s` counts them)", highlight=False,
                  soft_wrap=True)


def _report(done: Removal, what: str, as_json: bool) -> None:
    from compress.quantities import human_size

    now = time.time()
    if as_json:
        print_json({"root": str(done.root), "freed_bytes": done.freed,
                    "removed": [_entry_json(e, now) for e in done.removed],
                    "skipped": [_entry_json(e, now) for e in done.skipped],
                    "left": [{**asdict(o), "path": str(o.path)} for o in done.left], "unmet": done.unmet})
        return
    for e in done.removed:
        console.print(f"removed {escape(e.label)} ({human_size(e.size)}, {escape(e.made_by)})", highlight=False,
                      soft_wrap=True)
    n = len(done.removed)
    console.print(f"{what}: freed {human_size(done.freed)} ({done.freed:,} bytes) in {n} entr{'y' if n == 1 else 'ies'}"
                  f" from {escape(str(done.root))}.", highlight=False, soft_wrap=True)
    for e in done.skipped:
        console.print(f"[yellow]kept[/] {escape(e.label)} ({human_size(e.size)}): {escape(e.in_use or 'in use')}",
                      highlight=False, soft_wrap=True)
    if done.left:
        console.print(f"left {len(done.left)} item{'s' * (len(done.left) != 1)} that compress did not write: "
                      + ", ".join(escape(str(o.path.relative_to(done.root))) for o in done.left), highlight=False,
                      soft_wrap=True)
    if done.unmet:
        console.print(f"[yellow]![/] {escape(done.unmet)}", highlight=False, soft_wrap=True)


@app.command()
def prune(
    older_than: str | None = typer.Option(None, "--older-than", help="Remove entries not modified for this long: "
                                                                     "30d, 12h, 1d12h (d, h, m, s)."),
    keep_last: int | None = typer.Option(None, "--keep-last", min=0, help="Keep the N newest entries of each kind, "
                                                                         "remove the others."),
    max_size: str | None = typer.Option(None, "--max-size", help="Then remove the oldest entries until the cache is "
                                                                 "at most this size: 20G, 500M, 2GiB."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Remove old entries (and what killed processes left behind), never one in use nor anything compress did not
    write, and say what that freed."""
    from compress.cache_inventory import PruneRule
    from compress.cache_inventory import prune as prune_cache
    from compress.quantities import parse_duration, parse_size

    rule = PruneRule(older_than=parse_duration(older_than, "--older-than") if older_than is not None else None,
                     keep_last=keep_last, max_size=parse_size(max_size) if max_size is not None else None)
    _report(prune_cache(rule), "pruned", as_json)


@app.command()
def clear(
    yes: bool = typer.Option(False, "--yes", help="Yes, remove every entry of the cache that is not in use."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Remove every entry of the cache that is not in use (what compress did not write stays), and say what that
    freed."""
    from compress.cache_inventory import clear as clear_cache
    from compress.errors import CompressError

    if not yes:
        raise CompressError("`compress cache clear` removes every cache entry not in use; add --yes to do it "
                            "(or `compress cache prune` to remove only old ones).")
    _report(clear_cache(), "cleared", as_json)
