"""Teacher fine-tuning end to end through the real CLI, its cache, and the training loop's seeds."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import make_tiny_teacher, run_cli, write_tiny_csv

from compress.data.load import load_task
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.teachers.finetune import FinetuneConfig, finetune_teacher
from compress.training import TrainConfig, no_better_than_majority, not_learning, train_stage


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune")
    return {
        "teacher": make_tiny_teacher(root / "teacher"),
        "csv": write_tiny_csv(root / "reviews.csv"),
        "env": {"COMPRESS_CACHE": str(root / "cache")},
    }


def test_finetune_cli_trains_records_and_then_hits_the_cache(tiny):
    args = ("teacher", "finetune", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
            "--epochs", "8", "--lr", "3e-3", "--batch-size", "8", "--json")
    first = run_cli(*args, env=tiny["env"])
    assert first.returncode == 0, first.stderr
    record = json.loads(first.stdout)
    assert record["cache_hit"] is False
    assert record["test"]["accuracy"] >= 0.9  # the tiny task is learnable; a broken loop stays at 0.5
    assert 0 <= record["test"]["macro_f1"] <= 1 and record["best_epoch"] >= 1
    assert len(record["history"]) == 8 and record["label_names"] == ["neg", "pos"]
    directory = tiny["teacher"].parent / "cache" / "teachers" / record["fingerprint"]
    assert (directory / "model.safetensors").is_file() and (directory / "record.json").is_file()
    assert (directory / "tokenizer.json").is_file()

    second = run_cli(*args, env=tiny["env"])
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["cache_hit"] is True and again["test"] == record["test"]


def test_same_seed_same_metrics_and_changed_config_misses_the_cache(tiny, monkeypatch):
    monkeypatch.setenv("COMPRESS_CACHE", str(tiny["teacher"].parent / "seeds-cache"))
    task = load_task(tiny["csv"])
    config = FinetuneConfig(train=TrainConfig(epochs=2, lr=3e-3, batch_size=8, seed=5))
    a = finetune_teacher(str(tiny["teacher"]), task, config, show_progress=False)
    b = finetune_teacher(str(tiny["teacher"]), task, config, show_progress=False, force=True)
    assert not a.cache_hit and not b.cache_hit
    assert a.record["history"] == b.record["history"] and a.record["test"] == b.record["test"]
    weights_a, weights_b = a.load().model.state_dict(), b.load().model.state_dict()
    assert all(torch.equal(weights_a[k], weights_b[k]) for k in weights_a)

    other = FinetuneConfig(train=TrainConfig(epochs=2, lr=3e-3, batch_size=8, seed=6))
    c = finetune_teacher(str(tiny["teacher"]), task, other, show_progress=False)
    assert not c.cache_hit and c.directory != a.directory


def test_finetune_bad_input_is_one_line(tiny, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence_text,label\nfine,pos\nbad,neg\n")
    done = run_cli("teacher", "finetune", "--teacher", str(tiny["teacher"]), "--dataset", str(bad), env=tiny["env"])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "sentence_text" in lines[0]
    done = run_cli("teacher", "finetune", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]),
                   "--layer-decay", "1.5", env=tiny["env"])
    assert done.returncode != 0 and done.stderr.strip().count("\n") == 0 and "layer_decay" in done.stderr


def test_layer_wise_lr_decay_gives_each_depth_its_rate():
    """Head at lr, layer l of L at lr * d ** (L + 1 - l), embeddings at lr * d ** (L + 1); no decay on
    biases and LayerNorms; worked out by hand for L = 4, d = 0.5, lr = 1."""
    from helpers import tiny_config

    from compress.errors import CompressError
    from compress.models.encoder import Encoder
    from compress.training import make_optimizer

    model = Encoder(tiny_config())
    optimizer = make_optimizer(model, [], TrainConfig(lr=1.0, weight_decay=0.1, layer_decay=0.5))
    rate = {id(p): (g["lr"], g["weight_decay"]) for g in optimizer.param_groups for p in g["params"]}
    expected = {"classifier.weight": (1.0, 0.1), "pooler.bias": (1.0, 0.0), "ffn.3.output.weight": (0.5, 0.1),
                "attention.3.layer_norm.weight": (0.5, 0.0), "attention.2.query.weight": (0.25, 0.1),
                "ffn.0.intermediate.bias": (0.0625, 0.0), "embeddings.word_embeddings.weight": (0.03125, 0.1)}
    named = dict(model.named_parameters())
    assert {name: rate[id(named[name])] for name in expected} == expected
    assert len(rate) == len(named)  # every parameter is trained, once

    with pytest.raises(CompressError, match="shares them across layers"):
        make_optimizer(Encoder(tiny_config(sharing="all")), [], TrainConfig(layer_decay=0.8))
    assert {g["lr"] for g in make_optimizer(model, [], TrainConfig(lr=2e-5)).param_groups} == {2e-5}  # no decay: one rate
    with pytest.raises(ValueError, match="layer_decay"):
        TrainConfig(layer_decay=0.0)


def test_no_better_than_majority_is_one_standard_error_above_the_majority_rate():
    labels = torch.tensor([0] * 30 + [1] * 10)          # majority 0.75; one standard error sqrt(.75 * .25 / 40) = 0.068
    assert no_better_than_majority(0.75, labels) == 0.75
    assert no_better_than_majority(0.25, labels) == 0.75  # answering the minority class is no better
    assert no_better_than_majority(0.81, labels) == 0.75  # 0.81 < 0.75 + 0.068
    assert no_better_than_majority(0.83, labels) is None
    assert no_better_than_majority(0.5, torch.tensor([], dtype=torch.long)) is None


def test_on_unbalanced_classes_a_model_that_follows_the_labels_is_learning_near_the_majoritys_accuracy():
    # mr-unbalanced's dev split (601 sentences, 85.7% positive): albert's first epoch answered 86.7% right with a
    # Matthews correlation of 0.32, the constant answer gives 85.7% and 0
    labels = torch.tensor([1] * 515 + [0] * 86)
    assert not_learning({"accuracy": 0.8669, "mcc": 0.3234}, labels) is None
    assert "no better than always answering" in not_learning({"accuracy": 0.8569, "mcc": 0.0}, labels)
    assert "no better than always answering" in not_learning({"accuracy": 0.8669, "mcc": 0.05}, labels)


def test_a_stage_still_at_the_majority_rate_after_its_first_epoch_says_so(tmp_path):
    """A model that learns nothing answers one class; the loop says so once, in the result, on the console
    and in the log, and trains on."""
    model = Encoder(EncoderConfig(vocab_size=40, embedding_size=8, hidden_size=8, num_layers=1, num_heads=2,
                                  ffn_size=16, max_positions=8))
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([1.0, 0.0]))    # always class 0
    ids = torch.randint(1, 40, (40, 6))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
             "labels": torch.tensor([0] * 30 + [1] * 10)}

    def frozen(m, b):  # a loss with a gradient of zero: nothing moves
        return (m.classifier.weight * 0).sum(), {}

    log = tmp_path / "log.jsonl"
    with open(log, "w") as f:
        result = train_stage(model, frozen, lambda epoch: [batch], lambda: [batch], TrainConfig(epochs=2, lr=1e-3),
                             device=torch.device("cpu"), name="stuck", log=f, show_progress=False)
    assert len(result.warnings) == 1 and "0.7500, no better than always answering" in result.warnings[0]
    assert [e["epoch"] for e in map(json.loads, log.read_text().splitlines()) if e.get("event") == "warning"] == [1]
    assert len(result.history) == 2  # it warns, it does not stop

    # A stage scored by its own dev loss (TinyBERT's intermediate stage) has no accuracy to judge.
    quiet = train_stage(model, frozen, lambda epoch: [batch], lambda: [batch],
                        TrainConfig(epochs=1, lr=1e-3, metric="loss"), device=torch.device("cpu"),
                        evaluate_fn=lambda evaluated: {"loss": 1.0}, show_progress=False)
    assert quiet.warnings == []
