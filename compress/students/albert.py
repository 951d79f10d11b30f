"""ALBERT-style student: the teacher's depth, width, heads and FFN, with a factorized embedding
(V x E + E x H instead of V x H) and blocks shared across layers (Lan et al. 2020)."""

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

SHARED_INIT = ("auto", "average", "first", "middle", "last")
DELTA_INIT = ("svd", "zero")


@dataclass
class AlbertOptions:
    """Shape and initialisation of the ALBERT student."""

    embedding_size: int = field(default=128, metadata={
        "help": "embedding size E (128 as in the paper); E equal to the teacher's H turns factorization off."})
    sharing: str = field(default="all", metadata={
        "help": "which blocks the layers share: all, attention, ffn or none."})
    groups: int = field(default=1, metadata={"help": "number of layer groups G, sharing inside each."})
    dropout: bool = field(default=True, metadata={
        "help": "remove dropout, which the ALBERT paper found helps a shared model.", "flag": "--no-dropout"})
    shared_init: str = field(default="auto", metadata={
        "help": "what initialises a group's shared block: the average of its teacher layers, or its first, middle "
                "or last layer; auto: the last for the strict student (the last layer gathers the sentence into "
                "[CLS]; repeated, a middle layer washes the input out), the average with --rank (measured on MR)."})
    rank: int = field(default=0, metadata={
        "search": (48, 0),   # mildest compression first: relaxed sharing keeps more parameters than strict
        "help": "relaxed sharing: every layer adds its own rank-r delta to each shared matrix, r (in + out) "
                "parameters per matrix per layer (0: strict sharing, the paper's ALBERT); a relaxed student trains "
                "5 epochs instead of 3 (--epochs sets both)."})
    delta_init: str = field(default="svd", metadata={
        "help": "how the deltas start: svd (the rank-r truncated SVD of each teacher layer's difference from the "
                "shared block) or zero (as LoRA starts them: the student begins as the strictly shared one)."})
    own_norms: bool = field(default=True, metadata={
        "help": "with --rank, every layer also gets its own offsets on the shared biases and layer norms (from its "
                "teacher layer with --delta-init svd); --no-own-norms keeps them shared.", "flag": "--no-own-norms"})
    fit_steps: int = field(default=100, metadata={
        "help": "steps fitting the factorized embedding to the teacher's (0: SVD only)."})
    hidden_loss: bool = field(default=False, metadata={
        "help": "also distil the hidden states (MSE per layer), not only the logits."})
    intermediate_epochs: int = field(default=0, metadata={
        "help": "epochs of a first stage that distils every layer's hidden states and attention (TinyBERT's "
                "intermediate stage; same depth, so layer m learns from teacher layer m) before the logits."})
    augment_copies: int | None = field(default=None, metadata={
        "help": "augmented copies per training sentence, learned from the teacher's outputs only (TinyBERT's word "
                "replacement; default: the recipe's, 0 fast, 4 default (one an epoch), 20 thorough. On MR one copy "
                "kept three seeds within 0.8 test points instead of 2.9, for twice the steps).", "flag": "--augment"})
    init_from: str | None = field(default=None, metadata={
        "help": "start from this encoder (the directory compress pretrain prints) instead of the teacher's "
                "layers; pooler and classifier still come from the teacher."})

    def __post_init__(self) -> None:
        check_copies(self.augment_copies)   # refused as it is given, before anything loads
        # ``auto`` becomes what it means here, so a run's record names the start it really had.
        if self.shared_init == "auto":
            self.shared_init = "average" if self.rank else "last"


def albert_config(
    teacher: EncoderConfig,
    embedding_size: int = AlbertOptions.embedding_size,
    sharing: str = "all",
    groups: int = 1,
    dropout: bool = True,
    rank: int = 0,
    own_norms: bool = False,
) -> EncoderConfig:
    """The student's shape. ``dropout=False`` removes dropout, as the ALBERT paper found helps; ``rank`` and
    ``own_norms`` relax the sharing (per-layer deltas and offsets)."""
    if embedding_size > teacher.hidden_size:
        raise ValueError(
            f"embedding_size ({embedding_size}) must not exceed the teacher's hidden size "
            f"({teacher.hidden_size}); factorization only makes the embedding smaller."
        )
    rates = {} if dropout else {"hidden_dropout": 0.0, "attention_dropout": 0.0}
    return teacher.replace(embedding_size=embedding_size, sharing=sharing, groups=groups, delta_rank=rank,
                           own_norms=own_norms, **rates)


def check_relaxed(teacher: EncoderConfig, options: AlbertOptions) -> None:
    """The relaxed-sharing options against the teacher's shape, in the options' words (ValueError)."""
    if options.shared_init not in SHARED_INIT:
        raise ValueError(f"shared_init must be one of {', '.join(SHARED_INIT)}, got {options.shared_init!r}.")
    if options.delta_init not in DELTA_INIT:
        raise ValueError(f"delta_init must be one of {', '.join(DELTA_INIT)}, got {options.delta_init!r}.")
    if options.rank < 0:
        raise ValueError(f"rank must be 0 (strict sharing) or more, got {options.rank}.")
    if options.rank and options.sharing == "none":
        raise ValueError("rank relaxes shared blocks, and sharing none shares none.")
    most = teacher.replace(sharing=options.sharing).max_delta_rank
    if options.rank > most:
        raise ValueError(f"rank {options.rank} is above min(out, in) = {most} of the smallest shared matrix, where a "
                         "delta can already be any matrix.")


def options_shape(teacher: EncoderConfig, options: AlbertOptions) -> EncoderConfig:
    """The student's shape from its options, checked in the options' words (ValueError); no file is read."""
    check_relaxed(teacher, options)
    return albert_config(teacher, options.embedding_size, options.sharing, options.groups, options.dropout,
                         options.rank, options.own_norms and options.rank > 0)


def _source_layers(config: EncoderConfig, blocks: int, shared_init: str) -> list[list[int]]:
    """The teacher layers that initialise each of ``blocks`` blocks (one per group when shared): one layer, or
    every layer of the group for ``average``."""
    if blocks == config.num_layers:
        return [[layer] for layer in range(blocks)]
    per_group = config.num_layers // blocks
    if shared_init == "average":
        return [list(range(g * per_group, (g + 1) * per_group)) for g in range(blocks)]
    offset = {"first": 0, "middle": (per_group - 1) // 2, "last": per_group - 1}[shared_init]
    return [[g * per_group + offset] for g in range(blocks)]


def student_config(teacher: EncoderConfig, options: AlbertOptions) -> EncoderConfig:
    """The student's shape; with ``init_from``, also checks that the encoder there has it (ValueError)."""
    if options.intermediate_epochs < 0:
        raise ValueError(f"intermediate_epochs must be 0 (no intermediate stage) or more, "
                         f"got {options.intermediate_epochs}.")
    config = options_shape(teacher, options)
    if options.init_from:
        check_init_from(options.init_from, config)
    return config


def build_albert(teacher: Encoder, options: AlbertOptions) -> Encoder:
    """An ALBERT student initialised from ``teacher`` (see :func:`factorize_embeddings`), or with its
    embeddings and blocks from ``options.init_from`` (a pre-trained encoder) and its head from the teacher.
    A relaxed student's deltas and offsets start at zero here, so it computes what the strictly shared one does."""
    from compress.models.checkpoints import load_encoder
    from compress.models.encoder import Encoder
    from compress.students.init import copy_blocks, copy_embeddings, copy_head, factorize_embeddings, fit_embeddings

    config = student_config(teacher.config, options)
    student = Encoder(config)
    if options.init_from:
        source = load_encoder(Path(options.init_from)).model
        body = {k: v for k, v in source.state_dict().items() if not k.startswith(("pooler.", "classifier."))}
        student.load_state_dict(body, strict=False)
    else:
        if config.factorized:
            factorize_embeddings(teacher, student)
            if options.fit_steps:
                fit_embeddings(teacher, student, steps=options.fit_steps)
        else:
            copy_embeddings(teacher, student)
        copy_blocks(teacher, student, _source_layers(config, config.num_attention_blocks, options.shared_init),
                    "attention")
        copy_blocks(teacher, student, _source_layers(config, config.num_ffn_blocks, options.shared_init), "ffn")
    copy_head(teacher, student)
    return student
