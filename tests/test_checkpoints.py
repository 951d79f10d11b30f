"""Checkpoints in and out: parity with transformers on real and tiny BERT / ALBERT weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from helpers import HANG_GUARD, offline_hub_env, padded_batch, tiny_config
from transformers import (
    AlbertConfig,
    AlbertForSequenceClassification,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    BertModel,
)

from compress.models.checkpoints import load_encoder, save_encoder
from compress.models.encoder import Encoder
from compress.teachers.registry import resolve_teacher_dir
from compress.teachers.verify import verify_parity

TOL = dict(atol=1e-5, rtol=0)


def _hf_bert(num_labels: int = 3) -> BertForSequenceClassification:
    torch.manual_seed(1)
    config = BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=40, num_labels=num_labels)
    return BertForSequenceClassification(config).eval()


def _hf_albert(**changes) -> AlbertForSequenceClassification:
    torch.manual_seed(2)
    config = AlbertConfig(vocab_size=101, embedding_size=16, hidden_size=32, num_hidden_layers=4,
                          num_hidden_groups=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=40, num_labels=2, **changes)
    return AlbertForSequenceClassification(config).eval()


def _logits(model, batch):
    with torch.no_grad():
        out = model(**batch)
    return out.logits


def _randomized(config):
    """Our encoder with non-trivial layer norms and biases, so a dropped tensor would show."""
    torch.manual_seed(3)
    model = Encoder(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def test_real_minilm_matches_transformers():
    result = verify_parity("minilm")
    assert result.source == "bert"
    assert result.max_abs_diff < 1e-5
    assert result.max_abs_diff_pooled < 1e-5


def test_loads_bert_for_sequence_classification(tmp_path):
    hf = _hf_bert()
    hf.config.id2label = {0: "neg", 1: "neutral", 2: "pos"}
    hf.save_pretrained(tmp_path)
    loaded = load_encoder(tmp_path)
    assert loaded.source == "bert" and loaded.missing == []
    assert loaded.label_names == ["neg", "neutral", "pos"]
    batch = padded_batch()
    torch.testing.assert_close(loaded.model(**batch).logits.detach(), _logits(hf, batch), **TOL)


def test_loads_bare_bert_model_with_a_fresh_classifier(tmp_path):
    hf = BertModel(_hf_bert().config).eval()
    hf.save_pretrained(tmp_path)
    loaded = load_encoder(tmp_path, num_labels=5)
    assert loaded.model.config.num_labels == 5
    assert sorted(loaded.missing) == ["classifier.bias", "classifier.weight"]
    batch = padded_batch()
    with torch.no_grad():
        ours = loaded.model(**batch)
        theirs = hf(**batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(ours.last_hidden_state[real], theirs.last_hidden_state[real], **TOL)
    torch.testing.assert_close(ours.pooled, theirs.pooler_output, **TOL)


def test_loads_legacy_bin_with_gamma_beta_names(tmp_path):
    hf = _hf_bert()
    hf.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in hf.state_dict().items()}
    torch.save(state, tmp_path / "pytorch_model.bin")
    batch = padded_batch()
    torch.testing.assert_close(load_encoder(tmp_path).model(**batch).logits.detach(), _logits(hf, batch), **TOL)


@pytest.mark.parametrize("act", ["gelu_new", "gelu"])
def test_loads_albert_with_groups(tmp_path, act):
    hf = _hf_albert(hidden_act=act)
    hf.save_pretrained(tmp_path)
    loaded = load_encoder(tmp_path)
    config = loaded.model.config
    assert (loaded.source, config.sharing, config.groups, config.embedding_size) == ("albert", "all", 2, 16)
    batch = padded_batch()
    torch.testing.assert_close(loaded.model(**batch).logits.detach(), _logits(hf, batch), **TOL)


def test_bert_shape_exports_to_transformers_with_identical_logits(tmp_path):
    model = _randomized(tiny_config())
    assert save_encoder(model, tmp_path / "out", label_names=["a", "b", "c"]) == "bert"
    hf = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out").eval()
    assert type(hf).__name__ == "BertForSequenceClassification"
    assert hf.config.id2label == {0: "a", 1: "b", 2: "c"}
    batch = padded_batch()
    torch.testing.assert_close(_logits(hf, batch), model(**batch).logits.detach(), **TOL)
    torch.testing.assert_close(load_encoder(tmp_path / "out").model(**batch).logits, model(**batch).logits, **TOL)


@pytest.mark.parametrize(("embedding_size", "groups"), [(16, 1), (32, 1), (16, 2)])
def test_all_shared_exports_to_albert_with_identical_logits(tmp_path, embedding_size, groups):
    model = _randomized(tiny_config(embedding_size=embedding_size, sharing="all", groups=groups))
    assert save_encoder(model, tmp_path / "out") == "albert"
    hf = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out").eval()
    assert type(hf).__name__ == "AlbertForSequenceClassification"
    batch = padded_batch()
    torch.testing.assert_close(_logits(hf, batch), model(**batch).logits.detach(), **TOL)
    reloaded = load_encoder(tmp_path / "out").model
    assert reloaded.config.embedding_size == embedding_size
    torch.testing.assert_close(reloaded(**batch).logits, model(**batch).logits, **TOL)


@pytest.mark.parametrize("changes", [{"embedding_size": 16}, {"sharing": "attention", "groups": 2},
                                     {"sharing": "ffn", "embedding_size": 8}])
def test_other_shapes_round_trip_in_the_compress_format(tmp_path, changes):
    model = _randomized(tiny_config(**changes))
    assert save_encoder(model, tmp_path / "out", label_names=["x", "y", "z"]) == "compress"
    assert json.loads((tmp_path / "out" / "compress_config.json").read_text())["format"] == "compress-encoder"
    loaded = load_encoder(tmp_path / "out")
    assert loaded.model.config == model.config and loaded.label_names == ["x", "y", "z"]
    batch = padded_batch()
    assert torch.equal(loaded.model(**batch).logits, model(**batch).logits)


def test_export_saves_the_tokenizer_and_leaves_nothing_half_written(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_teacher_dir("minilm"))
    model = _randomized(tiny_config())
    save_encoder(model, tmp_path / "out", tokenizer=tokenizer)
    assert (tmp_path / "out" / "tokenizer.json").is_file()

    class Broken:
        def save_pretrained(self, directory):
            raise OSError("disk full")

    with pytest.raises(OSError):
        save_encoder(model, tmp_path / "other", tokenizer=Broken())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


_RESOLVE = """
from compress.errors import CompressError
from compress.teachers.registry import resolve_teacher_dir
try:
    print("resolved", resolve_teacher_dir("google-bert/bert-base-uncased"))
except CompressError as e:
    print(e)
"""


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "hub-unreachable"])
def test_unreachable_hub_id_fails_with_one_sentence_naming_the_alternatives(tmp_path, offline):
    # A fresh process: huggingface_hub fixes its cache path and offline mode when first imported, so setting
    # them in this (already importing) process would change nothing. The hub's address is a closed local port.
    env = {**os.environ, **offline_hub_env(tmp_path, offline=offline)}
    done = subprocess.run([sys.executable, "-c", _RESOLVE], capture_output=True, text=True, env=env, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    message = done.stdout.strip()
    assert message.startswith("cannot get 'google-bert/bert-base-uncased' from the Hugging Face hub"), message
    assert "minilm" in message and "local checkpoint directory" in message and "\n" not in message
    assert ("HF_HUB_OFFLINE is set" in message) == offline
    assert not list((tmp_path / "hf").rglob("*.safetensors"))


def test_export_has_ordinary_permissions(tmp_path):
    import os

    previous = os.umask(0o022)
    try:
        save_encoder(_randomized(tiny_config()), tmp_path / "out")
    finally:
        os.umask(previous)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "model.safetensors").stat().st_mode & 0o777 == 0o644
