"""The real `compress` command, run as a user runs it (a subprocess), for the foundation commands."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import offline_hub_env, run_cli
from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel

from compress.registry import all_methods

# What `compress explain` lists: each method's topic (the quantization formats share one), in rank order.
TOPICS = list(dict.fromkeys(m.explain_topic for m in all_methods()))


def _meta_count(model_cls, config) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in model_cls(config).parameters())


def test_explain_albert_bert_large_matches_transformers_counts():
    done = run_cli("explain", "albert", "--teacher", "bert-large", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    t, s = data["teacher"]["config"], data["student"]["config"]
    bert = BertConfig(vocab_size=t["vocab_size"], hidden_size=t["hidden_size"], num_hidden_layers=t["num_layers"],
                      num_attention_heads=t["num_heads"], intermediate_size=t["ffn_size"])
    albert = AlbertConfig(vocab_size=s["vocab_size"], embedding_size=s["embedding_size"],
                          hidden_size=s["hidden_size"], num_hidden_layers=s["num_layers"],
                          num_attention_heads=s["num_heads"], intermediate_size=s["ffn_size"],
                          num_hidden_groups=s["groups"])
    # bert-large is BERT-large (L24 H1024) and its student is ALBERT-large (E128, all shared).
    assert (t["num_layers"], t["hidden_size"], s["embedding_size"], s["sharing"]) == (24, 1024, 128, "all")
    assert data["teacher"]["params"] == _meta_count(BertModel, bert)
    assert data["student"]["params"] == _meta_count(AlbertModel, albert)
    assert data["teacher"]["classifier_params"] == 1024 * 2 + 2
    assert isinstance(data["teacher"]["flops"], int) and isinstance(data["student"]["flops"], int)
    assert data["student"]["flops"] >= data["teacher"]["flops"]  # sharing does not cut FLOPs


def test_explain_all_covers_every_method_and_renders_tables():
    done = run_cli("explain", "all", "--json")
    assert done.returncode == 0, done.stderr
    methods = json.loads(done.stdout)["methods"]
    assert set(methods) == set(TOPICS)
    assert methods["prune"]["student"]["flops"] * 2 == pytest.approx(methods["prune"]["teacher"]["flops"], rel=0.01)
    assert methods["distilbert"]["student"]["config"]["num_layers"] == 3
    assert methods["tinybert"]["student"]["config"]["hidden_size"] == 312
    quantize = methods["quantize"]
    assert quantize["student"]["params"] == quantize["teacher"]["params"]
    assert quantize["student"]["size_bytes"] < quantize["teacher"]["size_bytes"]

    text = run_cli("explain", "albert")
    assert text.returncode == 0, text.stderr
    assert "Sharing cuts parameters, not FLOPs" in text.stdout
    assert "paper 31M" in text.stdout  # the ablation beside the paper's Tables 3-4


def test_explain_with_no_method_renders_every_topic_as_tables():
    """`compress explain` alone (all topics), as a person reads it: each topic's panel and its FLOPs row at the
    asked sequence length (the human rendering once failed where --json passed)."""
    done = run_cli("explain", "--seq-len", "64")
    assert done.returncode == 0, done.stderr
    for topic in TOPICS:
        assert f"{topic}: what changes" in done.stdout, topic
    assert done.stdout.count("FLOPs per sequence of 64") == len(TOPICS)


def test_explain_takes_the_shape_options_and_counts_them_as_transformers_does():
    def student(*args: str) -> dict:
        done = run_cli("explain", *args, "--teacher", "bert-base", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["student"]

    base = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    # Not shared and not factorized is BERT-base again; two groups of shared layers at E = 128 is ALBERT's own shape.
    assert student("albert", "--sharing", "none", "--embedding-size", "768")["params"] == \
        _meta_count(BertModel, BertConfig(**base))
    grouped = student("albert[groups=2]", "--embedding-size", "128")
    assert grouped["config"]["groups"] == 2
    assert grouped["params"] == _meta_count(AlbertModel, AlbertConfig(**base, embedding_size=128, num_hidden_groups=2))
    # the FFN block is bigger than the attention block
    assert student("albert", "--sharing", "attention")["params"] > student("albert", "--sharing", "ffn")["params"]
    assert student("prune", "--keep-heads", "0.5", "--keep-ffn", "1.0")["config"]["heads"] == [6] * 12


def test_bad_input_is_one_line_and_exit_2():
    for args, expected in [
        (("explain", "pruning"), ", ".join(TOPICS)),
        (("explain", "albert", "--teacher", "gpt-17"), "minilm, bert-base, bert-large"),
        (("explain", "albert", "--seq-len", "0"), "--seq-len"),
        (("explain", "albert", "--keep-heads", "0.5"), "--keep-heads"),
        (("explain", "all", "--sharing", "none"), "name the method"),
        (("explain", "albert+int8"), "one method"),
        (("explain", "albert", "--sharing", "most"), "sharing"),
    ]:
        done = run_cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_teachers_list_and_verify(tmp_path):
    listed = run_cli("teachers", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["alias"]: r for r in json.loads(listed.stdout)}
    assert rows["minilm"]["available"] and rows["minilm"]["default"]
    assert {"bert-base", "bert-large"} <= set(rows)

    verified = run_cli("teachers", "verify", "minilm", "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["max_abs_diff"] < 1e-5

    # Offline mode and an empty private cache are set before the CLI's process imports the hub.
    offline = run_cli("teachers", "verify", "bert-large", env=offline_hub_env(tmp_path))
    assert offline.returncode == 2
    assert len(offline.stderr.strip().splitlines()) == 1 and "minilm" in offline.stderr
    assert "cannot get 'google-bert/bert-large-uncased' from the Hugging Face hub" in offline.stderr
    assert "HF_HUB_OFFLINE is set" in offline.stderr


def test_teachers_init_draws_a_checkpoint_of_the_alias_shape_and_writes_over_nothing(tmp_path):
    """`compress teachers init` (bert-large where the hub is out of reach) writes a BERT checkpoint of the alias's
    shape, parameter for parameter as transformers counts that shape, which our encoder loads and verifies; a
    second call on the same directory and an unknown alias are refused in one line."""
    out = tmp_path / "teacher"
    done = run_cli("teachers", "init", str(out), "--like", "minilm", "--seed", "3")
    assert done.returncode == 0, done.stderr
    from compress.models.checkpoints import load_encoder
    from compress.teachers.registry import TEACHERS

    c = TEACHERS["minilm"].config
    expected = _meta_count(BertModel, BertConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size,
                                                 num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                                                 intermediate_size=c.ffn_size, max_position_embeddings=512))
    model = load_encoder(out).model
    assert sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in model.classifier.parameters()) \
        == expected
    verified = run_cli("teachers", "verify", str(out), "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["max_abs_diff"] < 1e-5, verified.stderr
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir())
    for args, expected_line in (((str(out), "--like", "minilm"), "exists already"),
                                ((str(tmp_path / "other"), "--like", "gpt-17"), "unknown teacher alias 'gpt-17'")):
        refused = run_cli("teachers", "init", *args)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert expected_line in refused.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir()) == before
    assert not (tmp_path / "other").exists()
