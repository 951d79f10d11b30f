"""The user's own data: ``.csv``, ``.tsv``, ``.json``, ``.jsonl`` and ``.parquet`` files.

Files are read with the ``datasets`` library (``load_dataset("csv" | "json" | "parquet")``;
``.tsv`` is csv with a tab delimiter and no quoting), in memory, through a throw-away builder
cache so an edited file is never answered from a stale cache. Text formats must be UTF-8.

A path can be:

* one file: split 80/10/10 (stratified, seed 13) unless it has a ``split`` column;
* a directory holding ``train.<ext>`` plus ``dev.<ext>`` (or ``validation.<ext>``) and
  ``test.<ext>``: the splits as given (a missing dev or test split is carved from train).

Columns and labels are resolved as described in :mod:`compress.data.tables`.
"""

from __future__ import annotations

import codecs
import json
import tempfile
from pathlib import Path

import datasets

from compress.data.quiet import quiet_datasets
from compress.data.splits import normalize_split_name
from compress.data.tables import TablePart, task_from_tables
from compress.data.task import TaskData
from compress.errors import CompressError
from compress.interrupts import raise_if_interrupted

FORMATS: dict[str, tuple[str, dict[str, object]]] = {
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t", "quoting": 3}),  # 3 = csv.QUOTE_NONE
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".parquet": ("parquet", {}),
}
"""File suffix -> (``datasets`` builder, its options)."""

SUFFIXES = "/".join(FORMATS)


def load_local(
    path: str | Path,
    *,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    task: str = "auto",
) -> TaskData:
    """Load a local file, or a directory of train/dev/test files, as a task.

    Raises:
        CompressError: nonexistent path, unsupported suffix, empty or non-UTF-8 file, a file
            the reader cannot parse, missing columns, a single-class label column.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise CompressError(
            f"{path} does not exist; give a named dataset (see compress data list), "
            f"hf:NAME[:CONFIG], or the path to a {SUFFIXES} file."
        )
    if path.is_dir():
        files = split_files(path)
        parts = [TablePart(read_table(f), f.name, split) for split, f in files.items()]
        source = f"{path.resolve()} ({', '.join(f.name for f in files.values())})"
    else:
        parts = [TablePart(read_table(path), path.name)]
        source = str(path.resolve())
    return task_from_tables(
        parts,
        name=path.name,
        source=source,
        text_column=text_column,
        text_pair_column=text_pair_column,
        label_column=label_column,
        task=task,
    )


def split_files(directory: Path) -> dict[str, Path]:
    """The ``train``/``dev``/``test`` files of a directory (``validation`` counts as dev).

    Raises:
        CompressError: no train file, or two files for one split.
    """
    found: dict[str, Path] = {}
    for candidate in sorted(directory.iterdir()):
        split = normalize_split_name(candidate.stem)
        if split is None or candidate.suffix.lower() not in FORMATS or not candidate.is_file():
            continue
        if split in found:
            raise CompressError(
                f"{directory} has two {split} files ({found[split].name} and {candidate.name}); keep one."
            )
        found[split] = candidate
    if "train" not in found:
        raise CompressError(
            f"{directory} has no train file; put train, dev and test files ({SUFFIXES}) in it, "
            "or give the path of a single file."
        )
    return {split: found[split] for split in ("train", "dev", "test") if split in found}


def read_table(path: Path) -> datasets.Dataset:
    """Read one file with the ``datasets`` library after checking it is non-empty (and UTF-8).

    Raises:
        CompressError: unsupported suffix, empty file, not UTF-8, or unparseable.
    """
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise CompressError(f"{path.name} is not a {SUFFIXES} file; convert it to one of these formats.")
    builder, options = FORMATS[suffix]
    if path.stat().st_size == 0:
        raise CompressError(f"{path} is empty; give a file with a header and at least a few examples.")
    if builder != "parquet":
        lines = _check_utf8(path)
        if builder == "csv" and lines < 2:
            raise CompressError(f"{path} has a header but no rows; add examples to it.")
    # datasets' own logs are off: a reader failure is reported below in one line, not twice
    with tempfile.TemporaryDirectory(prefix="compress-read-") as tmp, quiet_datasets(logs=True):
        try:
            dataset = datasets.load_dataset(
                builder,
                data_files={"train": str(path)},
                split="train",
                cache_dir=tmp,
                keep_in_memory=True,
                **options,
            )
        except Exception as e:  # noqa: BLE001 - any reader failure is bad input here (but a Ctrl-C it wrapped)
            raise_if_interrupted(e)
            if builder == "json" and (where := _bad_json_line(path)) is not None:
                line, reason = where
                raise CompressError(
                    f"could not read {path.name} as {suffix[1:]}: line {line} is not valid JSON ({reason}); "
                    "fix or remove that line."
                ) from e
            raise CompressError(
                f"could not read {path.name} as {suffix[1:]} ({_reason(e)}); check that the file is valid {suffix[1:]}."
            ) from e
    assert isinstance(dataset, datasets.Dataset)
    return dataset


def _check_utf8(path: Path) -> int:
    """Raise unless the file is UTF-8 and not blank; return its number of non-blank lines."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    lines = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as e:
                raise CompressError(
                    f"{path} is not UTF-8 (bad byte at offset {offset + e.start}); re-save it as UTF-8."
                ) from None
            lines += sum(1 for line in text.lstrip("\ufeff").splitlines() if line.strip())
            offset += len(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise CompressError(f"{path} is not UTF-8 (it ends inside a character); re-save it as UTF-8.") from None
    if lines == 0:
        raise CompressError(f"{path} is empty; give a file with a header and at least a few examples.")
    return lines


def _bad_json_line(path: Path) -> tuple[int, str] | None:
    """The first line (1-based) where a JSON or JSON Lines file stops being valid, and why; ``None`` when
    Python's own parser finds nothing wrong (the reader failed for another reason).

    The reader's message counts rows from 0 and skips blank lines, so it cannot name the line to fix.
    """
    text = path.read_text(encoding="utf-8-sig")
    try:
        json.loads(text)
        return None  # one valid JSON document
    except json.JSONDecodeError as e:
        if text.lstrip().startswith("["):  # one JSON array: the document's own position is the answer
            return e.lineno, e.msg
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as e:
            return number, e.msg
    return None


def _reason(error: BaseException) -> str:
    while error.__cause__ is not None and not str(error).strip():
        error = error.__cause__
    cause = error.__cause__ or error.__context__
    message = str(error).strip().splitlines()
    text = message[0] if message else type(error).__name__
    if cause is not None and str(cause).strip():
        text = f"{text}: {str(cause).strip().splitlines()[0]}"
    return text.rstrip(".")[:200]
