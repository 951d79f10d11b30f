"""TinyBERT-style student: narrower and shallower than the teacher (Jiao et al. 2020).

Defaults are the paper's TinyBERT-4: 4 layers, hidden 312, 12 heads, FFN 1200. The student starts
from random weights, or from a general-distillation checkpoint (distilled on raw text).

What only TinyBERT uses lives beside it: :mod:`.general` (general distillation on a raw-text
corpus, cached); the paper's data augmentation is every student's transfer data (:mod:`compress.students.transfer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compress.distill.schedule import check_copies
from compress.models.config import EncoderConfig
from compress.students.init_from import check_init_from

# The weights' side (torch) is imported in the functions that use it: the options and shapes here are what
# `compress run --help` shows, and they need no torch.
if TYPE_CHECKING:
    from compress.models.encoder import Encoder


@dataclass
class TinyBertOptions:
    """Shape (the paper's TinyBERT-4 by default) and initialisation of the student."""

    num_layers: int = field(default=4, metadata={"help": "student layers (default 4).", "flag": "--layers"})
    hidden_size: int = field(default=312, metadata={"help": "student hidden size (default 312)."})
    num_heads: int = field(default=12, metadata={"help": "student attention heads (default 12).", "flag": "--heads"})
    ffn_size: int = field(default=1200, metadata={"help": "student FFN size (default 1200)."})
    general_distillation: bool = field(default=False, metadata={
        "help": "distil the pre-trained teacher on raw text first (cached), then the task."})
    init_from: str | None = field(default=None, metadata={
        "help": "start from this student checkpoint directory (e.g. a general TinyBERT)."})
    project_embeddings: bool = field(default=True, metadata={
        "help": "do not start the embedding tables from the teacher's projected onto its top principal "
                "directions (ignored with init_from).", "flag": "--no-project-embeddings"})
    augment_copies: int | None = field(default=None, metadata={
        "help": "augmented copies per training sentence, learned from the teacher's outputs only (paper: 20, each "
                "word replaced with probability 0.4 by one of its 15 nearest neighbours; default: the recipe's, "
                "0 fast, 4 default (two an epoch), 20 thorough).", "flag": "--augment"})

    def __post_init__(self) -> None:
        check_copies(self.augment_copies)   # refused as it is given, before anything loads


def tinybert_config(teacher: EncoderConfig, options: TinyBertOptions | None = None) -> EncoderConfig:
    """The student's shape; vocabulary, positions and token types follow the teacher's."""
    o = options or TinyBertOptions()
    if o.hidden_size > teacher.hidden_size or o.num_layers > teacher.num_layers:
        raise ValueError(
            f"a TinyBERT student must be no wider and no deeper than its teacher (teacher: "
            f"{teacher.num_layers} layers of {teacher.hidden_size}; asked: {o.num_layers} of {o.hidden_size})."
        )
    config = teacher.replace(
        embedding_size=o.hidden_size, hidden_size=o.hidden_size, num_layers=o.num_layers,
        num_heads=o.num_heads, ffn_size=o.ffn_size, sharing="none", groups=1,
    )
    if o.init_from:
        check_init_from(o.init_from, config)
    return config


def build_tinybert(teacher: Encoder, options: TinyBertOptions) -> Encoder:
    """A TinyBERT student shaped after ``teacher``: from ``options.init_from`` (its classifier left
    fresh: a general-distilled student has none trained for this task), else fresh layers with
    embeddings projected from the teacher's."""
    from compress.models.checkpoints import load_encoder
    from compress.models.encoder import Encoder
    from compress.students.init import project_embeddings

    student = Encoder(tinybert_config(teacher.config, options))
    if options.init_from:  # its shape was checked with the student's (tinybert_config)
        source = load_encoder(Path(options.init_from)).model
        state = {k: v for k, v in source.state_dict().items() if not k.startswith("classifier.")}
        student.load_state_dict(state, strict=False)
    elif options.project_embeddings:
        project_embeddings(teacher, student)
    return student
