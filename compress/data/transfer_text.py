"""The user's unlabeled in-domain text (``--transfer-text FILE``): transfer data a student or a recovery learns from
through the teacher's outputs alone.

A file is one text per line (``.txt`` or any suffix that is not a table's), or a column of a table (``.csv``,
``.tsv``, ``.json``, ``.jsonl``, ``.parquet``: the task's text column, else ``text``, ``sentence`` or ``sentence1``;
for a task of text pairs, its pair column too). :func:`check_transfer_text` reads nothing but the file's bytes, so a
missing, empty or unreadable file is refused before torch or the data load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from compress.data.sources import sha256_file
from compress.errors import CompressError

TABLES = (".csv", ".tsv", ".json", ".jsonl", ".parquet")


def check_transfer_text(path: str, option: str = "--transfer-text") -> Path:
    """The file's resolved path; one sentence, naming the ``option`` it was given to, when it is missing, not a file,
    unreadable, empty or not UTF-8."""
    file = Path(path).expanduser()
    if not file.exists():
        raise CompressError(f"{option} {path} does not exist; give a file of texts, one per line or a table.")
    if not file.is_file():
        raise CompressError(f"{option} {path} is not a file; give a file of texts, one per line or a table.")
    try:
        with open(file, "rb") as f:
            head = f.read(1 << 20)
    except OSError as e:
        raise CompressError(f"{option} {path} cannot be read ({e.strerror}); check its permissions.") from None
    if not head.strip():
        raise CompressError(f"{option} {path} is empty; give a file with at least one text.")
    if file.suffix.lower() != ".parquet":
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.start < len(head) - 4:   # not a character cut at the end of the first megabyte
                raise CompressError(f"{option} {path} is not UTF-8 (bad byte at offset {e.start}); re-save "
                                    "it as UTF-8.") from None
    return file.resolve()


def transfer_digest(path: str) -> str:
    """The SHA-256 of the file's content: what names its transfer data in the caches and the run store. Read once
    per version of the file (a comparison makes a RunConfig, and so asks, for every run it plans)."""
    stat = os.stat(path)
    return _digest(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(Path(path))


@dataclass(frozen=True)
class TransferTexts:
    texts: list[str]
    pairs: list[str] | None   # the second texts, for a task of text pairs


def read_transfer_texts(path: str, pairs: bool, text_column: str | None = None,
                        text_pair_column: str | None = None, option: str = "--transfer-text") -> TransferTexts:
    """The texts of the file (blank ones left out); a task of pairs needs a table with both columns (``option``: what
    the file was given to, for the messages: ``--transfer-text``, ``compress predict``'s ``--file``)."""
    file = check_transfer_text(path, option)
    if file.suffix.lower() not in TABLES:
        if pairs:
            raise CompressError(f"{option} {path} has one text a line, but the task has text pairs; give a "
                                "table with the task's two text columns.")
        lines = [line.strip() for line in file.read_text(encoding="utf-8-sig").splitlines()]
        return TransferTexts([line for line in lines if line], None)
    from compress.data.local import read_table
    from compress.data.tables import TEXT_DEFAULTS

    table = read_table(file)
    names = table.column_names
    text = text_column if text_column in names else next((t for t, _ in TEXT_DEFAULTS if t in names), None)
    if text is None:
        raise CompressError(f"{option} {path} has no text column (its columns are {', '.join(names)}); name "
                            "it 'text', or as the task's --text-column.")
    second = None
    if pairs:
        second = text_pair_column if text_pair_column in names else \
            next((p for t, p in TEXT_DEFAULTS if t == text and p in names), None)
        if second is None:
            raise CompressError(f"{option} {path} has no second text column for the task's pairs (its columns "
                                f"are {', '.join(names)}).")
    rows = [(str(a).strip(), None if second is None else str(b).strip())
            for a, b in zip(table[text], table[second] if second else [None] * len(table), strict=True)
            if a is not None and str(a).strip()]
    if not rows:
        raise CompressError(f"{option} {path} has no text in its column {text!r}.")
    return TransferTexts([a for a, _ in rows], None if second is None else [b or "" for _, b in rows])
