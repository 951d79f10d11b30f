"""ALBERT-style student: the teacher's depth, width, heads and FFN, with a factorized embedding
(V x E + E x H instead of V x H) and blocks shared across layers (Lan et al. 2020)."""

from __future__ import annotations

from compress.models.config import EncoderConfig

DEFAULT_EMBEDDING_SIZE = 128


def albert_config(
    teacher: EncoderConfig,
    embedding_size: int = DEFAULT_EMBEDDING_SIZE,
    sharing: str = "all",
    groups: int = 1,
    dropout: bool = True,
) -> EncoderConfig:
    """The student's shape. ``dropout=False`` removes dropout, as the ALBERT paper found helps."""
    if embedding_size > teacher.hidden_size:
        raise ValueError(
            f"embedding_size ({embedding_size}) must not exceed the teacher's hidden size "
            f"({teacher.hidden_size}); factorization only makes the embedding smaller."
        )
    rates = {} if dropout else {"hidden_dropout": 0.0, "attention_dropout": 0.0}
    return teacher.replace(embedding_size=embedding_size, sharing=sharing, groups=groups, **rates)
