"""Distillation losses: pure functions of tensors, registered by name in :data:`LOSSES`.

Conventions shared by every loss here:

- Shapes: B batch, C classes, n sequence length, H width, h heads. ``attention_mask`` is (B, n)
  with 1 (or True) for a real token and 0 for padding; ``None`` means no padding.
- Teacher tensors are targets: every loss detaches them, so no gradient ever reaches the teacher.
- Padding never counts: token-level losses average over real tokens only, attention losses over
  real (query, key) pairs or real query rows only. Values stored at padded positions (including
  the ``finfo.min`` the encoder writes into padded key scores) are replaced by zero with
  ``torch.where`` *before* any arithmetic, so they can change neither the value nor the gradient.
  A batch with no real token gives a loss of 0 (the denominator is clamped to 1).
- fp16/bf16 inputs are computed in fp32; the result is a 0-dim tensor.
- Shape errors are ``ValueError`` with one sentence.
- A regression's head has one output (C = 1), where a softmax is constant: every logits loss (``kd_kl``,
  ``soft_ce``, ``hard_ce``) is then the mean squared error, with the teacher's output as the target (as TinyBERT
  distils STS-B) or the gold value; the temperature does not apply (:func:`regression_mse`).

Attention heads: when student and teacher have different head counts, the attention losses average
each side over its heads first and compare the two mean attention maps (one "head" each); when the
counts are equal, head i is compared with head i.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from compress.errors import CompressError

__all__ = [
    "LOSSES",
    "LossSpec",
    "attention_kl",
    "attention_mse",
    "cosine_hidden",
    "embedding_mse",
    "get_loss",
    "hard_ce",
    "hidden_mse",
    "kd_kl",
    "make_projection",
    "soft_ce",
]


# --- helpers ------------------------------------------------------------------------------


def _compute_dtype(x: torch.Tensor) -> torch.Tensor:
    """Half-precision inputs are upcast to fp32 so sums over many tokens stay accurate."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}.")


def _check_logits(name: str, student: torch.Tensor, teacher: torch.Tensor) -> None:
    if student.dim() != 2 or student.shape != teacher.shape:
        raise ValueError(
            f"{name} needs student and teacher logits of the same shape (B, C), "
            f"got {tuple(student.shape)} and {tuple(teacher.shape)}."
        )


NO_LABEL = -100
"""The label of a row with no gold label (a class task's; a regression's is NaN): :func:`hard_ce` skips it."""


def regression_mse(student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The logits losses of a one-output (regression) head: ``mean((student[:, 0] - target)^2)``, with ``target``
    the teacher's output (B, 1) or the gold values (B,)."""
    return F.mse_loss(_compute_dtype(student)[:, 0], _compute_dtype(target.detach()).reshape(-1))


def _token_mask(attention_mask: torch.Tensor | None, batch: int, n: int, device: torch.device) -> torch.Tensor:
    """(B, n) bool: True at real tokens."""
    if attention_mask is None:
        return torch.ones(batch, n, dtype=torch.bool, device=device)
    if tuple(attention_mask.shape) != (batch, n):
        raise ValueError(
            f"attention_mask must have shape (B, n) = {(batch, n)}, got {tuple(attention_mask.shape)}."
        )
    return attention_mask.to(device) != 0


def _check_hidden(name: str, student: torch.Tensor, teacher: torch.Tensor) -> None:
    if student.dim() != 3 or teacher.dim() != 3 or student.shape[:2] != teacher.shape[:2]:
        raise ValueError(
            f"{name} needs student and teacher hidden states (B, n, H) with the same B and n, "
            f"got {tuple(student.shape)} and {tuple(teacher.shape)}."
        )


def _masked_attention_pair(
    name: str,
    student: torch.Tensor,
    teacher: torch.Tensor,
    attention_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate (B, h, n, n) maps; zero every padded query row and key column; align head counts.

    Returns (student, teacher, pair_mask (B, 1, n, n), query_mask (B, n)); the maps have equal head
    counts afterwards (both averaged over heads to one head when the counts differed).
    """
    if (
        student.dim() != 4
        or teacher.dim() != 4
        or student.shape[0] != teacher.shape[0]
        or student.shape[2:] != teacher.shape[2:]
        or student.shape[2] != student.shape[3]
    ):
        raise ValueError(
            f"{name} needs student and teacher attention maps (B, heads, n, n) with the same B and n, "
            f"got {tuple(student.shape)} and {tuple(teacher.shape)}."
        )
    batch, _, n, _ = student.shape
    real = _token_mask(attention_mask, batch, n, student.device)
    pairs = real[:, None, :, None] & real[:, None, None, :]
    zero = torch.zeros((), dtype=student.dtype, device=student.device)
    s = _compute_dtype(torch.where(pairs, student, zero))
    t = _compute_dtype(torch.where(pairs, teacher.detach(), zero.to(teacher.dtype)))
    if s.shape[1] != t.shape[1]:
        s = s.mean(dim=1, keepdim=True)
        t = t.mean(dim=1, keepdim=True)
    return s, t, pairs, real


def make_projection(student_width: int, teacher_width: int) -> nn.Linear | None:
    """The learned map W from the student's width to the teacher's, or None when they are equal.

    An ``nn.Linear(student_width, teacher_width)`` (with bias, PyTorch's default initialisation),
    as TinyBERT's W_h and W_e. It is trained with the student: put its parameters in the optimizer,
    and save it with the run if training resumes.
    """
    for name, value in (("student_width", student_width), ("teacher_width", teacher_width)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if student_width == teacher_width:
        return None
    return nn.Linear(student_width, teacher_width)


# --- prediction-layer losses -------------------------------------------------------------


def kd_kl(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    *,
    temperature: float,
    scale_by_t2: bool,
) -> torch.Tensor:
    """Soft-target distillation (Hinton et al. 2015; DistilBERT's L_ce).

        p = softmax(teacher / T),  q = softmax(student / T)
        loss = (1/B) * sum_b sum_c p[b,c] * (log p[b,c] - log q[b,c])      (KL(p || q), batch-mean)
        loss *= T^2                                                          if scale_by_t2

    Shapes: logits (B, C) for both. No mask (one row per example).

    ``temperature`` and ``scale_by_t2`` are required keywords, so every recipe states them.
    Hinton and DistilBERT multiply by T^2, which keeps the gradient's size independent of T so the
    weight of this term against the hard-label CE means the same at any temperature; TinyBERT
    (see :func:`soft_ce`) and TextBrewer do not.
    """
    _check_temperature(temperature)
    _check_logits("kd_kl", student_logits, teacher_logits)
    if student_logits.shape[-1] == 1:
        return regression_mse(student_logits, teacher_logits)
    log_q = F.log_softmax(_compute_dtype(student_logits) / temperature, dim=-1)
    p = F.softmax(_compute_dtype(teacher_logits.detach()) / temperature, dim=-1)
    # xlogy(0, 0) = 0, so a teacher probability that underflowed to 0 contributes nothing.
    loss = (torch.xlogy(p, p) - p * log_q).sum(dim=-1).mean()
    return loss * temperature**2 if scale_by_t2 else loss


def soft_ce(student_logits: torch.Tensor, teacher_logits: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """TinyBERT's prediction-layer loss: soft cross-entropy at temperature T (no T^2 factor).

        loss = (1/B) * sum_b sum_c -softmax(teacher / T)[b,c] * log_softmax(student / T)[b,c]

    Shapes: logits (B, C) for both. No mask. It differs from :func:`kd_kl` (unscaled) only by the
    teacher's entropy, a constant for the student: same gradient, but not zero when the logits agree.
    The default T = 1 is the paper's.
    """
    _check_temperature(temperature)
    _check_logits("soft_ce", student_logits, teacher_logits)
    if student_logits.shape[-1] == 1:
        return regression_mse(student_logits, teacher_logits)
    log_q = F.log_softmax(_compute_dtype(student_logits) / temperature, dim=-1)
    p = F.softmax(_compute_dtype(teacher_logits.detach()) / temperature, dim=-1)
    return -(p * log_q).sum(dim=-1).mean()


def hard_ce(student_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy with the gold labels (DistilBERT's L_mlm / task loss).

        loss = (1/B') * sum_b -log_softmax(student)[b, labels[b]]

    Shapes: logits (B, C), labels (B,) integer class ids. Rows labelled -100 are ignored and B' is the
    number of the other rows (PyTorch's ``ignore_index`` convention). A one-output head (a regression): the mean
    squared error with the gold values, rows whose value is NaN ignored. A batch with no labelled row (transfer data:
    augmented copies and unlabeled text have no gold label) gives 0, with a gradient of zeros.
    """
    if student_logits.dim() != 2 or labels.shape != student_logits.shape[:1]:
        raise ValueError(
            f"hard_ce needs logits (B, C) and labels (B,), got {tuple(student_logits.shape)} "
            f"and {tuple(labels.shape)}."
        )
    regression = student_logits.shape[-1] == 1
    labelled = ~labels.isnan() if regression and labels.is_floating_point() else labels != NO_LABEL
    if not bool(labelled.any()):
        return _compute_dtype(student_logits).sum() * 0.0
    if regression:
        return regression_mse(student_logits[labelled], labels[labelled])
    return F.cross_entropy(_compute_dtype(student_logits), labels.long(), ignore_index=NO_LABEL)


# --- hidden-state losses -----------------------------------------------------------------


def cosine_hidden(
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """DistilBERT's cosine embedding loss between hidden states, over real tokens.

        loss = (1/R) * sum_{b,i real} (1 - cos(student[b,i], teacher[b,i]))

    R is the number of real tokens. Shapes: hidden states (B, n, H) for both, the same H (cosine
    needs a shared space, so DistilBERT keeps the teacher's width); attention_mask (B, n).
    Padded tokens contribute nothing.
    """
    _check_hidden("cosine_hidden", student_hidden, teacher_hidden)
    if student_hidden.shape[-1] != teacher_hidden.shape[-1]:
        raise ValueError(
            f"cosine_hidden needs the same width for student and teacher, got {student_hidden.shape[-1]} "
            f"and {teacher_hidden.shape[-1]}; use hidden_mse with a projection for a narrower student."
        )
    batch, n, _ = student_hidden.shape
    real = _token_mask(attention_mask, batch, n, student_hidden.device)
    cos = F.cosine_similarity(_compute_dtype(student_hidden), _compute_dtype(teacher_hidden.detach()), dim=-1, eps=1e-8)
    per_token = torch.where(real, 1.0 - cos, torch.zeros((), dtype=cos.dtype, device=cos.device))
    return per_token.sum() / real.sum().clamp_min(1)


def hidden_mse(
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    projection: nn.Module | None = None,
) -> torch.Tensor:
    """TinyBERT's hidden-state loss: MSE(student @ W, teacher) over real tokens and features.

        s' = projection(student)  (an nn.Linear H_s -> H_t, see :func:`make_projection`),
             or student itself when no projection is given
        loss = (1/(R * H_t)) * sum_{b,i real} sum_j (s'[b,i,j] - teacher[b,i,j])^2

    R is the number of real tokens, so without padding this equals ``F.mse_loss`` (the mean over
    every element, as in TinyBERT). Shapes: student (B, n, H_s), teacher (B, n, H_t),
    attention_mask (B, n). Padded tokens contribute nothing. A projection is required when
    H_s != H_t; it receives gradients and must be trained with the student.
    """
    _check_hidden("hidden_mse", student_hidden, teacher_hidden)
    s = projection(student_hidden) if projection is not None else student_hidden
    if s.shape[-1] != teacher_hidden.shape[-1]:
        if projection is None:
            raise ValueError(
                f"student width {s.shape[-1]} differs from teacher width {teacher_hidden.shape[-1]}; "
                "pass projection=make_projection(student_width, teacher_width)."
            )
        raise ValueError(
            f"the projection gives width {s.shape[-1]} but the teacher's is {teacher_hidden.shape[-1]}; "
            "build it with make_projection(student_width, teacher_width)."
        )
    batch, n, width = teacher_hidden.shape
    real = _token_mask(attention_mask, batch, n, s.device)
    diff = _compute_dtype(s) - _compute_dtype(teacher_hidden.detach())
    squared = torch.where(real[..., None], diff.square(), torch.zeros((), dtype=diff.dtype, device=diff.device))
    return squared.sum() / (real.sum().clamp_min(1) * width)


def embedding_mse(
    student_embeddings: torch.Tensor,
    teacher_embeddings: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    projection: nn.Module | None = None,
) -> torch.Tensor:
    """TinyBERT's embedding-layer loss: :func:`hidden_mse` applied to the embedding outputs.

        loss = (1/(R * H_t)) * sum_{b,i real} sum_j (projection(student_emb)[b,i,j] - teacher_emb[b,i,j])^2

    Inputs are ``hidden_states[0]`` of each encoder (the embedding output after any E -> H
    projection), shapes (B, n, H_s) and (B, n, H_t); attention_mask (B, n); padding excluded.
    TinyBERT learns a separate W_e for this term: pass a projection distinct from the hidden ones.
    """
    _check_hidden("embedding_mse", student_embeddings, teacher_embeddings)
    return hidden_mse(student_embeddings, teacher_embeddings, attention_mask, projection)


# --- attention losses --------------------------------------------------------------------


def attention_mse(
    student_scores: torch.Tensor,
    teacher_scores: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """TinyBERT's attention loss: MSE between *pre-softmax* attention scores, head by head.

        loss = (1/(h * P)) * sum_{b, head, (q, k) real} (student[b,head,q,k] - teacher[b,head,q,k])^2

    P is the number of real (query, key) pairs, both tokens real. Shapes: scores (B, h, n, n) for
    both (the encoder's ``attention_scores``); attention_mask (B, n).

    Masking: padded keys AND padded queries are excluded. The encoder stores ``finfo.min`` at
    padded keys; those entries are replaced by zero with ``torch.where`` before any subtraction, so
    they never enter the arithmetic (no overflow, no NaN gradient). TinyBERT's reference code
    instead replaced the masked scores by zero and kept them in the mean (padded pairs then count
    as perfectly matched and dilute the loss); ours excludes them.

    Head counts: equal counts compare head i with head i (h = that count). Different counts
    average each side over its heads and compare the two mean score maps (h = 1).
    """
    s, t, pairs, _ = _masked_attention_pair("attention_mse", student_scores, teacher_scores, attention_mask)
    heads = s.shape[1]
    return (s - t).square().sum() / (pairs.sum().clamp_min(1) * heads)


def attention_kl(
    student_probs: torch.Tensor,
    teacher_probs: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """KL(teacher || student) between attention distributions, per query row (MiniLM-style).

        loss = (1/(h * Q)) * sum_{b, head, q real} sum_{k real} t[b,head,q,k] * (log t - log s)[b,head,q,k]

    Q is the number of real query rows. Shapes: probabilities (B, h, n, n) for both (softmax over
    the last axis, e.g. the encoder's ``attention_probs`` or a Hugging Face model's attentions);
    attention_mask (B, n). Use it when a teacher's pre-softmax scores are not available.

    Masking: padded query rows are excluded; padded keys (probability 0 in a masked softmax) are
    left out of each row's sum. ``0 * log 0`` counts as 0; a student probability that underflowed
    to 0 at a real key is clamped to the smallest normal float, so the loss stays finite.

    Head counts: equal counts compare head i with head i (h = that count). Different counts
    average each side's probabilities over its heads (still distributions) and compare the two
    mean maps (h = 1).
    """
    s, t, pairs, real = _masked_attention_pair("attention_kl", student_probs, teacher_probs, attention_mask)
    heads = s.shape[1]
    tiny = torch.finfo(s.dtype).tiny
    one = torch.ones((), dtype=s.dtype, device=s.device)
    log_s = torch.where(pairs, s, one).clamp_min(tiny).log()
    # xlogy(0, 0) = 0: teacher zeros (padded keys included) contribute nothing.
    per_pair = torch.xlogy(t, t) - t * log_s
    return per_pair.sum() / (real.sum().clamp_min(1) * heads)


# --- registry ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: the function and what a training loop must feed it.

    reads            which model output both sides come from: ``logits``, ``embeddings``
                     (hidden_states[0]), ``hidden_states`` (layers 1..L, paired by the layer map),
                     ``attention_scores`` or ``attention_probs`` (paired by the layer map).
    uses_labels      takes ``labels`` instead of teacher outputs.
    uses_projection  takes ``projection`` (required when widths differ).
    options          keyword options the loss accepts (e.g. temperature).
    summary          one line for reports and ``compress explain``.
    """

    name: str
    fn: Callable[..., torch.Tensor]
    reads: str
    uses_labels: bool
    uses_projection: bool
    options: tuple[str, ...]
    summary: str


def _spec(name: str, fn: Callable[..., torch.Tensor], reads: str, *, labels: bool = False, projection: bool = False,
          options: tuple[str, ...] = (), summary: str) -> LossSpec:
    return LossSpec(name, fn, reads, labels, projection, options, summary)


LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        _spec("kd_kl", kd_kl, "logits", options=("temperature", "scale_by_t2"),
              summary="KL(softmax(t/T) || softmax(s/T)), batch mean, optionally times T^2 (Hinton, DistilBERT)"),
        _spec("soft_ce", soft_ce, "logits", options=("temperature",),
              summary="-sum softmax(t/T) * log_softmax(s/T), batch mean (TinyBERT prediction layer)"),
        _spec("hard_ce", hard_ce, "logits", labels=True,
              summary="cross-entropy with the gold labels"),
        _spec("cosine_hidden", cosine_hidden, "hidden_states",
              summary="1 - cos(student, teacher) per real token, mean (DistilBERT)"),
        _spec("hidden_mse", hidden_mse, "hidden_states", projection=True,
              summary="MSE(student @ W, teacher) over real tokens and features (TinyBERT)"),
        _spec("embedding_mse", embedding_mse, "embeddings", projection=True,
              summary="MSE(student_emb @ W_e, teacher_emb) over real tokens and features (TinyBERT)"),
        _spec("attention_mse", attention_mse, "attention_scores",
              summary="MSE of pre-softmax attention scores over real query-key pairs and heads (TinyBERT)"),
        _spec("attention_kl", attention_kl, "attention_probs",
              summary="KL(teacher || student) of attention rows, mean over real queries and heads"),
    )
}


def get_loss(name: str) -> LossSpec:
    """The registry entry for ``name``.

    Raises:
        CompressError: unknown name (the message lists the known ones).
    """
    try:
        return LOSSES[name]
    except KeyError:
        raise CompressError(f"unknown loss '{name}'; known losses are {', '.join(LOSSES)}.") from None
