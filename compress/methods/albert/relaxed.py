"""Relaxed sharing (Bae et al. 2025, "Relaxed Recursive Transformers"): the deltas that let each layer of a shared
block differ from it, started from the teacher.

Layer l runs W' + B_l A_l where W' is the shared matrix. ``--delta-init svd`` starts B_l A_l at the rank-r truncated
SVD of the teacher's residual W_l - W' (with own norms, each bias and layer-norm offset at b_l - b'), so at full
rank the student is the teacher again; ``zero`` leaves them at zero, the strictly shared student.
"""

from __future__ import annotations

import torch

from compress.methods.lowrank.factorize import MATRIX_NAMES, factor
from compress.models.encoder import Encoder


@torch.no_grad()
def deltas_from_teacher(teacher: Encoder, student: Encoder) -> None:
    """Every delta and offset of ``student`` <- its teacher layer's residual from the shared block (truncated SVD
    for the matrices, exact for the biases and layer norms). Same depth and width required, as ALBERT keeps them."""
    config = student.config
    for kind, names in MATRIX_NAMES.items():
        deltas = getattr(student, f"{kind}_deltas")
        if deltas is None:
            continue
        block_of = config.attention_block_of if kind == "attention" else config.ffn_block_of
        for layer, delta in enumerate(deltas):
            shared, source = getattr(student, kind)[block_of(layer)], getattr(teacher, kind)[layer]
            for name in names:
                offset, mine, theirs = getattr(delta, name), getattr(shared, name), getattr(source, name)
                if offset.up is not None:
                    up, down = factor(theirs.weight - mine.weight, config.delta_rank)
                    offset.up.weight.copy_(up)
                    offset.down.weight.copy_(down)
                if offset.bias is not None:
                    offset.bias.copy_(theirs.bias - mine.bias)
            if delta.layer_norm is not None:
                delta.layer_norm.weight.copy_(source.layer_norm.weight - shared.layer_norm.weight)
                delta.layer_norm.bias.copy_(source.layer_norm.bias - shared.layer_norm.bias)
