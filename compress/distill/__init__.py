"""Distillation: loss functions (pure, registered by name), layer maps (config values), recipes, the
objective that feeds a recipe's losses, and the caches of the teacher's outputs (logits; hidden states and
attention maps).

The training loop is :mod:`compress.training` (shared with teacher fine-tuning); TinyBERT's general
distillation and augmentation live with TinyBERT (:mod:`compress.students.tinybert`). This
``__init__`` only re-exports the losses and layer maps, so importing it stays cheap.
"""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "layer_maps": ["LAYER_MAP_KINDS", "LayerMap", "teacher_blocks", "teacher_layers"],
    "losses": ["LOSSES", "LossSpec", "attention_kl", "attention_mse", "cosine_hidden", "embedding_mse", "get_loss",
        "hard_ce", "hidden_mse", "kd_kl", "make_projection", "soft_ce"],
})
