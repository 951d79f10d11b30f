"""A student cut from the fine-tuned teacher at any shape (Minitron's way; CoFi's lesson): its layers, width, heads and
FFN neurons chosen by importance on training sentences (:mod:`compress.prune`), every weight it keeps the teacher's,
then taught as a TinyBERT student is (layer-wise, then the predictions, with the run's transfer data), its hidden
states compared with the teacher's at the channels it kept and its layers with the layers it was cut from.

A shape is asked by name (``shape=tinybert-4``, the default: TinyBERT-4's 4 layers, width 312 and FFN 1200, each at
most the teacher's) and its parts;
heads keep their width (the teacher's head size), so every head is kept unless ``heads`` says fewer. The cut is made
after the teacher is fine-tuned (:func:`choose_cut`, the run's ``prepare``) and held by the options for the build and
the recipe (:func:`kept_by`); before that, the shape is known and the layer map is the uniform one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compress.distill.schedule import check_copies
from compress.models.config import EncoderConfig

if TYPE_CHECKING:
    import torch

    from compress.data.batching import TokenizedTask
    from compress.models.encoder import Encoder
    from compress.prune.structure import Keep

# Named shapes: (layers, width, FFN).
SHAPES: dict[str, tuple[int, int, int]] = {"tinybert-4": (4, 312, 1200), "tinybert-6": (6, 768, 3072)}
LAYER_ORDERS = ("importance", "top")


@dataclass
class CutOptions:
    """The shape to cut (a name, and layers, width, FFN and heads over its parts; 0 keeps the shape's) and how it is
    chosen."""

    shape: str = field(default="tinybert-4", metadata={
        "help": "a named shape: " + ", ".join(f"{name} ({d} layers, width {w}, FFN {f})"
                                              for name, (d, w, f) in SHAPES.items())
                + " (default tinybert-4), each part at most the teacher's; --layers, --width and --ffn override its "
                  "parts."})
    num_layers: int = field(default=0, metadata={"help": "layers to keep (0: the shape's).", "flag": "--layers",
                                                 "search": (0, 2)})
    width: int = field(default=0, metadata={"help": "hidden channels to keep (0: the shape's).",
                                            "search": lambda teacher: (0, searched_width(teacher))})
    ffn: int = field(default=0, metadata={"help": "FFN neurons to keep in every layer (0: the shape's)."})
    num_heads: int = field(default=0, metadata={"help": "attention heads to keep in every layer (0: every one; each "
                                                        "keeps the teacher's head size).", "flag": "--heads"})
    layer_order: str = field(default="importance", metadata={
        "help": "which layers stay: importance (those whose removal raises the loss most) or top (the lowest)."})
    scoring_examples: int = field(default=1024, metadata={
        "help": "training sentences the importance scores are measured on (default 1024)."})
    augment_copies: int | None = field(default=None, metadata={
        "help": "augmented copies per training sentence (default: the recipe's).", "flag": "--augment"})

    def __post_init__(self) -> None:
        check_copies(self.augment_copies)


def searched_width(teacher: EncoderConfig) -> int:
    """The narrower width `compress search` tries besides the default shape's: four fifths of it, in whole groups of
    8 channels."""
    return 8 * round(0.8 * min(SHAPES["tinybert-4"][1], teacher.hidden_size) / 8)


def parts(teacher: EncoderConfig, options: CutOptions) -> tuple[int, int, int, int]:
    """(layers, width, FFN, heads) the cut keeps: the options', the shape's, else the teacher's. ValueError, one
    sentence, for a shape it cannot be."""
    if options.shape not in SHAPES:
        raise ValueError(f"unknown shape {options.shape!r}; use one of {', '.join(SHAPES)}, or give --layers, "
                         "--width and --ffn.")
    teachers = (teacher.num_layers, teacher.hidden_size, teacher.ffn_size)
    named = (min(part, most) for part, most in zip(SHAPES[options.shape], teachers, strict=True))
    layers, width, ffn = (given or default for given, default in zip(
        (options.num_layers, options.width, options.ffn), named, strict=True))
    heads = options.num_heads or teacher.num_heads
    if options.layer_order not in LAYER_ORDERS:
        raise ValueError(f"--layer-order must be one of {', '.join(LAYER_ORDERS)}, got {options.layer_order!r}.")
    for what, value, most in (("layers", layers, teacher.num_layers), ("width", width, teacher.hidden_size),
                              ("FFN", ffn, teacher.ffn_size), ("heads", heads, teacher.num_heads)):
        if value < 1 or value > most:
            raise ValueError(f"a cut keeps from 1 to the teacher's {most} {what}, not {value}.")
    if teacher.sharing != "none" or teacher.factorized or teacher.pruned or teacher.low_rank:
        raise ValueError("a student is cut from a teacher of BERT's shape (no sharing, factorization, pruning or "
                         "low-rank matrices).")
    if options.scoring_examples < 1:
        raise ValueError(f"--scoring-examples must be 1 or more, got {options.scoring_examples}.")
    return layers, width, ffn, heads


def cut_config(teacher: EncoderConfig, options: CutOptions) -> EncoderConfig:
    """The student's shape: every layer with the same heads and FFN, the heads as wide as the teacher's."""
    layers, width, ffn, heads = parts(teacher, options)
    tied = width % heads == 0 and width // heads == teacher.head_size
    return teacher.replace(num_layers=layers, hidden_size=width, embedding_size=width, ffn_size=ffn, num_heads=heads,
                           head_width=0 if tied else teacher.head_size)


def choose_cut(teacher: Encoder, data: TokenizedTask, options: CutOptions, seed: int,
               device: torch.device | str = "cpu", show_progress: bool = False) -> Keep:
    """What of ``teacher`` the student keeps, by importance on ``options.scoring_examples`` training sentences."""
    from compress.prune.importance import score
    from compress.prune.select import Amount, choose
    from compress.training import ticking

    layers, width, ffn, heads = parts(teacher.config, options)
    config = teacher.config
    batches = data.sample(options.scoring_examples, seed)
    with ticking(show_progress, "cut: importance", len(batches) * (1 + config.num_layers)) as tick:
        importance = score(teacher.to(device).eval(), batches, device, tick=tick)
    amount = Amount(heads=heads / config.num_heads, neurons=ffn / config.ffn_size,
                    drop_layers=config.num_layers - layers, ranking="layer",
                    layer_order=options.layer_order,
                    channels=None if width == config.hidden_size else width)
    return choose(config, importance, amount)


def kept_by(options: CutOptions) -> Keep | None:
    """The cut :func:`choose_cut` made for this run (None before it)."""
    return getattr(options, "_kept", None)


def build_cut(teacher: Encoder, options: CutOptions) -> Encoder:
    """The student: the teacher's weights that the run's cut keeps, in the shape :func:`cut_config` gives."""
    from compress.models.encoder import Encoder
    from compress.prune.structure import prune_model

    keep = kept_by(options)
    if keep is None:
        raise ValueError("the cut is chosen on the run's data first (prepare).")
    state = prune_model(teacher, keep).state_dict()
    return Encoder.holding(cut_config(teacher.config, options), state).train()
