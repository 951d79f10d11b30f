"""The transfer data every distillation stage learns from besides the training sentences: augmented copies of each
training sentence (TinyBERT's word replacement, :mod:`compress.students.augment`) and the user's unlabeled in-domain
text (:mod:`compress.data.transfer_text`).

A copy or a text of the user's is learned from the teacher's outputs only: its label is ``NO_LABEL`` (a regression's
NaN), which the gold-label loss skips (:func:`compress.distill.losses.hard_ce`); a replaced word can turn a sentence's
meaning, and the teacher's answer on the copy says so where the source's gold label cannot.

The transfer split (:data:`compress.data.splits.TRANSFER`) holds the training sentences first, in their order, then
the copies (every sentence's copy 1, then every copy 2, ...), then the user's texts. It is made the first time a stage
asks (a quantization that trains nothing never makes it), cached per tokenization, teacher weights, copies, their
seed and the text file's content, and verified by checksum on every use (:mod:`compress.cache`); the teacher's outputs
on it are stored once per teacher (:mod:`compress.distill.teacher_targets`), so every student and seed asking for the
same copies shares them. Copy k of a sentence is the same whatever the number of copies asked for (each copy draws
from its own seeded generator: :mod:`compress.students.augment`).

A stage learns from every row of the split in every epoch, or, with ``--copies-per-epoch k``, epoch e (from 0) from
the training sentences, copies e*k+1 to e*k+k (cycling through the copies the split holds) and the user's texts
(:func:`epoch_rows`): as many different sentences as it has epochs, at the cost of k copies an epoch, with the
teacher's outputs still stored once for the whole split.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import datasets

from compress.cache import cached, unreadable
from compress.data.batching import TokenizedTask, tokenize_dataset
from compress.data.quiet import quiet_datasets
from compress.data.task import TaskData
from compress.data.transfer_split import TransferSplit
from compress.data.transfer_text import read_transfer_texts, transfer_digest
from compress.distill.losses import NO_LABEL
from compress.models.checkpoints import weights_digest
from compress.paths import cache_dir
from compress.train_config import DEFAULT_SEED

_FORMAT = 1   # enters the entry's key


@dataclass(frozen=True)
class TransferRequest:
    """What transfer data a run's stages learn from.

    copies       augmented copies of every training sentence
    texts        a file of the user's unlabeled text (``--transfer-text``), or None
    teacher_dir  the pre-trained teacher: its masked-LM head (``masked_lm``, where it has one) or its word-embedding
                 neighbours propose a copy's replacements
    masked_lm    ask the masked LM where the checkpoint has one
    seed         the copies' seed: one set of copies for every run seed, so their teacher outputs are shared
    """

    copies: int
    texts: str | None
    teacher_dir: Path
    masked_lm: bool = False
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.copies < 0:
            raise ValueError(f"the augmented copies must be 0 or more, got {self.copies}.")

    @property
    def empty(self) -> bool:
        return not self.copies and self.texts is None


def with_transfer(data: TokenizedTask, task: TaskData, request: TransferRequest, tokenizer: Any,
                  show_progress: bool = False) -> TokenizedTask:
    """``data`` whose stages train on its training sentences and ``request``'s transfer data (tokenized by
    ``tokenizer``, the model's), made when a stage first asks; ``data`` as it is when the request holds none."""
    if request.empty:
        return replace(data, transfer=None)
    def name() -> str:
        material = json.dumps({"format": _FORMAT, "data": data.cache_key,
                               "teacher": weights_digest(request.teacher_dir), "copies": request.copies,
                               "masked_lm": request.masked_lm, "seed": request.seed,
                               "texts": transfer_digest(request.texts) if request.texts else None}, sort_keys=True)
        return hashlib.sha256(material.encode()).hexdigest()[:20]

    what = ", ".join(part for part in (
        f"{request.copies} augmented cop{'y' if request.copies == 1 else 'ies'} of every training sentence"
        if request.copies else "", f"the texts of {request.texts}" if request.texts else "") if part)

    def build(tmp: Path) -> None:
        extra = _unlabeled_rows(task, request, show_progress)
        train = data.splits["train"]
        tokenized = tokenize_dataset(extra, tokenizer, data.max_length)
        with quiet_datasets():
            joined = datasets.concatenate_datasets([train, tokenized.cast(train.features)])
            joined.save_to_disk(str(tmp / "transfer"))

    def make(key: str) -> datasets.Dataset:
        return cached(cache_dir() / "transfer" / key, f"transfer data ({what})", build, _load)[0]

    return replace(data, transfer=TransferSplit(name, make, what, sentences=len(data.splits["train"]),
                                                copies=request.copies))


def _unlabeled_rows(task: TaskData, request: TransferRequest, show_progress: bool) -> datasets.Dataset:
    """The copies and the user's texts as task rows (``id``, ``text``, [``text_pair``], ``label``), every label
    ``NO_LABEL`` (NaN for a regression)."""
    from compress.students.augment import (
        AugmentConfig,
        EmbeddingNeighbours,
        augment_dataset,
        mlm_candidates_from_checkpoint,
    )
    from compress.teachers.registry import load_tokenizer

    train = task.splits["train"]
    pairs = "text_pair" in train.column_names
    rows: dict[str, list[Any]] = {"id": [], "text": [], **({"text_pair": []} if pairs else {})}
    if request.copies:
        config = AugmentConfig(copies=request.copies, seed=request.seed, masked_lm=request.masked_lm)
        tokenizer = load_tokenizer(str(request.teacher_dir))
        neighbours = EmbeddingNeighbours.from_checkpoint(request.teacher_dir, tokenizer, k=config.candidates)
        mlm = mlm_candidates_from_checkpoint(request.teacher_dir, tokenizer, k=config.candidates) \
            if config.masked_lm else None
        columns = ["id", "text", *(["text_pair"] if pairs else []), "label"]
        augmented = augment_dataset(train.select_columns(columns), tokenizer, neighbours, config, mlm, show_progress)
        ids = augmented["id"]
        # the copies only (the originals are the train split), copy 1 of every sentence first, then copy 2...
        numbered = [(int(name.rsplit("#aug", 1)[1]), i) for i, (name, source) in
                    enumerate(zip(ids, augmented["source_id"], strict=True)) if name != source]
        copies = augmented.select([i for _, i in sorted(numbered)])
        for name in rows:
            rows[name].extend(copies[name])
    if request.texts is not None:
        found = read_transfer_texts(request.texts, pairs)
        rows["id"].extend(f"transfer-{n}" for n in range(len(found.texts)))
        rows["text"].extend(found.texts)
        if pairs:
            rows["text_pair"].extend(found.pairs or [])
    rows["label"] = [float("nan") if task.regression else NO_LABEL] * len(rows["id"])
    return datasets.Dataset.from_dict(rows)


def _load(target: Path) -> datasets.Dataset:
    try:
        loaded = datasets.load_from_disk(str(target / "transfer"))
    except Exception as e:  # noqa: BLE001 - an entry this version cannot read is made again
        raise unreadable(e) from e
    if not isinstance(loaded, datasets.Dataset):
        raise ValueError("it holds no single split")
    return loaded
