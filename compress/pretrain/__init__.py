"""Pre-training an ALBERT-shaped encoder: masked LM with sentence-order or next-sentence prediction."""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "config": ["OBJECTIVES", "PretrainConfig"],
    "run": ["PretrainResult", "pretrain"],
})
