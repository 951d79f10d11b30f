"""Student builders: the shape of each compressed student and its initialisation from the teacher."""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "albert": ["AlbertOptions", "albert_config", "build_albert"],
    "distilbert": ["DistilBertOptions", "build_distilbert", "distilbert_config"],
    "tinybert": ["TinyBertOptions", "build_tinybert", "tinybert_config"],
})
