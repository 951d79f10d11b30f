"""The arithmetic of low-rank factorization: a weight W (out x in) as two factors, up (out x r) @ down (r x in).

Two factors hold r (out + in) parameters instead of out * in, so they pay below the break-even rank
r < out * in / (out + in). Which r directions to keep is the question each weighting answers differently:

    svd         the truncated SVD of W: the directions of largest weight energy, min ||W - W'||_F
    fisher      FWSVD (Hsu et al. 2022): row i of W weighted by its Fisher information I_i, the squared
                gradients of the task loss summed over the calibration batches and over the row's columns;
                min ||diag(sqrt(I)) (W - W')||_F, so the outputs the loss is sensitive to are kept best
    activation  SVD-LLM / DRONE: whitened by the layer's real inputs X, C = X X^T = L L^T (Cholesky);
                min ||(W - W') X||_F = ||(W - W') L||_F, so the directions the inputs use are kept best

Everything is computed in float64 and returned in the weight's dtype; ``up`` and ``down`` share the singular
values' square roots, so neither factor is much larger than the other (better for training and int8).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from compress.distill.losses import hard_ce
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder

RIDGE = 1e-6   # added to the input covariance, times its mean diagonal, so its Cholesky factor exists


def break_even(out: int, inp: int) -> int:
    """The largest rank whose two factors hold fewer parameters than the matrix: r (out + in) < out * in."""
    return (out * inp - 1) // (out + inp)


@dataclass(frozen=True)
class Matrix:
    """One factorizable matrix of an encoder: ``kind`` attention or ffn, its ``block``, its ``name`` in the block
    (query, key, value, output; intermediate, output) and its shape."""

    kind: str
    block: int
    name: str
    out: int
    inp: int

    @property
    def key(self) -> str:
        return f"{self.kind}.{self.block}.{self.name}"

    @property
    def params(self) -> int:
        return self.out * self.inp


MATRIX_NAMES = {"attention": ("query", "key", "value", "output"), "ffn": ("intermediate", "output")}


def matrices(model: Encoder) -> list[Matrix]:
    """Every attention and FFN weight of ``model`` that is a plain dense matrix (a pruned-away block has none)."""
    found = []
    for kind, names in MATRIX_NAMES.items():
        for block, module in enumerate(getattr(model, kind)):
            for name in names:
                linear = getattr(module, name, None)
                if isinstance(linear, nn.Linear):
                    found.append(Matrix(kind, block, name, linear.out_features, linear.in_features))
    return found


def config_matrices(config: EncoderConfig) -> list[Matrix]:
    """The matrices :func:`matrices` finds in a dense model of shape ``config``, from the shape alone."""
    h, found = config.hidden_size, []
    for block in range(config.num_attention_blocks):
        inner = config.heads_of(block) * config.head_size
        if inner:
            found += [Matrix("attention", block, name, inner, h) for name in ("query", "key", "value")]
            found.append(Matrix("attention", block, "output", h, inner))
    for block in range(config.num_ffn_blocks):
        if inner := config.ffn_size_of(block):
            found += [Matrix("ffn", block, "intermediate", inner, h), Matrix("ffn", block, "output", h, inner)]
    return found


def linear_of(model: Encoder, matrix: Matrix) -> nn.Linear:
    return getattr(getattr(model, matrix.kind)[matrix.block], matrix.name)


@dataclass
class Weighted:
    """A matrix as its weighting sees it: ``rows`` (Fisher) or ``whiten`` (the Cholesky factor of the inputs'
    covariance), and the SVD of the weighted matrix, computed once for both the spectrum and the factors."""

    rows: torch.Tensor | None
    whiten: torch.Tensor | None
    u: torch.Tensor
    singular: torch.Tensor
    vh: torch.Tensor

    def energy(self, rank: int) -> float:
        """The share of the weighted matrix's energy (sum of squared singular values) the first ``rank`` keep."""
        total = float((self.singular ** 2).sum())
        return float((self.singular[:rank] ** 2).sum()) / total if total else 1.0

    def factors(self, rank: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(up, down), out x rank and rank x in: the best rank-``rank`` approximation under the weighting, with
        the weighting undone (on ``up`` for rows, on ``down`` for whitening)."""
        root = self.singular[:rank].sqrt()
        up, down = self.u[:, :rank] * root, root[:, None] * self.vh[:rank]
        if self.rows is not None:
            up = up / self.rows.sqrt()[:, None]
        if self.whiten is not None:
            down = torch.linalg.solve_triangular(self.whiten, down, upper=False, left=False)   # down @ L^-1
        return up.to(dtype), down.to(dtype)


def weighted(weight: torch.Tensor, rows: torch.Tensor | None = None, whiten: torch.Tensor | None = None) -> Weighted:
    a = weight.double()
    if rows is not None:
        a = rows.sqrt()[:, None] * a
    if whiten is not None:
        a = a @ whiten
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return Weighted(rows, whiten, u, s, vh)


def factor(weight: torch.Tensor, rank: int, rows: torch.Tensor | None = None,
           whiten: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(up, down), out x rank and rank x in, whose product is the best rank-``rank`` approximation of ``weight``
    under the weighting: ``rows`` (Fisher, one weight per output row) or ``whiten`` (lower-triangular L with
    L L^T the inputs' covariance); neither: plain truncated SVD."""
    return weighted(weight, rows, whiten).factors(rank, weight.dtype)


# --- statistics from calibration batches --------------------------------------------------------------


def _inputs(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}


def fisher_rows(model: Encoder, batches: Iterable[dict[str, torch.Tensor]], device: torch.device,
                found: list[Matrix]) -> dict[str, torch.Tensor]:
    """Per matrix, I_i = sum over ``batches`` of (dL/dW_ij)^2 summed over j (L: the batch's mean cross-entropy
    against its labels), computed with the model in eval mode; float64, one entry per output row."""
    sums = {m.key: torch.zeros(m.out, dtype=torch.float64) for m in found}
    model.eval()
    for batch in batches:
        model.zero_grad(set_to_none=True)
        logits = model(**_inputs(batch, device)).logits
        hard_ce(logits, batch["labels"].to(device)).backward()
        for m in found:
            grad = linear_of(model, m).weight.grad
            sums[m.key] += (grad.double().cpu() ** 2).sum(dim=1)
    model.zero_grad(set_to_none=True)
    return sums


@contextmanager
def _recording(model: Encoder, found: list[Matrix],
               mask: list[torch.Tensor | None]) -> Iterator[dict[str, torch.Tensor]]:
    """X X^T of every matrix's inputs over the real (not padding) tokens of the batches run inside."""
    sums = {m.key: torch.zeros(m.inp, m.inp, dtype=torch.float64) for m in found}

    def hook(key: str):
        def record(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0].detach().reshape(-1, args[0].shape[-1])
            if mask[0] is not None:
                x = x[mask[0].reshape(-1).bool()]
            x = x.double().cpu()
            sums[key] += x.T @ x
        return record

    handles = [linear_of(model, m).register_forward_pre_hook(hook(m.key)) for m in found]
    try:
        yield sums
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def input_covariances(model: Encoder, batches: Iterable[dict[str, torch.Tensor]], device: torch.device,
                      found: list[Matrix]) -> dict[str, torch.Tensor]:
    """Per matrix, C = X X^T of its inputs over the real tokens of ``batches`` (float64, in x in)."""
    model.eval()
    mask: list[torch.Tensor | None] = [None]
    with _recording(model, found, mask) as sums:
        for batch in batches:
            inputs = _inputs(batch, device)
            mask[0] = inputs.get("attention_mask")
            model(**inputs)
    return sums


def cholesky(covariance: torch.Tensor) -> torch.Tensor:
    """L with L L^T = C + ridge (C is positive semi-definite; the ridge makes it definite)."""
    ridge = RIDGE * float(covariance.diagonal().mean()) or RIDGE
    return torch.linalg.cholesky(covariance + ridge * torch.eye(len(covariance), dtype=covariance.dtype))


# --- ranks ------------------------------------------------------------------------------------------


def uniform_ranks(found: list[Matrix], keep: float) -> dict[str, int]:
    """The rank that keeps ``keep`` of each matrix's parameters (at least 1); 0 (dense) where factors would not
    be smaller than the matrix."""
    ranks = {}
    for m in found:
        rank = max(1, int(keep * m.params / (m.out + m.inp)))
        ranks[m.key] = rank if rank <= break_even(m.out, m.inp) else 0
    return ranks


def energy_ranks(found: list[Matrix], spectra: dict[str, Weighted], budget: int) -> dict[str, int]:
    """Ranks within ``budget`` parameters (of all the matrices' factors), allocated by energy: each next rank
    goes to the matrix whose next singular value adds the largest share of that matrix's energy per parameter
    it costs (out + in), until the budget is spent; a matrix whose rank passes break-even is kept dense (0).
    Every matrix keeps at least rank 1."""
    ranks = {m.key: 1 for m in found}   # every matrix keeps at least its first direction
    totals = {m.key: float((spectra[m.key].singular ** 2).sum()) or 1.0 for m in found}
    shape = {m.key: m for m in found}

    def gain(key: str, rank: int) -> float:
        s = spectra[key].singular
        return float(s[rank] ** 2) / totals[key] / (shape[key].out + shape[key].inp) if rank < len(s) else -1.0

    heap = [(-gain(m.key, 1), m.key) for m in found]
    heapq.heapify(heap)
    spent = sum(m.out + m.inp for m in found)
    while heap:
        negative, key = heapq.heappop(heap)
        cost = shape[key].out + shape[key].inp
        if -negative < 0 or spent + cost > budget:
            continue
        ranks[key] += 1
        spent += cost
        heapq.heappush(heap, (-gain(key, ranks[key]), key))
    return {key: 0 if rank > break_even(shape[key].out, shape[key].inp) else rank for key, rank in ranks.items()}
