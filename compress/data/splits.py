"""Fixed, seeded, stratified train/dev/test splits and the fingerprint that names them.

Every dataset without an official split (MR, BBC News, a user file without a ``split``
column) is split the same way: **80% train / 10% dev / 10% test, stratified by label,
seed 13** (:data:`SPLIT_PROPORTIONS`, :data:`SPLIT_SEED`). Inside each label the examples
are shuffled with ``numpy.random.default_rng(SPLIT_SEED)`` and cut at the proportions, so
every split keeps the label balance of the whole; each split is then shuffled once more
with the same generator, so the first N examples of a split are a fair sample of it.

A split is identified by its **fingerprint**: a hash of the sorted example ids of each split
(:func:`split_fingerprint`). Two runs that record the same fingerprint trained and tested
on the same examples.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from compress.errors import CompressError

SPLIT_NAMES: tuple[str, str, str] = ("train", "dev", "test")
"""The three splits every task has, in this order."""

SELECT = "select"
"""A fourth split a task may have: training examples held out for a search to select on (TaskData.hold_out)."""

TRANSFER = "transfer"
"""A tokenized task's training sentences with the transfer data after them (augmented copies, the user's unlabeled
text: no gold label), built when a distillation stage first asks (:mod:`compress.students.transfer`)."""

SPLIT_PROPORTIONS: dict[str, float] = {"train": 0.8, "dev": 0.1, "test": 0.1}
"""Share of each label that goes to each split when compress makes the split itself."""
SCORE_STRATA = 10
"""A regression's split is stratified by the decile of its target (:func:`score_strata`)."""

SPLIT_SEED: int = 13
"""Seed of the stratified split; changing it changes every fingerprint."""

SPLIT_ALIASES: dict[str, str] = {
    "train": "train",
    "training": "train",
    "dev": "dev",
    "development": "dev",
    "validation": "dev",
    "valid": "dev",
    "val": "dev",
    "test": "test",
    "testing": "test",
}
"""Accepted spellings of split names in a ``split`` column, a file name or a hub dataset."""


def normalize_split_name(value: object) -> str | None:
    """Map ``value`` (e.g. ``"Validation"``) to ``train``/``dev``/``test``; ``None`` if unknown."""
    if value is None:
        return None
    return SPLIT_ALIASES.get(str(value).strip().lower())


def stratified_split(
    labels: Sequence[int],
    proportions: Mapping[str, float] = SPLIT_PROPORTIONS,
    seed: int = SPLIT_SEED,
) -> dict[str, list[int]]:
    """Split positions ``0..len(labels)-1`` into named parts, stratified by label.

    For each label (in sorted order) its positions are permuted with one
    ``numpy.random.default_rng(seed)`` generator; every part but the first takes
    ``round(n * p)`` of them (at least one when the label has as many examples as there are
    parts), and the first part takes the rest. Each part is then shuffled. The result is a
    pure function of ``labels``, ``proportions`` and ``seed``.

    Returns:
        ``{part name: [positions]}`` with the parts in the order of ``proportions``.
    """
    names = list(proportions)
    rng = np.random.default_rng(seed)
    labels_arr = np.asarray(labels)
    parts: dict[str, list[int]] = {name: [] for name in names}
    for label in sorted(set(labels_arr.tolist())):
        positions = np.flatnonzero(labels_arr == label)
        positions = positions[rng.permutation(len(positions))]
        n = len(positions)
        start = 0
        counts: dict[str, int] = {}
        for name in names[1:]:
            k = math.floor(n * proportions[name] + 0.5)
            if k == 0 and n >= len(names):
                k = 1
            counts[name] = k
        counts[names[0]] = n - sum(counts.values())
        for name in names:
            parts[name].extend(positions[start : start + counts[name]].tolist())
            start += counts[name]
    for name in names:
        order = rng.permutation(len(parts[name]))
        parts[name] = [parts[name][i] for i in order]
    return parts


def score_strata(scores: Sequence[float], strata: int = SCORE_STRATA) -> list[int]:
    """The stratum of each regression target: its decile (``strata`` groups of equal size by rank, ties broken by
    position), so a split stratified by it keeps the targets' distribution in every part as a label's share is kept."""
    order = np.argsort(np.asarray(scores, dtype=np.float64), kind="stable")
    strata_of = np.empty(len(order), dtype=np.int64)
    strata_of[order] = np.arange(len(order)) * strata // max(len(order), 1)
    return strata_of.tolist()


def assign_splits(
    labels: Sequence[int],
    given: Sequence[str | None] | None,
    where: str,
    seed: int = SPLIT_SEED,
    by: str = "label",
) -> tuple[dict[str, list[int]], str]:
    """Decide the train/dev/test positions, honouring splits the data already names.

    Args:
        labels: label id per row (a regression's: its :func:`score_strata`).
        given: split name per row (``train``/``dev``/``test``) from a ``split`` column, from
            separate files or from a hub dataset; ``None`` to make the whole split here.
        where: what the rows are, for error messages.
        seed: split seed (:data:`SPLIT_SEED`).
        by: what ``labels`` are, for the description (``label``, ``score decile``).

    Without ``given`` the rows are split 80/10/10 (stratified, seeded). With ``given``, the
    named splits are kept; a missing dev or test split is carved out of train with the same
    stratified procedure at the same overall share (10% of the data each).

    Returns:
        ``({split: [positions]}, description of how the split was made)``.
    """
    if given is None:
        parts = stratified_split(labels, SPLIT_PROPORTIONS, seed)
        method = f"stratified by {by}, {_proportions_text()}, seed {seed}"
    else:
        present = {name: [i for i, s in enumerate(given) if s == name] for name in SPLIT_NAMES}
        if not present["train"]:
            raise CompressError(
                f"{where} names no 'train' rows; give train rows (or drop the split column "
                "and let compress split the data 80/10/10)."
            )
        missing = [name for name in ("dev", "test") if not present[name]]
        if not missing:
            parts = present
            method = "as given by the data"
        else:
            train_positions = present["train"]
            share = {name: SPLIT_PROPORTIONS[name] for name in ("train", *missing)}
            total = sum(share.values())
            share = {name: p / total for name, p in share.items()}
            carved = stratified_split([labels[i] for i in train_positions], share, seed)
            parts = dict(present)
            for name, positions in carved.items():
                parts[name] = [train_positions[i] for i in positions]
            method = (
                f"as given by the data; {' and '.join(missing)} carved from train (stratified by {by}, seed {seed})"
            )
    for name in SPLIT_NAMES:
        if not parts.get(name):
            raise CompressError(
                f"{where} has too few examples to fill a {name} split; give at least "
                f"{len(SPLIT_NAMES)} examples of each label."
            )
    return {name: parts[name] for name in SPLIT_NAMES}, method


def split_fingerprint(ids_per_split: Mapping[str, Iterable[str]]) -> str:
    """Hash of the sorted example ids of every split: 16 hex digits.

    The order inside a split does not matter; moving one example from dev to test does.
    """
    digest = hashlib.sha256()
    for name in sorted(ids_per_split):
        digest.update(f"[{name}]\n".encode())
        for example_id in sorted(str(i) for i in ids_per_split[name]):
            digest.update(example_id.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()[:16]


def _proportions_text() -> str:
    return "/".join(f"{round(SPLIT_PROPORTIONS[n] * 100)}" for n in SPLIT_NAMES) + " train/dev/test"
