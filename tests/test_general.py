"""General distillation on the real BBC corpus (a small slice), cached, then used to start TinyBERT."""

from __future__ import annotations

import json

import torch
from helpers import make_tiny_teacher

from compress.models.checkpoints import load_encoder
from compress.students import TinyBertOptions, build_tinybert, tinybert_config
from compress.students.tinybert.general import GeneralDistillConfig, general_distillation


def test_general_distillation_trains_caches_and_initialises_tinybert(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    teacher_dir = make_tiny_teacher(tmp_path / "teacher")
    teacher = load_encoder(teacher_dir, num_labels=2).model
    options = TinyBertOptions(num_layers=1, hidden_size=16, num_heads=4, ffn_size=32)
    shape = tinybert_config(teacher.config, options)
    config = GeneralDistillConfig(max_passages=256, held_out=32, epochs=2, lr=1e-3)

    directory = general_distillation(str(teacher_dir), shape, config, show_progress=False)
    record = json.loads((directory.parent / "record.json").read_text())
    assert record["passages"] == 256 and record["held_out_loss"]["loss"] > 0
    history = [h["loss"] for h in record.get("history", [])]
    assert history == sorted(history, reverse=True)  # the held-out loss falls epoch by epoch
    assert general_distillation(str(teacher_dir), shape, config, show_progress=False) == directory  # cached
    # A five-class task shares the entry (the classifier is not part of general distillation) ...
    five = shape.replace(num_labels=5)
    assert general_distillation(str(teacher_dir), five, config, show_progress=False) == directory
    # ... and its student starts from it with a classifier of its own size.
    teacher5 = load_encoder(teacher_dir, num_labels=5).model
    student5 = build_tinybert(teacher5, TinyBertOptions(**{**options.__dict__, "init_from": str(directory)}))
    assert student5.classifier.out_features == 5

    distilled = load_encoder(directory).model
    student = build_tinybert(teacher, TinyBertOptions(**{**options.__dict__, "init_from": str(directory)}))
    assert torch.equal(student.attention[0].query.weight, distilled.attention[0].query.weight)
    assert torch.equal(student.embeddings.word_embeddings.weight, distilled.embeddings.word_embeddings.weight)
