"""`compress predict RUN_DIR [TEXT ...]`: a finished run's model answers texts, on the runtime it was measured on."""

from __future__ import annotations

import sys
from typing import Any

import typer

from compress.cli.common import console, print_json
from compress.errors import CompressError

TABLE_MAX_ROWS = 100   # more answers than this are printed one tab-separated line each, not as a table


def _texts(texts: list[str], pairs: list[str], file: str | None, takes_pairs: bool) -> tuple[list[str], list[str] | None]:
    """The texts (and their pairs) to answer: the arguments, a file, or standard input (``-``, or nothing given
    while input is piped in)."""
    from compress.data.transfer_text import read_transfer_texts

    if file is not None:
        if texts:
            raise CompressError("give texts as arguments or with --file, not both.")
        read = read_transfer_texts(file, takes_pairs, option="--file")
        return read.texts, read.pairs
    if texts == ["-"] or (not texts and not sys.stdin.isatty()):
        if takes_pairs:
            raise CompressError("this run answers text pairs: give them with --file, a table with both columns.")
        texts = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
    if not texts:
        raise CompressError("no texts to answer: give them as arguments, with --file, or on standard input.")
    if pairs and len(pairs) != len(texts):
        raise CompressError(f"{len(texts)} texts and {len(pairs)} --pair values: give one pair per text.")
    return texts, pairs or None


def predict(
    run_dir: str = typer.Argument(..., help="A finished run's directory (what `compress run`, `compare` or `search` "
                                            "wrote)."),
    texts: list[str] = typer.Argument(None, help="Texts to answer; '-' or none reads them from standard input, "
                                                 "one a line."),
    pair: list[str] = typer.Option(None, "--pair", help="The second text of each pair, once per text (a task of "
                                                        "text pairs)."),
    file: str = typer.Option(None, "--file", help="A file of texts: one a line, or a table's text column (and its "
                                                  "pair column, for a task of pairs)."),
    batch_size: int = typer.Option(32, help="Texts answered in one call of the model; 1 answers a dynamically "
                                            "quantized model exactly as its run scored it."),
    threads: int = typer.Option(None, help="Threads the model computes with (default: every CPU)."),
    as_json: bool = typer.Option(False, "--json", help="Print the answers as JSON: label, score and every class's "
                                                       "probability (a regression's value)."),
) -> None:
    """Answer texts with a run's model: each text's label and its probability, or a regression's value."""
    from compress.inference.loaded import finished_run, load_run, takes_pairs

    directory, record, config = finished_run(run_dir)
    given, pairs = _texts(list(texts or []), list(pair or []), file, takes_pairs(record, config))
    if pairs is not None and not takes_pairs(record, config):
        raise CompressError(f"{directory} answers single texts: its task has no text pairs; drop --pair.")
    if pairs is None and takes_pairs(record, config):
        raise CompressError(f"{directory} answers text pairs: give each text its --pair, or a --file table.")
    if batch_size < 1:
        raise CompressError(f"--batch-size must be at least 1, got {batch_size}.")
    model = load_run(directory, threads=threads)
    answers = model.predict(given, pairs, batch_size=batch_size, show_progress=True)
    if as_json:
        print_json([a.to_dict() for a in answers])
        return
    _show(answers)


def _show(answers: list[Any]) -> None:
    if len(answers) > TABLE_MAX_ROWS:
        for a in answers:
            print(f"{a.score:.6g}\t{a.text}" if a.label is None else f"{a.label}\t{a.score:.4f}\t{a.text}")
        return
    from rich.table import Table

    regression = answers[0].label is None
    table = Table(show_edge=False)
    table.add_column("text", overflow="fold")
    for name in (["value"] if regression else ["label", "probability"]):
        table.add_column(name, justify="left" if name == "label" else "right")
    for a in answers:
        shown = a.text if a.text_pair is None else f"{a.text} | {a.text_pair}"
        table.add_row(shown, f"{a.score:.4g}") if regression else table.add_row(shown, a.label, f"{a.score:.3f}")
    console.print(table)
