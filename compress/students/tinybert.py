"""TinyBERT-style student: narrower and shallower than the teacher (Jiao et al. 2020).

Defaults are the paper's TinyBERT-4: 4 layers, hidden 312, 12 heads, FFN 1200. The student starts
from random weights, or from a general-distillation checkpoint (distilled on raw text).
"""

from __future__ import annotations

from dataclasses import dataclass

from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder


@dataclass
class TinyBertOptions:
    num_layers: int = 4
    hidden_size: int = 312
    num_heads: int = 12
    ffn_size: int = 1200


def tinybert_config(teacher: EncoderConfig, options: TinyBertOptions | None = None) -> EncoderConfig:
    """The student's shape; vocabulary, positions and token types follow the teacher's."""
    o = options or TinyBertOptions()
    if o.hidden_size > teacher.hidden_size or o.num_layers > teacher.num_layers:
        raise ValueError(
            f"a TinyBERT student must be no wider and no deeper than its teacher (teacher: "
            f"{teacher.num_layers} layers of {teacher.hidden_size}; asked: {o.num_layers} of {o.hidden_size})."
        )
    return teacher.replace(
        embedding_size=o.hidden_size, hidden_size=o.hidden_size, num_layers=o.num_layers,
        num_heads=o.num_heads, ffn_size=o.ffn_size, sharing="none", groups=1,
    )


def build_tinybert(teacher: Encoder, options: TinyBertOptions) -> Encoder:
    """A randomly initialised TinyBERT student shaped after ``teacher``."""
    return Encoder(tinybert_config(teacher.config, options))
