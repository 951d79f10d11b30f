"""Student initialisation from the teacher: copied blocks, factorized and projected embeddings."""

from __future__ import annotations

import pytest
import torch
from helpers import padded_batch, tiny_config

from compress.models.encoder import Encoder
from compress.students import AlbertOptions, TinyBertOptions, build_albert, build_tinybert
from compress.students.init import factorize_embeddings
from compress.teachers.registry import load_teacher, load_tokenizer

pytestmark = pytest.mark.minutes(2)   # on one CI worker: see tests/conftest.py


def _teacher() -> Encoder:
    torch.manual_seed(0)
    return Encoder(tiny_config(num_layers=4)).eval()


def _embedding_error(teacher: Encoder, student: Encoder) -> float:
    batch = padded_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        t = teacher(**batch, output_hidden_states=True).hidden_states[0][real]
        s = student.eval()(**batch, output_hidden_states=True).hidden_states[0][real]
    return float((s - t).norm() / t.norm())


def test_albert_without_factorization_copies_embeddings_and_the_groups_middle_layers():
    teacher = _teacher()
    student = build_albert(teacher, AlbertOptions(embedding_size=32, sharing="all", groups=2, shared_init="last"))
    assert _embedding_error(teacher, student) < 1e-6
    # groups of layers (0, 1) and (2, 3): "last" takes teacher layers 1 and 3
    assert torch.equal(student.attention[0].query.weight, teacher.attention[1].query.weight)
    assert torch.equal(student.ffn[1].output.weight, teacher.ffn[3].output.weight)
    assert torch.equal(student.classifier.weight, teacher.classifier.weight)


def test_factorized_embedding_starts_close_to_the_teacher_and_fitting_brings_it_closer():
    teacher = _teacher()
    torch.manual_seed(1)
    random_start = _embedding_error(teacher, Encoder(tiny_config(num_layers=4, embedding_size=16, sharing="all")))
    svd_only = build_albert(teacher, AlbertOptions(embedding_size=16, fit_steps=0))
    fitted = build_albert(teacher, AlbertOptions(embedding_size=16, fit_steps=100))
    assert _embedding_error(teacher, svd_only) < 0.9 * random_start
    assert _embedding_error(teacher, fitted) < _embedding_error(teacher, svd_only)
    # The full-rank SVD keeps all the energy; rank 16 of 32 keeps part of it.
    full = Encoder(tiny_config(num_layers=4, embedding_size=31))
    assert 0.5 < factorize_embeddings(teacher, full) <= 1.0


def test_tinybert_embeddings_are_the_teachers_in_its_principal_directions():
    teacher = _teacher()
    student = build_tinybert(teacher, TinyBertOptions(num_layers=2, hidden_size=16, num_heads=4, ffn_size=32))
    w = teacher.embeddings.word_embeddings.weight
    _, _, vh = torch.linalg.svd(w, full_matrices=False)
    torch.testing.assert_close(student.embeddings.word_embeddings.weight, w @ vh[:16].T, atol=1e-5, rtol=0)


def _cls_and_logit_spread(model: Encoder, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
    """How much the last layer's [CLS] vector and the logits vary across sentences (mean std over features)."""
    with torch.no_grad():
        out = model.eval()(**batch)
    return float(out.last_hidden_state[:, 0].std(0).mean()), float(out.logits.std(0).mean())


def test_albert_built_from_minilm_already_tells_sentences_apart():
    # The shared block repeated six times must not wash the input out: from the middle teacher layer it converges
    # to a fixed point (the classifier then sees one constant and training starts at chance); from the last layer,
    # which gathers the sentence into [CLS], the student varies across sentences as much as the teacher does.
    torch.manual_seed(0)
    teacher = load_teacher("minilm", num_labels=2).model.eval()
    batch = dict(load_tokenizer("minilm")(SENTENCES, padding=True, return_tensors="pt"))
    cls, logits = _cls_and_logit_spread(teacher, batch)
    default = _cls_and_logit_spread(build_albert(teacher, AlbertOptions()), batch)
    middle = _cls_and_logit_spread(build_albert(teacher, AlbertOptions(shared_init="middle")), batch)
    assert default[0] > 0.5 * cls and default[1] > 0.3 * logits
    assert middle[0] < 0.01 * cls and middle[1] < 0.01 * logits


SENTENCES = ["a gripping, beautifully acted film.", "dull and far too long.", "the plot makes no sense at all",
             "one of the best movies of the year", "i laughed, i cried", "a waste of a fine cast",
             "it is what it is", "charming and warm"]
