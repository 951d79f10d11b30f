"""One transformer encoder with knobs, checkpoint conversion, and parameter/FLOP accounting."""

from compress.models.accounting import ParamCount, count_parameters, flops_per_sequence
from compress.models.checkpoints import LoadedEncoder, load_encoder, save_encoder
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder, EncoderOutput

__all__ = [
    "Encoder", "EncoderConfig", "EncoderOutput", "LoadedEncoder", "ParamCount",
    "count_parameters", "flops_per_sequence", "load_encoder", "save_encoder",
]
