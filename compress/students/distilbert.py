"""DistilBERT-style student: half the teacher's layers at the same width (Sanh et al. 2019)."""

from __future__ import annotations

from compress.models.config import EncoderConfig


def distilbert_config(teacher: EncoderConfig, num_layers: int | None = None) -> EncoderConfig:
    """The teacher with ``num_layers`` layers (default: half, rounded up)."""
    layers = num_layers if num_layers is not None else max(1, (teacher.num_layers + 1) // 2)
    if layers > teacher.num_layers:
        raise ValueError(
            f"num_layers ({layers}) must not exceed the teacher's {teacher.num_layers}: "
            "a DistilBERT student takes a subset of the teacher's layers."
        )
    return teacher.replace(num_layers=layers, sharing="none", groups=1)
