"""`TaskData`: one loaded task (classification or regression), and the function that assembles it from rows.

Whatever the source (a named dataset, a local file, a hub dataset), a task ends up as the
same small object: train/dev/test splits as a :class:`datasets.DatasetDict` with columns
``id`` (str), ``text`` (str), optionally ``text_pair`` (str), and ``label`` (a
:class:`datasets.ClassLabel` carrying the label names, or a float32 value: the target of a regression task),
plus where the labels and the split came from and the split fingerprint
(:func:`compress.data.splits.split_fingerprint`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import datasets

from compress.data.splits import (
    SELECT,
    SPLIT_NAMES,
    SPLIT_PROPORTIONS,
    SPLIT_SEED,
    assign_splits,
    score_strata,
    split_fingerprint,
    stratified_split,
)
from compress.errors import CompressError


@dataclass(frozen=True)
class SplitInfo:
    """How the train/dev/test split of a task was made.

    Attributes:
        method: one line, e.g. ``"stratified by label, 80/10/10 train/dev/test, seed 13"``.
        proportions: the configured shares when compress made (part of) the split.
        seed: the split seed when compress made (part of) the split, else ``None``.
    """

    method: str
    proportions: dict[str, float] | None = None
    seed: int | None = None


@dataclass
class TaskData:
    """A task ready for training: named splits, label names (none for a regression), provenance.

    Attributes:
        name: dataset name (``mr``), file name, or ``hf:NAME[:CONFIG]``.
        label_names: label id -> name (``label_names[i]`` is the name of label ``i``); empty for a regression.
        splits: ``train``/``dev``/``test`` with columns ``id``, ``text``, [``text_pair``], ``label``.
        label_source: where the label mapping came from, in one sentence.
        source: where the examples came from (pinned archive, file path, hub id).
        split_info: how the split was made (:class:`SplitInfo`).
        fingerprint: hash of the example ids per split (16 hex digits); record it with runs.
        split_fingerprints: the same hash for each split alone.
        dropped: rows dropped from dev and test by :meth:`dedupe` (``{"dev": 8, "test": 12}``),
            empty when none were.
    """

    name: str
    label_names: list[str]
    splits: datasets.DatasetDict
    label_source: str
    source: str
    split_info: SplitInfo
    dropped: dict[str, int] = field(default_factory=dict)
    fingerprint: str = field(init=False)
    split_fingerprints: dict[str, str] = field(init=False)
    _content_digest: str | None = field(init=False, default=None, repr=False, compare=False)
    _train_overlap: dict[str, int] | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = {name: self.splits[name]["id"] for name in self.split_names}
        self.fingerprint = split_fingerprint(ids)
        self.split_fingerprints = {name: split_fingerprint({name: ids[name]}) for name in self.split_names}

    @property
    def split_names(self) -> tuple[str, ...]:
        """train, dev and test, and ``select`` where training examples were held out for a search (:meth:`hold_out`)."""
        return (*SPLIT_NAMES, SELECT) if SELECT in self.splits else SPLIT_NAMES

    @property
    def regression(self) -> bool:
        """Whether the labels are numbers to predict (a float32 ``label`` column) rather than classes."""
        return not isinstance(self.splits["train"].features["label"], datasets.ClassLabel)

    @property
    def num_labels(self) -> int:
        """Number of classes; 1 for a regression (the head's one output)."""
        return 1 if self.regression else len(self.label_names)

    def strata(self, split: str) -> list[int]:
        """What a split of ``split`` is stratified by: the label, or a regression target's decile."""
        labels = self.splits[split]["label"]
        return score_strata(labels) if self.regression else labels

    @property
    def has_pairs(self) -> bool:
        """Whether examples are text pairs (a ``text_pair`` column)."""
        return "text_pair" in self.splits["train"].column_names

    def content_digest(self) -> str:
        """Hash of every id, text, text pair and label, split by split (16 hex digits).

        The fingerprint names *which* examples are in each split; this digest changes when any
        text or label changes too, so caches of derived data (tokenized splits) key on both.
        """
        if self._content_digest is None:
            digest = hashlib.sha256("\x1f".join(self.label_names).encode())
            for name in self.split_names:
                split = self.splits[name]
                pairs = split["text_pair"] if self.has_pairs else [""] * len(split)
                digest.update(f"\x1e{name}".encode())
                for row in zip(split["id"], split["text"], pairs, split["label"], strict=True):
                    digest.update("\x1f".join(map(str, row)).encode("utf-8", "surrogatepass") + b"\x1e")
            self._content_digest = digest.hexdigest()[:16]
        return self._content_digest

    def _in_train(self, name: str) -> list[bool]:
        """For each row of split ``name``: whether its text (and text pair) is also a training row's.

        Texts are compared with runs of whitespace collapsed and the ends stripped (:func:`_same_text`),
        case kept: every tokenizer compress loads splits on whitespace first, so ``"a film "`` and
        ``"a  film"`` are the same input to the model, while case matters to cased teachers.
        """
        def rows(split: datasets.Dataset) -> list[tuple[str, ...]]:
            columns = [split["text"], split["text_pair"]] if self.has_pairs else [split["text"]]
            return [tuple(map(_same_text, row)) for row in zip(*columns, strict=True)]

        seen = set(rows(self.splits["train"]))
        return [row in seen for row in rows(self.splits[name])]

    def train_overlap(self) -> dict[str, int]:
        """How many dev and test rows have a text (and text pair) that also occurs in train.

        Exact match of the texts up to whitespace (see :meth:`_in_train`), whatever the labels: a test
        row that the model saw in training measures memory, not generalisation, so a user file with
        repeated rows inflates accuracy and retention unless they are counted (and, with :meth:`dedupe`,
        dropped).
        """
        if self._train_overlap is None:
            self._train_overlap = {name: sum(self._in_train(name)) for name in ("dev", "test")}
        return self._train_overlap

    def overlap_text(self) -> str | None:
        """One clause naming the overlap (``12 of 96 test rows and 8 of 96 dev rows``), ``None`` if none."""
        overlap = self.train_overlap()
        parts = [f"{overlap[name]} of {len(self.splits[name])} {name} rows" for name in ("test", "dev")
                 if overlap[name]]
        return " and ".join(parts) or None

    def dedupe(self) -> TaskData:
        """This task without the dev and test rows whose text occurs in train (``--dedupe``).

        The ids of dev and test change, so the fingerprint (and every cache keyed on it) differs
        from the undeduplicated task's.

        Raises:
            CompressError: dropping them would leave dev or test empty.
        """
        overlap = self.train_overlap()
        if not any(overlap.values()):
            return self
        splits = dict(self.splits)
        for name in ("dev", "test"):
            keep = [i for i, seen in enumerate(self._in_train(name)) if not seen]
            if not keep:
                raise CompressError(
                    f"every {name} row of {self.name} also occurs in the training split, so --dedupe would "
                    f"leave no {name} split; deduplicate the file or give {name} rows of their own."
                )
            splits[name] = self.splits[name].select(keep)
        dropped = {name: self.dropped.get(name, 0) + overlap[name] for name in ("dev", "test")}
        text = " and ".join(f"{overlap[name]} {name}" for name in ("dev", "test") if overlap[name])
        method = f"{self.split_info.method}; then {text} rows whose text occurs in train dropped (--dedupe)"
        return replace(self, splits=datasets.DatasetDict(splits), dropped=dropped,
                       split_info=replace(self.split_info, method=method))

    def hold_out(self, size: int, seed: int = SPLIT_SEED) -> TaskData:
        """This task with ``size`` training examples moved to a ``select`` split, stratified by label and seeded: the
        evidence a search selects on, which nothing trains on, tunes on or picks an epoch on (the teacher and every
        candidate train on the rest of train, and pick their epochs on dev). Another size or seed is another
        fingerprint, so every cache keyed on it (the teacher's fine-tuning, the runs) is another entry.

        Raises:
            CompressError: ``size`` would leave a label without a training example, or take none of one.
        """
        train = self.splits["train"]
        if size < 1 or SELECT in self.splits:
            return self
        labels = self.strata("train")
        counts = {label: labels.count(label) for label in set(labels)}
        share = size / len(train)
        name = (lambda stratum: f"decile {stratum + 1} of the target") if self.regression else \
            (lambda label: self.label_names[label])
        short = [name(label) for label, n in counts.items() if not 1 <= round(n * share) < n]
        if short:
            raise CompressError(
                f"holding {size:,} of {len(train):,} training examples out to select on would leave no training "
                f"example, or hold out none, of {', '.join(map(repr, sorted(short)))}; give a smaller "
                "--selection-size, or --select-on dev.")
        parts = stratified_split(labels, {"train": 1 - share, SELECT: share}, seed)
        splits = datasets.DatasetDict({**self.splits, "train": train.select(sorted(parts["train"])),
                                       SELECT: train.select(sorted(parts[SELECT]))})
        method = f"{self.split_info.method}; then {len(parts[SELECT]):,} training examples held out to select on " \
                 f"(stratified, seed {seed})"
        return replace(self, splits=splits, dropped=dict(self.dropped),
                       split_info=replace(self.split_info, method=method))

    def subset(self, max_per_split: int | Mapping[str, int]) -> TaskData:
        """A smaller task with the first examples of each split (splits are already shuffled).

        Args:
            max_per_split: one limit for every split, or ``{split: limit}`` (missing splits kept).
        """
        limits = dict.fromkeys(SPLIT_NAMES, max_per_split) if isinstance(max_per_split, int) else dict(max_per_split)
        splits = datasets.DatasetDict(
            {
                name: ds.select(range(min(len(ds), limits[name]))) if name in limits else ds
                for name, ds in self.splits.items()
            }
        )
        method = f"{self.split_info.method}; then the first {max_per_split} of each split"
        return replace(self, splits=splits, dropped=dict(self.dropped),
                       split_info=replace(self.split_info, method=method))


def _same_text(text: str) -> str:
    """``text`` as the overlap check compares it: whitespace runs collapsed to one space, ends stripped."""
    return " ".join(text.split())


def build_task(
    *,
    name: str,
    ids: Sequence[str],
    texts: Sequence[str],
    labels: Sequence[int] | Sequence[float],
    label_names: Sequence[str],
    label_source: str,
    source: str,
    text_pairs: Sequence[str] | None = None,
    given_splits: Sequence[str | None] | None = None,
    where: str | None = None,
    regression: bool = False,
) -> TaskData:
    """Assemble a :class:`TaskData` from parallel columns, making the split when needed.

    Args:
        ids, texts, labels, text_pairs: one entry per example; ids must be unique.
        label_names: label id -> name (none for a regression).
        regression: the labels are numbers to predict; the split is stratified by their deciles.
        given_splits: split name per example when the data names them, else ``None`` for the
            fixed stratified 80/10/10 split (seed :data:`~compress.data.splits.SPLIT_SEED`).
        where: what the examples are, for error messages (default: ``name``).
    """
    where = where or name
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        duplicate = next(i for i in ids if i in seen or seen.add(i))
        raise CompressError(
            f"{where} has the example id '{duplicate}' more than once; make the ids unique or drop the id column."
        )
    if regression:
        positions, method = assign_splits(score_strata(labels), given_splits, where, by="score decile")
    else:
        positions, method = assign_splits(labels, given_splits, where)
    compress_split = given_splits is None or "carved" in method
    features = {
        "id": datasets.Value("string"),
        "text": datasets.Value("string"),
    }
    if text_pairs is not None:
        features["text_pair"] = datasets.Value("string")
    features["label"] = datasets.Value("float32") if regression else datasets.ClassLabel(names=list(label_names))
    splits = {}
    for split_name in SPLIT_NAMES:
        rows = positions[split_name]
        columns: dict[str, list] = {
            "id": [ids[i] for i in rows],
            "text": [texts[i] for i in rows],
        }
        if text_pairs is not None:
            columns["text_pair"] = [text_pairs[i] for i in rows]
        columns["label"] = [labels[i] for i in rows]
        splits[split_name] = datasets.Dataset.from_dict(columns, features=datasets.Features(features))
    if regression and len(set(splits["train"]["label"])) < 2:
        raise CompressError(f"the regression target of {where} is the same number on every training row; there is "
                            "nothing to learn, so check the label column (--label-column).")
    return TaskData(
        name=name,
        label_names=list(label_names),
        splits=datasets.DatasetDict(splits),
        label_source=label_source,
        source=source,
        split_info=SplitInfo(
            method=method,
            proportions=dict(SPLIT_PROPORTIONS) if compress_split else None,
            seed=SPLIT_SEED if compress_split else None,
        ),
    )
