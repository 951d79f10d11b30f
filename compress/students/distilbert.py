"""DistilBERT-style student: fewer layers at the same width, initialised from the teacher by
taking one teacher layer of every two (Sanh et al. 2019)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compress.distill.layer_maps import LayerMap, parse_layer_map, teacher_blocks
from compress.models.config import EncoderConfig

# The weights' side (torch) is imported in the functions that use it: the options and shapes here are what
# `compress run --help` shows, and they need no torch.
if TYPE_CHECKING:
    from compress.models.encoder import Encoder


@dataclass
class DistilBertOptions:
    """Depth of the student and which teacher layers it starts from."""

    num_layers: int | None = field(default=None, metadata={
        "help": "student layers (default: half the teacher's, rounded up).", "flag": "--layers",
        "search": lambda teacher: searched_depths(teacher)})
    init_map: LayerMap = field(default_factory=lambda: LayerMap("every_other"), metadata={
        "help": "which teacher layers the student's are copied from: every_other, uniform, last or 2,4,6.",
        "flag": None, "parse": parse_layer_map})


def searched_depths(teacher: EncoderConfig) -> tuple[int | None, ...]:
    """The depths `compress search` tries: the default (half the teacher's) and a third of the teacher's."""
    third = max(1, teacher.num_layers // 3)
    return (None,) if third == distilbert_config(teacher).num_layers else (None, third)


def distilbert_config(teacher: EncoderConfig, num_layers: int | None = None) -> EncoderConfig:
    """The teacher with ``num_layers`` layers (default: half, rounded up)."""
    layers = num_layers if num_layers is not None else max(1, (teacher.num_layers + 1) // 2)
    if not 0 < layers <= teacher.num_layers:
        raise ValueError(
            f"num_layers ({layers}) must be between 1 and the teacher's {teacher.num_layers}: "
            "a DistilBERT student takes a subset of the teacher's layers."
        )
    return teacher.replace(num_layers=layers, sharing="none", groups=1)


def build_distilbert(teacher: Encoder, options: DistilBertOptions) -> Encoder:
    """A DistilBERT student: embeddings, head and the mapped layers copied from ``teacher``."""
    from compress.models.encoder import Encoder
    from compress.students.init import copy_blocks, copy_embeddings, copy_head

    config = distilbert_config(teacher.config, options.num_layers)
    student = Encoder(config)
    sources = [[layer] for layer in teacher_blocks(options.init_map, config.num_layers, teacher.config.num_layers)]
    copy_embeddings(teacher, student)
    copy_blocks(teacher, student, sources, "attention")
    copy_blocks(teacher, student, sources, "ffn")
    copy_head(teacher, student)
    return student
