"""Bits chosen per weight matrix: 4 where the loss barely notices, 8 where it does, within a budget of 4-bit weights.

Q-BERT (Shen et al. 2020) and HAWQ-V2 (Dong et al. 2020) give each layer its bit width by the loss's curvature
there: a second-order estimate of what quantizing a matrix costs is ``1/2 * sum_i F_ii * (w_i - q(w_i))^2``, with
``F`` the Hessian's diagonal (Q-BERT uses its top eigenvalue, HAWQ-V2 its trace). compress estimates that diagonal
by the Fisher information, which equals the expected Hessian of the log-likelihood for a model's own predictive
distribution: ``F = E_x sum_y p(y|x) (d log p(y|x) / dw)^2``, summed exactly over the classes (for a regression,
Gauss-Newton's ``(d f(x) / dw)^2``), one example at a time, on training sentences (no gold labels needed). Each
candidate matrix (every linear weight that runs as a ``MatMul``, every embedding table) gets its expected loss at 4
and at 8 bits, computed with the rounding ONNX Runtime applies (:mod:`compress.quantize.sizes` states it); the
allocation starts from 8 bits everywhere and moves matrices to 4 bits, the least extra loss per weight first, until
``int4_share`` of the candidate weights are in 4 bits (a greedy knapsack: exact when the costs add, as the diagonal
estimate assumes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch

from compress.models.config import INPUT_NAMES
from compress.models.encoder import Encoder
from compress.quantize.formats import MatrixBits
from compress.quantize.rounding import int4_rounded, int8_rounded, int8_weight_levels

SENSITIVITY_EXAMPLES = 64   # training sentences the Fisher diagonal is averaged over
# The heads run on one vector per sequence and are exported as Gemm, which ONNX Runtime's 4-bit quantizer does not
# take; bits per matrix leaves them so (int4 alone rewrites them as MatMul), and its int8 pass quantizes them.
HEADS = ("pooler.", "classifier.")


def candidates(model: Encoder) -> dict[str, torch.nn.Parameter]:
    """The matrices whose width may be chosen: every 2-D weight but the heads'."""
    return {name: p for name, p in model.named_parameters() if p.dim() == 2 and not name.startswith(HEADS)}


def fisher_diagonal(model: Encoder, batches: Iterable[Mapping[str, np.ndarray]],
                    examples: int = SENSITIVITY_EXAMPLES) -> dict[str, torch.Tensor]:
    """The Fisher information's diagonal for every candidate matrix, averaged over the first ``examples`` sentences
    of ``batches`` (each cut to its own length); ``model`` is left as it was."""
    params = candidates(model)
    total = {name: torch.zeros_like(p, dtype=torch.float32) for name, p in params.items()}
    was_training = model.training
    # A table's gradient as the rows a sentence uses (sparse), not a dense copy of the whole vocabulary's table for
    # every sentence and class: the same numbers, without sweeping 30,000 untouched rows each time.
    tables = [m for m in model.modules() if isinstance(m, torch.nn.Embedding) and not m.sparse]
    model.eval()
    seen = 0
    try:
        for table in tables:
            table.sparse = True
        for batch in batches:
            for row in range(len(batch["input_ids"])):
                if seen == examples:
                    break
                length = int(np.asarray(batch["attention_mask"][row]).sum())
                inputs = [torch.as_tensor(np.asarray(batch[k][row][:length]))[None].long() for k in INPUT_NAMES]
                for weight, output in _log_likelihoods(model(*inputs).logits[0]):
                    grads = torch.autograd.grad(output, list(params.values()), retain_graph=True, allow_unused=True)
                    for name, grad in zip(params, grads, strict=True):
                        _add_squared(total[name], grad, weight)
                seen += 1
    finally:
        for table in tables:
            table.sparse = False
        model.train(was_training)
    if seen == 0:
        raise ValueError("the Fisher diagonal needs at least one example")
    return {name: value / seen for name, value in total.items()}


def _add_squared(total: torch.Tensor, grad: torch.Tensor | None, weight: float) -> None:
    """``total += weight * grad ** 2``, for a sparse gradient only on its rows (a row a sentence uses twice summed
    first: the square is of the whole derivative)."""
    if grad is None:
        return
    if grad.is_sparse:
        grad = grad.coalesce()
        values = grad.values().float()
        total.index_add_(0, grad.indices()[0], values * values, alpha=weight)
    else:
        grad = grad.float()
        total.addcmul_(grad, grad, value=weight)


def _log_likelihoods(logits: torch.Tensor) -> list[tuple[float, torch.Tensor]]:
    """(probability, log-likelihood) of every class (the exact expectation over the model's own answers); for a
    regression's single output, (1, the output): Gauss-Newton's curvature."""
    if logits.numel() == 1:
        return [(1.0, logits.reshape(()))]
    log_p = torch.log_softmax(logits.float(), -1)
    return [(float(log_p[y].detach().exp()), log_p[y]) for y in range(len(log_p))]


def allocate(model: Encoder, fisher: Mapping[str, torch.Tensor], int4_share: float, group_size: int,
             among: set[str] | None = None, tables: set[str] = frozenset()) -> list[MatrixBits]:
    """Every candidate matrix (of those named in ``among``, where given; ``tables``: the embedding tables, stored
    otherwise in int8) with its expected loss at 8 and 4 bits and the width chosen: 4 bits for the least extra loss
    per weight first until at least ``int4_share`` of the candidate weights are in 4 bits (the size budget), then
    back to 8 bits for those, costliest first, that the budget does not need."""
    found, levels = [], int8_weight_levels()   # the CPU's, read once
    for name, p in candidates(model).items():
        if among is not None and name not in among:
            continue
        w, f = p.detach().float(), fisher[name]
        lose = (lambda q, w=w, f=f: 0.5 * float((f * (w - q) ** 2).sum()))   # noqa: E731
        found.append(MatrixBits(name, p.numel(), lose(int8_rounded(w, name in tables, levels)),
                                lose(int4_rounded(w, group_size)), 8))
    need = int4_share * sum(m.weights for m in found)
    chosen: list[MatrixBits] = []
    moved = 0
    for m in sorted(found, key=lambda m: (m.extra_per_weight, m.name)):   # least extra loss per weight first,
        if moved >= need:                                                  # until the budget is met
            break
        chosen.append(m)
        moved += m.weights
    four = {m.name for m in chosen}
    for m in sorted(chosen, key=lambda m: m.loss_int4 - m.loss_int8, reverse=True):   # then give back, the costliest
        if moved - m.weights >= need:                                                  # first, what is not needed
            four.discard(m.name)
            moved -= m.weights
    return [MatrixBits(m.name, m.weights, m.loss_int8, m.loss_int4, 4 if m.name in four else 8) for m in found]
