"""TinyBERT-style student: narrower and shallower than the teacher (Jiao et al. 2020).

Defaults are the paper's TinyBERT-4: 4 layers, hidden 312, 12 heads, FFN 1200.
"""

from __future__ import annotations

from compress.models.config import EncoderConfig


def tinybert_config(
    teacher: EncoderConfig,
    num_layers: int = 4,
    hidden_size: int = 312,
    num_heads: int = 12,
    ffn_size: int = 1200,
) -> EncoderConfig:
    """The student's shape; vocabulary, positions and token types follow the teacher."""
    return teacher.replace(
        embedding_size=hidden_size, hidden_size=hidden_size, num_layers=num_layers,
        num_heads=num_heads, ffn_size=ffn_size, sharing="none", groups=1,
    )
