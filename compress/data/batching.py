"""From examples to batches: token lengths, the maximum length, cached tokenization, dynamic padding.

* :func:`choose_max_length`: the 99th percentile of the train token lengths (special tokens
  included), capped at :data:`MAX_LENGTH_CAP` (128) and at the tokenizer's
  ``model_max_length``, unless a length is given.
* :func:`tokenize_task`: every split tokenized (truncated, not padded) into ``input_ids``,
  ``attention_mask``, ``token_type_ids`` and ``labels``; cached on disk under
  ``cache_dir()/tokenized/`` keyed by the split fingerprint, the content digest, the tokenizer
  (class, name, vocabulary hash) and the maximum length. The cache is written in one rename, with
  checksums that are verified on every use; a damaged entry is tokenized again (:mod:`compress.cache`).
* :class:`DynamicPaddingCollator`: pads each batch to its own longest example (:func:`compress.data.padding.
  pad_features`, into tensors).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from torch.utils.data import DataLoader

from compress.cache import cached, unreadable
from compress.data.padding import length_sorted_batches, pad_features, pad_token_id_of
from compress.data.quiet import quiet_datasets
from compress.data.splits import TRANSFER
from compress.data.task import TaskData
from compress.paths import atomic_write_text, cache_dir

MAX_LENGTH_CAP: int = 128
"""Upper bound of the automatically chosen maximum length."""
MAX_LENGTH_PERCENTILE: float = 99.0
"""Percentile of the train token lengths that sets the automatic maximum length."""
PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
"""Percentiles reported by :func:`length_percentiles` (plus ``max``)."""
MODEL_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids", "labels")
PROGRESS_BAR_MIN_EXAMPLES: int = 50_000
"""Tokenizing fewer examples than this shows no progress bar (it takes about a second)."""
_CACHE_FORMAT = 2  # 2: entries carry checksums.json (compress.cache)
_UNSET_MODEL_MAX_LENGTH = 1_000_000  # tokenizers without a limit report about 1e30


def token_lengths(
    texts: Sequence[str],
    tokenizer: Any,
    text_pairs: Sequence[str] | None = None,
    *,
    batch_size: int = 1000,
) -> np.ndarray:
    """Number of tokens of every example, special tokens included, without truncation."""
    lengths: list[int] = []
    for start in range(0, len(texts), batch_size):
        pairs = list(text_pairs[start : start + batch_size]) if text_pairs is not None else None
        encoded = tokenizer(
            list(texts[start : start + batch_size]),
            pairs,
            add_special_tokens=True,
            truncation=False,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,
        )
        lengths.extend(len(ids) for ids in encoded["input_ids"])
    return np.asarray(lengths, dtype=np.int64)


def split_token_lengths(split: datasets.Dataset, tokenizer: Any) -> np.ndarray:
    """:func:`token_lengths` of a split with ``text`` and optional ``text_pair`` columns."""
    pairs = split["text_pair"] if "text_pair" in split.column_names else None
    return token_lengths(split["text"], tokenizer, pairs)


def length_percentiles(lengths: np.ndarray) -> dict[str, int]:
    """``{"p50", "p90", "p95", "p99", "max"}`` of token lengths.

    ``pN`` is the smallest observed length that at least N% of the examples do not exceed
    (numpy's ``inverted_cdf`` method), so a maximum length of ``p99`` truncates at most 1%.
    """
    if len(lengths) == 0:
        return {**{f"p{p}": 0 for p in PERCENTILES}, "max": 0}
    out = {f"p{p}": int(np.percentile(lengths, p, method="inverted_cdf")) for p in PERCENTILES}
    out["max"] = int(lengths.max())
    return out


def model_max_length(tokenizer: Any) -> int | None:
    """The tokenizer's ``model_max_length``, or ``None`` when it sets no real limit."""
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int | float) and 0 < limit < _UNSET_MODEL_MAX_LENGTH else None


def choose_max_length(
    task: TaskData,
    tokenizer: Any,
    *,
    percentile: float = MAX_LENGTH_PERCENTILE,
    cap: int = MAX_LENGTH_CAP,
) -> int:
    """The maximum length for ``task``: ``min(p{percentile} of train lengths, cap, model_max_length)``."""
    lengths = split_token_lengths(task.splits["train"], tokenizer)
    return max_length_from_lengths(lengths, tokenizer, percentile=percentile, cap=cap)


def max_length_from_lengths(
    lengths: np.ndarray,
    tokenizer: Any,
    *,
    percentile: float = MAX_LENGTH_PERCENTILE,
    cap: int = MAX_LENGTH_CAP,
) -> int:
    """``min(p{percentile} of lengths, cap, model_max_length)``, at least 1."""
    chosen = int(np.percentile(lengths, percentile, method="inverted_cdf")) if len(lengths) else cap
    limit = model_max_length(tokenizer)
    return max(1, min(chosen, cap, limit if limit is not None else cap))


def tokenizer_id(tokenizer: Any) -> str:
    """A stable id of what a tokenizer does, wherever it was loaded from.

    For a ``tokenizers``-backed tokenizer it hashes the whole pipeline (normalizer, pre-tokenizer,
    vocabulary, post-processor) except the truncation and padding state, which calls change; so the
    teacher, its fine-tuned copy and a student saved with its tokenizer share one cache entry.
    Otherwise it hashes the vocabulary and the lower-casing flag.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        pipeline = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
        material = json.dumps(pipeline, sort_keys=True, ensure_ascii=False)
    else:
        lower = getattr(tokenizer, "do_lower_case", None)
        material = json.dumps([sorted(tokenizer.get_vocab().items()), lower], ensure_ascii=False)
    return f"{type(tokenizer).__name__}:{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def tokenize_dataset(
    dataset: datasets.Dataset, tokenizer: Any, max_length: int, *, fingerprint: str | None = None
) -> datasets.Dataset:
    """Tokenize a dataset with ``text`` [``text_pair``] ``label`` columns into :data:`MODEL_INPUTS`.

    Truncates to ``max_length`` (longest-first for pairs) and does not pad; the collator pads.
    ``fingerprint`` names the result for ``datasets`` (derived from the inputs when ``None``).
    """
    has_pairs = "text_pair" in dataset.column_names

    def encode(batch: dict[str, list]) -> dict[str, list]:
        encoded = tokenizer(
            batch["text"],
            batch["text_pair"] if has_pairs else None,
            truncation=True,
            max_length=max_length,
            return_attention_mask=True,
            return_token_type_ids=True,
            verbose=False,
        )
        return {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            "token_type_ids": encoded["token_type_ids"],
            "labels": batch["label"],
        }

    if fingerprint is None:
        material = f"{dataset._fingerprint}|{tokenizer_id(tokenizer)}|{max_length}"
        fingerprint = hashlib.sha256(material.encode()).hexdigest()[:16]
    with quiet_datasets() if len(dataset) < PROGRESS_BAR_MIN_EXAMPLES else nullcontext():
        return dataset.map(
            encode,
            batched=True,
            remove_columns=dataset.column_names,
            new_fingerprint=fingerprint,
            desc="Tokenizing",
        )


@dataclass(frozen=True)
class DynamicPaddingCollator:
    """Collate tokenized examples into a batch padded to its longest example.

    Returns ``input_ids`` (padded with ``pad_token_id``), ``attention_mask`` and
    ``token_type_ids`` (padded with 0), all ``long`` tensors of shape ``[batch, length]``, and
    ``labels`` (``long``, ``[batch]``; a regression's ``float32``) when the examples have labels. ``length`` is rounded up
    to a multiple of ``pad_to_multiple_of`` when set. Missing ``token_type_ids`` are zeros.
    """

    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        padded = pad_features(features, self.pad_token_id, self.pad_to_multiple_of)
        batch = {name: torch.from_numpy(array) for name, array in padded.items()}
        if all("labels" in f for f in features):
            labels = [f["labels"] for f in features]    # class ids, or a regression's targets (floats)
            batch["labels"] = torch.as_tensor(labels, dtype=torch.float32) if isinstance(labels[0], float) else \
                torch.as_tensor([int(label) for label in labels], dtype=torch.long)
        return batch


# On a GPU, training batches are padded to a multiple of this many tokens: a few shapes instead of one per length, so
# the kernels a GPU sets up per shape (cuDNN's attention plans in half precision) are set up a few times per run.
GPU_PAD_MULTIPLE = 8


def for_device(data: TokenizedTask, device: Any, max_positions: int) -> TokenizedTask:
    """``data`` as a stage on ``device`` batches it: on a GPU padded to a multiple of :data:`GPU_PAD_MULTIPLE` tokens
    where the model's ``max_positions`` allow it (padding is masked: the results do not change), else unchanged."""
    padded = -(-data.max_length // GPU_PAD_MULTIPLE) * GPU_PAD_MULTIPLE
    if getattr(device, "type", device) != "cuda" or padded > max_positions:
        return data
    return replace(data, collator=replace(data.collator, pad_to_multiple_of=GPU_PAD_MULTIPLE))


def collator_for(tokenizer: Any, pad_to_multiple_of: int | None = None) -> DynamicPaddingCollator:
    """A :class:`DynamicPaddingCollator` using the tokenizer's pad token id (0 when it has none)."""
    return DynamicPaddingCollator(pad_token_id=pad_token_id_of(tokenizer), pad_to_multiple_of=pad_to_multiple_of)


def length_grouped_batches(lengths: Sequence[int], batch_size: int, seed: int, pool: int = 50) -> list[list[int]]:
    """Seeded random batches of examples of similar length.

    The examples are shuffled, cut into pools of ``pool * batch_size``, sorted by length inside
    each pool and batched; then the batches are shuffled. Batches stay random in content and
    order, but padding (and so wasted computation) falls sharply with dynamic padding.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths)).tolist()
    batches: list[list[int]] = []
    for start in range(0, len(order), batch_size * pool):
        chunk = sorted(order[start : start + batch_size * pool], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def make_dataloader(
    dataset: datasets.Dataset,
    collate_fn: Any,
    *,
    batch_size: int = 32,
    shuffle: bool = False,
    seed: int = 0,
    pin_memory: bool = False,
) -> DataLoader:
    """Batches of a tokenized dataset: in order, or (``shuffle``) seeded and grouped by length; ``pin_memory`` (for
    a GPU) collates into page-locked memory, from which the copies to the GPU overlap its work."""
    if not shuffle:
        return DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn, pin_memory=pin_memory)
    lengths = [len(ids) for ids in dataset["input_ids"]]
    return DataLoader(dataset, batch_sampler=length_grouped_batches(lengths, batch_size, seed), collate_fn=collate_fn,
                      pin_memory=pin_memory)


@dataclass(frozen=True)
class IndexedBatches:
    """Batches of ``dataset`` made of the examples ``batches`` lists, each with an ``index`` tensor: the positions of
    its examples in the dataset, by which :func:`compress.training.predict` puts its outputs back in dataset order."""

    dataset: datasets.Dataset
    collator: Any
    batches: list[list[int]]

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for indices in self.batches:
            batch = self.collator(self.dataset.__getitems__(indices))
            batch["index"] = torch.as_tensor(indices, dtype=torch.long)
            yield batch


class LazySplit:
    """A split made the first time it is asked for, then kept: ``name()`` gives the key that names what it holds
    (computed once, on first use: it may read files), ``build(key)`` the split (cached on disk under that key)."""

    def __init__(self, name: Callable[[], str], build: Callable[[str], datasets.Dataset], describe: str = "") -> None:
        self.describe = describe
        self._name, self._build = name, build
        self._key: str | None = None
        self._split: datasets.Dataset | None = None

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = self._name()
        return self._key

    def get(self) -> datasets.Dataset:
        if self._split is None:
            self._split = self._build(self.key)
        return self._split


@dataclass(frozen=True)
class TokenizedTask:
    """A task's splits tokenized for one tokenizer and maximum length.

    Attributes:
        splits: ``train``/``dev``/``test`` with :data:`MODEL_INPUTS` columns.
        max_length: the truncation length used.
        label_names: label id -> name, from the task.
        fingerprint: the task's split fingerprint.
        cache_key: the key of the on-disk cache entry.
        collator: pads batches with the tokenizer's pad token.
        transfer: the training sentences with the transfer data after them, made when a distillation stage first
            asks (None: a stage trains on ``train`` alone).
    """

    splits: datasets.DatasetDict
    max_length: int
    label_names: list[str]
    fingerprint: str
    cache_key: str
    collator: DynamicPaddingCollator
    transfer: LazySplit | None = None

    def split_key(self, split: str) -> str:
        """What names ``split`` in the caches of the teacher's outputs: the tokenization's key and the split's name
        (the transfer split's own key beside them)."""
        if split == TRANSFER and self.transfer is not None:
            return f"{self.cache_key}-{split}-{self.transfer.key}"
        return f"{self.cache_key}-{split}"

    def split(self, name: str) -> datasets.Dataset:
        """One split by name, the transfer split (:data:`TRANSFER`, made on first use) included."""
        if name == TRANSFER and self.transfer is not None:
            return self.transfer.get()
        return self.splits[name]

    @property
    def training_split(self) -> str:
        """The name of the split a distillation stage trains on: the transfer split where the run has one."""
        return TRANSFER if self.transfer is not None else "train"

    def dataloader(self, split: str, *, batch_size: int = 32, shuffle: bool | None = None, seed: int = 0,
                   pin_memory: bool = False) -> DataLoader:
        """Batches of one split; shuffled (seeded) by default for ``train`` only."""
        shuffle = split == "train" if shuffle is None else shuffle
        return make_dataloader(self.splits[split], self.collator, batch_size=batch_size, shuffle=shuffle, seed=seed,
                               pin_memory=pin_memory)

    def eval_batches(self, split: str, batch_size: int = 128) -> IndexedBatches:
        """The batches of a pass that only reads a model (evaluation, logits): sorted by length, so each is padded
        to a length its sentences share rather than to the longest of ``batch_size`` in dataset order (on MR's
        test split half the tokens of an in-order pass), each carrying its examples' positions (``index``)."""
        examples = self.split(split)
        return IndexedBatches(examples, self.collator,
                              length_sorted_batches([len(ids) for ids in examples["input_ids"]], batch_size))

    def sample(self, examples: int, seed: int, batch_size: int = 32) -> list[dict[str, torch.Tensor]]:
        """The first ``examples`` training examples of a seeded shuffle, in batches of ``batch_size`` (what
        pruning scores importance on and low-rank factorization calibrates on)."""
        batches: list[dict[str, torch.Tensor]] = []
        for batch in self.dataloader("train", batch_size=batch_size, shuffle=True, seed=seed):
            batches.append(batch)
            if sum(len(b["input_ids"]) for b in batches) >= examples:
                break
        return batches


def tokenization_key(task: TaskData, tokenizer: Any, max_length: int, *, tokenizer_key: str | None = None) -> str:
    """Cache key: split fingerprint + content digest + tokenizer id + maximum length."""
    tokenizer_key = tokenizer_key or tokenizer_id(tokenizer)
    material = f"{_CACHE_FORMAT}|{task.fingerprint}|{task.content_digest()}|{tokenizer_key}|{max_length}"
    return hashlib.sha256(material.encode()).hexdigest()[:20]


def tokenize_task(
    task: TaskData,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    cache: bool = True,
) -> TokenizedTask:
    """Tokenize every split of ``task``, reusing the on-disk cache when it holds this exact job.

    Args:
        task: the task.
        tokenizer: a ``transformers`` tokenizer.
        max_length: truncation length; ``None`` chooses it with :func:`choose_max_length`.
        cache: read and write ``cache_dir()/tokenized/<key>``.
    """
    if max_length is None:
        max_length = choose_max_length(task, tokenizer)
    tokenizer_key = tokenizer_id(tokenizer)
    key = tokenization_key(task, tokenizer, max_length, tokenizer_key=tokenizer_key)
    collator = collator_for(tokenizer)

    def tokenize_splits() -> datasets.DatasetDict:
        return datasets.DatasetDict(
            {
                name: tokenize_dataset(split, tokenizer, max_length, fingerprint=f"{key}-{name}")
                for name, split in task.splits.items()
            }
        )

    def build(tmp: Path) -> None:
        with quiet_datasets():
            tokenize_splits().save_to_disk(str(tmp / "splits"))
        meta = {"key": key, "fingerprint": task.fingerprint, "tokenizer": tokenizer_key,
                "max_length": max_length, "task": task.name}  # fmt: skip
        atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=1))

    if cache:
        splits, _ = cached(cache_dir() / "tokenized" / key, "tokenized task", build, lambda t: _load_cached(t, key))
    else:
        splits = tokenize_splits()
    return TokenizedTask(
        splits=splits,
        max_length=max_length,
        label_names=list(task.label_names),
        fingerprint=task.fingerprint,
        cache_key=key,
        collator=collator,
    )


def _load_cached(target: Path, key: str) -> datasets.DatasetDict:
    """The cached tokenized splits (memory-mapped from the entry); ``ValueError`` when the intact entry
    is for another key or cannot be read (then :func:`compress.cache.cached` tokenizes again)."""
    try:
        meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
        loaded = datasets.load_from_disk(str(target / "splits"))
    except Exception as e:  # noqa: BLE001 - an entry this version cannot read is rebuilt
        raise unreadable(e) from e
    if meta.get("key") != key or not isinstance(loaded, datasets.DatasetDict):
        raise ValueError("it holds another tokenization than its key says")
    return loaded
