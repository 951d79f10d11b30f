"""Distillation losses against independent reference computations (numpy loops, hand values)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import padded_batch, tiny_config

from compress.distill.losses import (
    LOSSES,
    attention_kl,
    attention_mse,
    cosine_hidden,
    embedding_mse,
    get_loss,
    hard_ce,
    hidden_mse,
    kd_kl,
    make_projection,
    soft_ce,
)
from compress.errors import CompressError
from compress.models.encoder import Encoder

MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])  # lengths 4, 2, 1


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _np_softmax(row: np.ndarray) -> np.ndarray:
    e = np.exp(row - row.max())
    return e / e.sum()


def _scores(heads: int, seed: int, mask: torch.Tensor = MASK) -> torch.Tensor:
    """Random pre-softmax scores (B, heads, n, n) with finfo.min at padded keys, like the encoder."""
    b, n = mask.shape
    s = torch.randn(b, heads, n, n, generator=_gen(seed))
    return s.masked_fill(mask[:, None, None, :] == 0, torch.finfo(s.dtype).min)


# --- references --------------------------------------------------------------------------


def ref_kl(student: torch.Tensor, teacher: torch.Tensor, t: float) -> float:
    total = 0.0
    for s_row, t_row in zip(student.double().numpy(), teacher.double().numpy()):
        p, q = _np_softmax(t_row / t), _np_softmax(s_row / t)
        total += sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))
    return total / len(student)


def ref_soft_ce(student: torch.Tensor, teacher: torch.Tensor, t: float) -> float:
    total = 0.0
    for s_row, t_row in zip(student.double().numpy(), teacher.double().numpy()):
        p, q = _np_softmax(t_row / t), _np_softmax(s_row / t)
        total += -sum(pi * math.log(qi) for pi, qi in zip(p, q))
    return total / len(student)


def ref_cosine(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> float:
    s, t, m = student.double().numpy(), teacher.double().numpy(), mask.numpy()
    values = [
        1 - s[b, i] @ t[b, i] / (np.linalg.norm(s[b, i]) * np.linalg.norm(t[b, i]))
        for b in range(s.shape[0]) for i in range(s.shape[1]) if m[b, i]
    ]
    return float(np.mean(values))


def ref_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
            weight: np.ndarray | None = None, bias: np.ndarray | None = None) -> float:
    s, t, m = student.double().numpy(), teacher.double().numpy(), mask.numpy()
    total, count = 0.0, 0
    for b in range(s.shape[0]):
        for i in range(s.shape[1]):
            if not m[b, i]:
                continue
            x = s[b, i] if weight is None else weight @ s[b, i] + bias
            for j in range(t.shape[2]):
                total += (x[j] - t[b, i, j]) ** 2
                count += 1
    return total / count


def ref_attention_mse(student: np.ndarray, teacher: np.ndarray, mask: np.ndarray) -> float:
    """student, teacher: (B, h, n, n) float64 with equal h; loop over real query-key pairs only."""
    total, count = 0.0, 0
    for b in range(student.shape[0]):
        for h in range(student.shape[1]):
            for q in range(student.shape[2]):
                for k in range(student.shape[3]):
                    if mask[b, q] and mask[b, k]:
                        total += (student[b, h, q, k] - teacher[b, h, q, k]) ** 2
                        count += 1
    return total / count


def ref_attention_kl(student: np.ndarray, teacher: np.ndarray, mask: np.ndarray) -> float:
    """Mean over (b, h, real q) of sum over real k of t * log(t / s)."""
    rows = []
    for b in range(student.shape[0]):
        for h in range(student.shape[1]):
            for q in range(student.shape[2]):
                if not mask[b, q]:
                    continue
                keys = [k for k in range(student.shape[3]) if mask[b, k]]
                t, s = teacher[b, h, q], student[b, h, q]
                rows.append(sum(t[k] * math.log(t[k] / s[k]) for k in keys))
    return float(np.mean(rows))


def _masked_probs(scores: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """Softmax over real keys only, in float64 numpy, zeros at padded keys."""
    s, m = scores.double().numpy(), mask.numpy()
    out = np.zeros_like(s)
    for b in range(s.shape[0]):
        keys = [k for k in range(s.shape[3]) if m[b, k]]
        for h in range(s.shape[1]):
            for q in range(s.shape[2]):
                out[b, h, q, keys] = _np_softmax(s[b, h, q, keys])
    return out


def _np_scores(scores: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """Scores as float64 with padded keys set to 0 (never used by the references)."""
    s = scores.double().numpy().copy()
    s[np.broadcast_to(mask.numpy()[:, None, None, :] == 0, s.shape)] = 0.0
    return s


# --- prediction-layer losses -------------------------------------------------------------


def test_kd_kl_hand_value():
    # p = softmax([ln 3, 0]) = [3/4, 1/4], q = [1/2, 1/2]
    student = torch.zeros(1, 2)
    teacher = torch.tensor([[math.log(3.0), 0.0]])
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert kd_kl(student, teacher, temperature=1.0, scale_by_t2=False).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.5])
def test_kd_kl_matches_reference_and_t2_option(temperature):
    student = torch.randn(5, 7, generator=_gen(1)) * 3
    teacher = torch.randn(5, 7, generator=_gen(2)) * 3
    plain = kd_kl(student, teacher, temperature=temperature, scale_by_t2=False)
    scaled = kd_kl(student, teacher, temperature=temperature, scale_by_t2=True)
    assert plain.item() == pytest.approx(ref_kl(student, teacher, temperature), rel=1e-5)
    assert scaled.item() == pytest.approx(plain.item() * temperature**2, rel=1e-6)
    via_kl_div = F.kl_div(F.log_softmax(student / temperature, -1), F.softmax(teacher / temperature, -1),
                          reduction="batchmean")
    assert plain.item() == pytest.approx(via_kl_div.item(), rel=1e-5)


def test_kd_kl_options_are_explicit_and_validated():
    logits = torch.randn(2, 3)
    with pytest.raises(TypeError):
        kd_kl(logits, logits, temperature=2.0)  # scale_by_t2 must be stated
    with pytest.raises(ValueError, match="temperature"):
        kd_kl(logits, logits, temperature=0.0, scale_by_t2=True)
    with pytest.raises(ValueError, match="same shape"):
        kd_kl(logits, torch.randn(2, 4), temperature=1.0, scale_by_t2=True)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_soft_ce_matches_reference_and_differs_from_kl_by_teacher_entropy(temperature):
    student = torch.randn(4, 5, generator=_gen(3))
    teacher = torch.randn(4, 5, generator=_gen(4)) * 2
    loss = soft_ce(student, teacher, temperature=temperature)
    assert loss.item() == pytest.approx(ref_soft_ce(student, teacher, temperature), rel=1e-5)
    p = F.softmax(teacher.double() / temperature, -1)
    entropy = -(p * p.log()).sum(-1).mean().item()
    kl = kd_kl(student, teacher, temperature=temperature, scale_by_t2=False).item()
    assert loss.item() == pytest.approx(kl + entropy, rel=1e-5)
    # identical logits leave only the teacher's entropy (no T^2 factor)
    assert soft_ce(teacher, teacher, temperature=temperature).item() == pytest.approx(entropy, rel=1e-5)


def test_hard_ce_matches_reference_and_ignores_minus_100():
    logits = torch.randn(4, 3, generator=_gen(5))
    labels = torch.tensor([0, 2, 1, 2])
    expected = np.mean([-math.log(_np_softmax(row)[y]) for row, y in zip(logits.double().numpy(), labels.tolist())])
    assert hard_ce(logits, labels).item() == pytest.approx(expected, rel=1e-5)
    ignored = torch.tensor([0, -100, 1, -100])
    expected = np.mean([-math.log(_np_softmax(logits[i].double().numpy())[y]) for i, y in ((0, 0), (2, 1))])
    assert hard_ce(logits, ignored).item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="labels"):
        hard_ce(logits, labels[:3])


# --- hidden-state losses -----------------------------------------------------------------


def test_cosine_hidden_matches_reference_over_real_tokens():
    student = torch.randn(3, 4, 6, generator=_gen(6))
    teacher = torch.randn(3, 4, 6, generator=_gen(7))
    assert cosine_hidden(student, teacher, MASK).item() == pytest.approx(ref_cosine(student, teacher, MASK), rel=1e-5)
    no_pad = torch.ones_like(MASK)
    assert cosine_hidden(student, teacher).item() == pytest.approx(ref_cosine(student, teacher, no_pad), rel=1e-5)


def test_hidden_mse_without_padding_is_plain_mse_and_with_padding_matches_reference():
    student = torch.randn(3, 4, 6, generator=_gen(8))
    teacher = torch.randn(3, 4, 6, generator=_gen(9))
    assert hidden_mse(student, teacher).item() == pytest.approx(F.mse_loss(student, teacher).item(), rel=1e-6)
    assert hidden_mse(student, teacher, MASK).item() == pytest.approx(ref_mse(student, teacher, MASK), rel=1e-5)


def test_hidden_mse_through_a_projection_matches_reference():
    torch.manual_seed(0)
    student = torch.randn(3, 4, 5, generator=_gen(10))
    teacher = torch.randn(3, 4, 8, generator=_gen(11))
    w = make_projection(5, 8)
    expected = ref_mse(student, teacher, MASK, w.weight.detach().double().numpy(), w.bias.detach().double().numpy())
    assert hidden_mse(student, teacher, MASK, projection=w).item() == pytest.approx(expected, rel=1e-5)
    assert embedding_mse(student, teacher, MASK, projection=w).item() == pytest.approx(expected, rel=1e-5)


def test_width_mismatch_errors():
    student, teacher = torch.randn(2, 3, 5), torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="make_projection"):
        hidden_mse(student, teacher)
    with pytest.raises(ValueError, match="projection gives width 7"):
        hidden_mse(student, teacher, projection=torch.nn.Linear(5, 7))
    with pytest.raises(ValueError, match="same width"):
        cosine_hidden(student, teacher)
    with pytest.raises(ValueError, match="same B and n"):
        hidden_mse(student, torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match="attention_mask"):
        cosine_hidden(student, torch.randn(2, 3, 5), torch.ones(2, 4))


def test_make_projection():
    assert make_projection(8, 8) is None
    w = make_projection(4, 8)
    assert isinstance(w, torch.nn.Linear) and (w.in_features, w.out_features) == (4, 8)
    with pytest.raises(ValueError, match="student_width"):
        make_projection(0, 8)


# --- attention losses --------------------------------------------------------------------


def test_attention_mse_matches_reference_with_finfo_min_at_padded_keys():
    student, teacher = _scores(2, 12), _scores(2, 13)
    expected = ref_attention_mse(_np_scores(student, MASK), _np_scores(teacher, MASK), MASK.numpy())
    loss = attention_mse(student, teacher, MASK)
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_attention_mse_is_head_by_head_when_counts_match():
    student, teacher = _scores(2, 14), _scores(2, 15)
    swapped = student.flip(1)
    assert attention_mse(student, teacher, MASK).item() != pytest.approx(attention_mse(swapped, teacher, MASK).item())


def test_attention_mse_head_mismatch_compares_mean_maps():
    student, teacher = _scores(2, 16), _scores(4, 17)
    s = _np_scores(student, MASK).mean(axis=1, keepdims=True)
    t = _np_scores(teacher, MASK).mean(axis=1, keepdims=True)
    expected = ref_attention_mse(s, t, MASK.numpy())
    assert attention_mse(student, teacher, MASK).item() == pytest.approx(expected, rel=1e-5)


def test_attention_mse_excludes_padding_where_tinybert_zero_filled_it():
    """TinyBERT set masked scores to 0 and kept every pair in the mean; we average over real pairs only."""
    student, teacher = _scores(1, 18), _scores(1, 19)
    real = MASK.numpy()
    # zero every pair with a padded query or key: their squared differences are then 0 ...
    s = _np_scores(student, MASK) * real[:, None, :, None]
    t = _np_scores(teacher, MASK) * real[:, None, :, None]
    mean_over_all_pairs = float(((s - t) ** 2).mean())
    # ... so the two normalisations differ exactly by (all pairs / real pairs)
    real_pairs = int((real.sum(1) ** 2).sum())
    all_pairs = real.shape[0] * real.shape[1] ** 2
    ours = attention_mse(student, teacher, MASK).item()
    assert ours == pytest.approx(mean_over_all_pairs * all_pairs / real_pairs, rel=1e-5)
    assert ours > mean_over_all_pairs


def test_attention_kl_matches_reference_and_kl_div_without_padding():
    student_scores, teacher_scores = _scores(3, 20), _scores(3, 21)
    student, teacher = student_scores.softmax(-1), teacher_scores.softmax(-1)
    expected = ref_attention_kl(_masked_probs(student_scores, MASK), _masked_probs(teacher_scores, MASK), MASK.numpy())
    assert attention_kl(student, teacher, MASK).item() == pytest.approx(expected, rel=1e-5)

    full = torch.ones(2, 5, dtype=torch.long)
    s = torch.randn(2, 3, 5, 5, generator=_gen(22)).softmax(-1)
    t = torch.randn(2, 3, 5, 5, generator=_gen(23)).softmax(-1)
    via_kl_div = F.kl_div(s.log(), t, reduction="sum") / (2 * 3 * 5)
    assert attention_kl(s, t, full).item() == pytest.approx(via_kl_div.item(), rel=1e-5)


def test_attention_kl_head_mismatch_compares_mean_maps():
    student_scores, teacher_scores = _scores(2, 24), _scores(6, 25)
    s = _masked_probs(student_scores, MASK).mean(axis=1, keepdims=True)
    t = _masked_probs(teacher_scores, MASK).mean(axis=1, keepdims=True)
    expected = ref_attention_kl(s, t, MASK.numpy())
    loss = attention_kl(student_scores.softmax(-1), teacher_scores.softmax(-1), MASK)
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_attention_shape_errors():
    with pytest.raises(ValueError, match="same B and n"):
        attention_mse(torch.randn(2, 2, 4, 4), torch.randn(2, 2, 5, 5))
    with pytest.raises(ValueError, match=r"\(B, heads, n, n\)"):
        attention_kl(torch.randn(2, 4, 4), torch.randn(2, 4, 4))


# --- properties shared by every loss -----------------------------------------------------


def _cases(seed: int = 30):
    """name -> (student tensor, teacher tensor, call(student, teacher, mask)) on padded inputs."""
    g = _gen(seed)
    hidden_s, hidden_t = torch.randn(3, 4, 6, generator=g), torch.randn(3, 4, 6, generator=g)
    scores_s, scores_t = _scores(2, seed + 1), _scores(2, seed + 2)
    logits_s, logits_t = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
    return {
        "kd_kl": (logits_s, logits_t, lambda s, t, m: kd_kl(s, t, temperature=2.0, scale_by_t2=True)),
        "soft_ce": (logits_s, logits_t, lambda s, t, m: soft_ce(s, t, temperature=2.0)),
        "cosine_hidden": (hidden_s, hidden_t, cosine_hidden),
        "hidden_mse": (hidden_s, hidden_t, hidden_mse),
        "embedding_mse": (hidden_s, hidden_t, embedding_mse),
        "attention_mse": (scores_s, scores_t, attention_mse),
        "attention_kl": (scores_s.softmax(-1), scores_t.softmax(-1), attention_kl),
    }


MASKED = ["cosine_hidden", "hidden_mse", "embedding_mse", "attention_mse", "attention_kl"]


@pytest.mark.parametrize("name", MASKED)
def test_values_at_padded_positions_do_not_change_the_loss_or_gradient(name):
    student, teacher, call = _cases()[name]
    pad_tokens = MASK == 0
    if student.dim() == 3:
        pad = pad_tokens[..., None].expand_as(student)
    else:  # padded query rows and padded key columns
        pad = (pad_tokens[:, None, :, None] | pad_tokens[:, None, None, :]).expand_as(student)
    noisy_s = torch.where(pad, torch.randn(student.shape, generator=_gen(40)) * 100, student)
    noisy_t = torch.where(pad, torch.randn(teacher.shape, generator=_gen(41)) * 100, teacher)
    if name == "attention_mse":  # also the extreme: -inf and finfo.min at every padded entry
        noisy_s = torch.where(pad, torch.full_like(student, -math.inf), student)
        noisy_t = torch.where(pad, torch.full_like(teacher, torch.finfo(teacher.dtype).min), teacher)
    a = student.clone().requires_grad_()
    b = noisy_s.clone().requires_grad_()
    loss_a, loss_b = call(a, teacher, MASK), call(b, noisy_t, MASK)
    loss_a.backward()
    loss_b.backward()
    assert loss_b.item() == pytest.approx(loss_a.item(), rel=1e-6)
    assert torch.isfinite(b.grad).all()
    torch.testing.assert_close(a.grad, b.grad)
    assert (b.grad[pad] == 0).all()


@pytest.mark.parametrize("name", MASKED)
def test_a_fully_padded_row_contributes_nothing(name):
    student, teacher, call = _cases()[name]
    # MASK rows 0 and 1 are partly real; add a fourth row that is all padding.
    mask = torch.cat([MASK[:2], torch.zeros(1, 4, dtype=MASK.dtype)])
    junk_s = torch.randn(student[:1].shape, generator=_gen(50)) * 10
    junk_t = torch.randn(teacher[:1].shape, generator=_gen(51)) * 10
    if name == "attention_kl":
        junk_s, junk_t = junk_s.softmax(-1), junk_t.softmax(-1)
    with_row = call(torch.cat([student[:2], junk_s]), torch.cat([teacher[:2], junk_t]), mask)
    without_row = call(student[:2], teacher[:2], MASK[:2])
    assert with_row.item() == pytest.approx(without_row.item(), rel=1e-6)


def test_an_all_padding_batch_gives_zero_not_nan():
    mask = torch.zeros(2, 3, dtype=torch.long)
    assert hidden_mse(torch.randn(2, 3, 4), torch.randn(2, 3, 4), mask).item() == 0.0
    assert attention_mse(torch.randn(2, 2, 3, 3), torch.randn(2, 2, 3, 3), mask).item() == 0.0


@pytest.mark.parametrize("name", ["kd_kl", *MASKED])
def test_identical_inputs_give_zero(name):
    student, _, call = _cases()[name]
    assert abs(call(student, student.clone(), MASK).item()) < 1e-6


@pytest.mark.parametrize("name", list(_cases()))
def test_gradients_reach_the_student_and_not_the_teacher(name):
    student, teacher, call = _cases()[name]
    s = student.clone().requires_grad_()
    t = teacher.clone().requires_grad_()
    call(s, t, MASK).backward()
    assert s.grad is not None and torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    assert t.grad is None


def test_gradients_reach_the_projection():
    torch.manual_seed(0)
    w = make_projection(4, 6)
    s = torch.randn(3, 4, 4, requires_grad=True)
    t = torch.randn(3, 4, 6, requires_grad=True)
    hidden_mse(s, t, MASK, projection=w).backward()
    assert w.weight.grad is not None and w.weight.grad.abs().sum() > 0
    assert w.bias.grad is not None and w.bias.grad.abs().sum() > 0
    assert s.grad is not None and t.grad is None


def test_half_precision_inputs_are_computed_in_fp32():
    student, teacher = torch.randn(3, 4, 6, generator=_gen(60)), torch.randn(3, 4, 6, generator=_gen(61))
    loss = hidden_mse(student.bfloat16(), teacher.bfloat16(), MASK)
    assert loss.dtype == torch.float32
    expected = ref_mse(student.bfloat16().float(), teacher.bfloat16().float(), MASK)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    scores = _scores(2, 62).bfloat16()  # bf16 finfo.min at padded keys
    assert torch.isfinite(attention_mse(scores, _scores(2, 63).bfloat16(), MASK))


def test_on_real_encoder_outputs_every_loss_is_finite_with_finite_gradients():
    torch.manual_seed(0)
    teacher = Encoder(tiny_config(num_layers=4, hidden_size=32, num_heads=4)).eval()
    student = Encoder(tiny_config(num_layers=2, hidden_size=16, embedding_size=16, num_heads=2, ffn_size=32))
    batch = padded_batch()
    with torch.no_grad():
        t = teacher(**batch, output_hidden_states=True, output_attentions=True)
    s = student(**batch, output_hidden_states=True, output_attentions=True)
    mask = batch["attention_mask"]
    w_e, w_h = make_projection(16, 32), make_projection(16, 32)
    total = (
        kd_kl(s.logits, t.logits, temperature=2.0, scale_by_t2=True)
        + soft_ce(s.logits, t.logits, temperature=1.0)
        + hard_ce(s.logits, torch.tensor([0, 1, 2]))
        + embedding_mse(s.hidden_states[0], t.hidden_states[0], mask, projection=w_e)
        + hidden_mse(s.hidden_states[2], t.hidden_states[4], mask, projection=w_h)
        + attention_mse(s.attention_scores[1], t.attention_scores[3], mask)
        + attention_kl(s.attention_probs[1], t.attention_probs[3], mask)
    )
    total.backward()
    assert torch.isfinite(total)
    for param in [*student.parameters(), *w_e.parameters(), *w_h.parameters()]:
        assert param.grad is None or torch.isfinite(param.grad).all()
    assert w_e.weight.grad.abs().sum() > 0 and w_h.weight.grad.abs().sum() > 0


# --- registry ----------------------------------------------------------------------------


def test_registry_names_and_unknown_name_error():
    assert set(LOSSES) == {"kd_kl", "soft_ce", "hard_ce", "cosine_hidden", "hidden_mse", "embedding_mse",
                           "attention_mse", "attention_kl"}
    assert get_loss("kd_kl").fn is kd_kl
    with pytest.raises(CompressError, match="unknown loss 'kl'; known losses are kd_kl, ") as info:
        get_loss("kl")
    assert "attention_kl" in str(info.value)


@pytest.mark.parametrize("name", list(LOSSES))
def test_registry_flags_match_the_signatures(name):
    spec = LOSSES[name]
    params = inspect.signature(spec.fn).parameters
    assert spec.name == name
    assert ("projection" in params) == spec.uses_projection
    assert ("labels" in params) == spec.uses_labels
    keyword_only = {p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(spec.options) == keyword_only
    assert "loss =" in (spec.fn.__doc__ or "") or "MSE" in (spec.fn.__doc__ or "")
