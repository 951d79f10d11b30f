"""Initialising a student from a teacher: copying blocks and heads, factorizing the embedding."""

from __future__ import annotations

import math

import torch

from compress.models.encoder import Encoder


@torch.no_grad()
def copy_head(teacher: Encoder, student: Encoder) -> None:
    """Copy the pooler and classifier (same width and classes required)."""
    student.pooler.load_state_dict(teacher.pooler.state_dict())
    student.classifier.load_state_dict(teacher.classifier.state_dict())


@torch.no_grad()
def copy_embeddings(teacher: Encoder, student: Encoder) -> None:
    """Copy token, position and type embeddings and their layer norm (same E required)."""
    src, dst = teacher.embeddings, student.embeddings
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings", "layer_norm"):
        getattr(dst, name).load_state_dict(getattr(src, name).state_dict())


@torch.no_grad()
def copy_blocks(teacher: Encoder, student: Encoder, sources: list[list[int]], kind: str) -> None:
    """Student block ``b`` of ``kind`` (``attention`` or ``ffn``) <- the mean of teacher layers ``sources[b]``'
    blocks (a copy when it names one layer)."""
    src, dst = getattr(teacher, kind), getattr(student, kind)
    if len(sources) != len(dst):
        raise ValueError(f"{len(dst)} {kind} blocks need {len(dst)} source layers, got {len(sources)}.")
    for block, layers in zip(dst, sources):
        states = [src[layer].state_dict() for layer in layers]
        block.load_state_dict({name: sum(state[name] for state in states) / len(states) for name in states[0]})


def _principal_basis(teacher: Encoder, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Truncated SVD of the teacher's word embeddings: (U_k S_k, V_k (H x k), all singular values)."""
    u, s, vh = torch.linalg.svd(teacher.embeddings.word_embeddings.weight.float(), full_matrices=False)
    return u[:, :width] * s[:width], vh[:width].T, s


@torch.no_grad()
def project_embeddings(teacher: Encoder, student: Encoder) -> float:
    """A narrower student's token, position and type tables = the teacher's in its top principal
    directions (x_E = x_H V_E), so the student starts with the teacher's lexical geometry.
    Returns the share of word-embedding energy kept."""
    return _project(teacher, student)[0]


def _project(teacher: Encoder, student: Encoder) -> tuple[float, torch.Tensor]:
    """:func:`project_embeddings`, also returning the basis V_E (one SVD for both callers)."""
    width = student.config.embedding_size
    words, basis, s = _principal_basis(teacher, width)
    src, dst = teacher.embeddings, student.embeddings
    dst.word_embeddings.weight.copy_(words)
    dst.position_embeddings.weight.copy_(src.position_embeddings.weight[: len(dst.position_embeddings.weight)] @ basis)
    dst.token_type_embeddings.weight.copy_(src.token_type_embeddings.weight @ basis)
    return float((s[:width] ** 2).sum() / (s**2).sum()), basis


@torch.no_grad()
def factorize_embeddings(teacher: Encoder, student: Encoder) -> float:
    """Initialise a V x E + E x H embedding from the teacher's V x H one by truncated SVD.

    W = U S V^T; the token table becomes U_E S_E (V x E) and position and type tables are
    expressed in the same basis (P V_E, T V_E), so x_E = x_H V_E is the best rank-E view of the
    teacher's summed embedding. The student normalises in E and projects back with
    diag(gamma) V_E sqrt(H/E) + beta, which restores the teacher's scale and layer-norm affine
    (sqrt(H/E) because a layer-normed vector has norm sqrt(width)). Returns the share of the
    word-embedding energy (squared Frobenius norm) the rank-E table keeps.
    """
    e, h = student.config.embedding_size, teacher.config.hidden_size
    kept, basis = _project(teacher, student)
    src, dst = teacher.embeddings, student.embeddings
    dst.layer_norm.reset_parameters()
    gamma, beta = src.layer_norm.weight, src.layer_norm.bias
    dst.projection.weight.copy_(gamma[:, None] * basis * math.sqrt(h / e))
    dst.projection.bias.copy_(beta)
    return kept


def fit_embeddings(teacher: Encoder, student: Encoder, steps: int = 200, seq_len: int = 64,
                   batch_size: int = 64, lr: float = 3e-3, seed: int = 0) -> float:
    """Refine the student's embedding block to reproduce the teacher's embedding output.

    Minimises MSE(student.embeddings(x), teacher.embeddings(x)) over random token sequences
    (every position up to ``seq_len``, random token types): the factorized V x E + E x H block
    then matches the teacher's layer-normed V x H embedding as well as its rank allows, before
    any task data is seen. Returns the final relative error ||s - t|| / ||t||.
    """
    g = torch.Generator().manual_seed(seed)   # drawn on the CPU, so a seed gives the same sequences on any device
    device = next(teacher.parameters()).device
    student.to(device)   # fitted where the teacher is
    config = teacher.config
    n = min(seq_len, config.max_positions, student.config.max_positions)
    params = list(student.embeddings.parameters())
    optimizer = torch.optim.Adam(params, lr=lr, fused=True)   # one kernel: the per-tensor loop is ~6x slower on CPU
    teacher_mode, student_mode = teacher.training, student.training
    teacher.eval()
    student.eval()  # no dropout while fitting
    error = float("nan")
    for step in range(steps):
        ids = torch.randint(0, config.vocab_size, (batch_size, n), generator=g).to(device)
        types = torch.randint(0, config.type_vocab_size, (batch_size, 1), generator=g).expand(-1, n).to(device)
        with torch.no_grad():
            target = teacher.embeddings(ids, types)
        output = student.embeddings(ids, types)
        loss = torch.nn.functional.mse_loss(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == steps - 1:
            error = float((output - target).detach().norm() / target.norm())
    teacher.train(teacher_mode)
    student.train(student_mode)
    return error
