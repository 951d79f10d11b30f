"""Distillation: loss functions (pure, registered by name), layer maps (config values), recipes, the
objective that feeds a recipe's losses, and the teacher-logit cache.

The training loop is :mod:`compress.training` (shared with teacher fine-tuning); TinyBERT's general
distillation and augmentation live with TinyBERT (:mod:`compress.students.tinybert`). This
``__init__`` only re-exports the losses and layer maps, so importing it stays cheap.
"""

from compress.distill.layer_maps import LAYER_MAP_KINDS, LayerMap, teacher_blocks, teacher_layers
from compress.distill.losses import (
    LOSSES,
    LossSpec,
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

__all__ = [
    "LAYER_MAP_KINDS",
    "LOSSES",
    "LayerMap",
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
    "teacher_blocks",
    "teacher_layers",
]
