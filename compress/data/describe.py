"""`describe_task`: the numbers `compress data show` prints, as a plain JSON-ready dict."""

from __future__ import annotations

from collections import Counter
from typing import Any, TypedDict

import numpy as np

from compress.data.batching import length_percentiles, max_length_from_lengths, split_token_lengths, tokenizer_id
from compress.data.named import NAMED_DATASETS
from compress.data.splits import SPLIT_NAMES
from compress.data.task import TaskData


class SplitDescription(TypedDict, total=False):
    size: int
    fingerprint: str
    label_counts: dict[str, int]
    label_fractions: dict[str, float]
    target: dict[str, float]           # a regression's: mean, sd, min, max of its target
    token_lengths: dict[str, int]      # percentiles (with a tokenizer)


class Example(TypedDict, total=False):
    id: str
    label: str
    text: str
    text_pair: str


class SplitProvenance(TypedDict):
    """How the splits were made (the task's :class:`compress.data.task.SplitInfo`, as JSON)."""

    method: str                              # one line, e.g. "stratified by label, 80/10/10 ..., seed 13"
    proportions: dict[str, float] | None     # the configured shares, when compress made (part of) the split
    seed: int | None                         # the split seed, when compress made (part of) the split


class TaskDescription(TypedDict, total=False):
    """What `compress data show` prints (and prints as JSON): see :func:`describe_task`."""

    name: str
    source: str
    labels: list[str]
    label_source: str
    text_pair: bool
    split: SplitProvenance
    fingerprint: str
    in_train: dict[str, int]
    splits: dict[str, SplitDescription]
    tokenizer: str
    max_length: int
    examples: list[Example]
    teacher: str                       # added by the CLI: whose tokenizer measured the lengths


class NamedDataset(TypedDict):
    """One row of `compress data list`."""

    name: str
    title: str
    source: str
    source_short: str
    sha256: str
    size: int
    labels: list[str]
    cached: bool


def describe_task(task: TaskData, tokenizer: Any | None = None, *, examples: int = 3,
                  max_chars: int = 200) -> TaskDescription:
    """Sizes, label balance, token lengths, split provenance and a few examples of a task.

    Args:
        task: the loaded task.
        tokenizer: when given, token-length percentiles per split (p50/p90/p95/p99/max, special
            tokens included, no truncation) and the automatically chosen maximum length.
        examples: how many train examples to include (the first ones of the shuffled split).
        max_chars: examples longer than this are cut and end with ``…``.

    Returns:
        ``{"name", "source", "labels", "label_source", "text_pair", "split", "fingerprint",
        "splits": {"train"|"dev"|"test": {"size", "fingerprint", "label_counts",
        "label_fractions", "token_lengths"?}}, "tokenizer"?, "max_length"?, "examples"}``.
    """
    splits: dict[str, SplitDescription] = {}
    train_lengths = None
    for name in SPLIT_NAMES:
        split = task.splits[name]
        counts = Counter(split["label"])
        size = len(split)
        entry = SplitDescription(
            size=size,
            fingerprint=task.split_fingerprints[name],
            label_counts={label: counts.get(i, 0) for i, label in enumerate(task.label_names)},
            label_fractions={
                label: round(counts.get(i, 0) / size, 4) if size else 0.0 for i, label in enumerate(task.label_names)
            },
        )
        if task.regression and size:
            values = np.asarray(split["label"], dtype=np.float64)
            entry["target"] = {"mean": round(float(values.mean()), 4), "sd": round(float(values.std()), 4),
                               "min": round(float(values.min()), 4), "max": round(float(values.max()), 4)}
        if tokenizer is not None:
            lengths = split_token_lengths(split, tokenizer)
            train_lengths = lengths if name == "train" else train_lengths
            entry["token_lengths"] = length_percentiles(lengths)
        splits[name] = entry
    info = task.split_info
    out = TaskDescription(
        name=task.name,
        source=task.source,
        labels=list(task.label_names),
        label_source=task.label_source,
        text_pair=task.has_pairs,
        split=SplitProvenance(method=info.method, proportions=info.proportions, seed=info.seed),
        fingerprint=task.fingerprint,
        in_train=dict(task.train_overlap()),  # dev/test rows whose text also occurs in train
        splits=splits,
    )
    if tokenizer is not None:
        out["tokenizer"] = tokenizer_id(tokenizer)
        out["max_length"] = max_length_from_lengths(train_lengths, tokenizer)
    train = task.splits["train"]
    out["examples"] = [
        Example(id=row["id"], label=f"{row['label']:g}" if task.regression else task.label_names[row["label"]],
                text=_cut(row["text"], max_chars),
                **({"text_pair": _cut(row["text_pair"], max_chars)} if task.has_pairs else {}))
        for row in train.select(range(min(examples, len(train))))
    ]
    return out


def describe_named_datasets() -> list[NamedDataset]:
    """One row per named dataset: name, title, source archive, size, label names, cached or not."""
    return [
        NamedDataset(name=d.name, title=d.title, source=f"{d.archive.describe()} ({d.archive.filename})",
                     source_short=d.archive.describe(), sha256=d.archive.sha256, size=d.size,
                     labels=list(d.label_names) or ["a number (regression)"], cached=d.is_cached())
        for d in NAMED_DATASETS.values()
    ]


def _cut(text: str, max_chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= max_chars else flat[: max_chars - 1].rstrip() + "…"
