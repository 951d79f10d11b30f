"""One transformer encoder with knobs, checkpoint conversion, and parameter/FLOP accounting."""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "accounting": ["ParamCount", "count_parameters", "flops_per_sequence"],
    "checkpoints": ["LoadedEncoder", "load_encoder", "save_encoder"],
    "config": ["EncoderConfig"],
    "encoder": ["Encoder", "EncoderOutput"],
})
