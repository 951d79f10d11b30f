"""A student cut from the fine-tuned teacher at any shape (Minitron's way; CoFi's lesson): its layers, width, heads and
FFN neurons chosen by importance on training sentences (:mod:`compress.prune`), every weight it keeps the teacher's,
then taught as a TinyBERT student is (layer-wise, then the predictions, with the run's transfer data), its hidden
states compared with the teacher's at the channels it kept and its layers with the layers it was cut from.

A shape is asked by name (``shape=tinybert-4``, the default: TinyBERT-4's 4 layers, width 312 and FFN 1200, each at
most the teacher's) and its parts;
heads keep their width (the teacher's head size), so every head is kept unless ``heads`` says fewer. The cut is made
after the teacher is fine-tuned (:func:`choose_cut`, the run's ``prepare``) and held by the options for the build and
the recipe (:func:`kept_by`); before that, the shape is known and the layer map is the uniform one.

``cuts=k`` (k > 1) cuts while distilling, as CoFi raises its sparsity during training: the first cut goes a k-th of the
way from the teacher's shape to the student's, the layer-wise stage runs in k parts, and after each of the first k - 1
the student as trained so far is scored and cut the next k-th of the way (:func:`recut`), every part distilled from the
fine-tuned teacher at the layers and channels kept so far. Each cut is recorded in the record of the stage it follows,
so a resumed run rebuilds the shape its checkpoint was saved at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compress.distill.schedule import check_copies
from compress.models.config import EncoderConfig

if TYPE_CHECKING:
    import torch

    from compress.data.batching import TokenizedTask
    from compress.distill.recipe import Stage
    from compress.models.encoder import Encoder
    from compress.prune.structure import Keep
    from compress.registry.method import StageTurn

# Named shapes: (layers, width, FFN).
SHAPES: dict[str, tuple[int, int, int]] = {"tinybert-4": (4, 312, 1200), "tinybert-6": (6, 768, 3072)}
LAYER_ORDERS = ("importance", "top")


@dataclass
class CutOptions:
    """The shape to cut (a name, and layers, width, FFN and heads over its parts; their default 0 stands for the
    shape's, and a 0 given is refused) and how it is chosen."""

    shape: str = field(default="tinybert-4", metadata={
        "help": "a named shape: " + ", ".join(f"{name} ({d} layers, width {w}, FFN {f})"
                                              for name, (d, w, f) in SHAPES.items())
                + " (default tinybert-4), each part at most the teacher's; --layers, --width and --ffn override its "
                  "parts."})
    num_layers: int = field(default=0, metadata={"help": "layers to keep (default: the shape's).", "flag": "--layers",
                                                 "search": lambda teacher: searched(teacher)[0],
                                                 "zero_is": "the shape's"})
    width: int = field(default=0, metadata={"help": "hidden channels to keep (default: the shape's).",
                                            "search": lambda teacher: searched(teacher)[1],
                                            "zero_is": "the shape's"})
    ffn: int = field(default=0, metadata={"help": "FFN neurons to keep in every layer (default: the shape's).",
                                          "search": lambda teacher: searched(teacher)[2],
                                          "zero_is": "the shape's"})
    num_heads: int = field(default=0, metadata={
        "help": "attention heads to keep in every layer (default: every one; each keeps the teacher's head size).",
        "flag": "--heads", "search": lambda teacher: searched(teacher)[3], "zero_is": "every head"})
    layer_order: str = field(default="importance", metadata={
        "help": "which layers stay: importance (those whose removal raises the loss most) or top (the lowest)."})
    scoring_examples: int = field(default=1024, metadata={
        "help": "training sentences the importance scores are measured on (default 1024)."})
    augment_copies: int | None = field(default=None, metadata={
        "help": "augmented copies per training sentence (default: the recipe's).", "flag": "--augment"})
    cuts: int = field(default=1, metadata={
        "help": "cuts that reach the shape: 1 cuts once, before training; k > 1 cuts a k-th of the way before "
                "training and again after each of k parts of the layer-wise stage, scored on the student as trained "
                "so far (CoFi's gradual cut).", "search": (1, 2), "added_later": True})

    def __post_init__(self) -> None:
        check_copies(self.augment_copies)


def searched(teacher: EncoderConfig) -> tuple[tuple[int, ...], ...]:
    """The values `compress search` tries for (layers, width, FFN, heads), each the default shape's (0) first and then
    harsher: one layer fewer and half the layers; four fifths of the width, in whole groups of 32 channels where the
    width is 160 or more (so 4-bit groups of up to 32 divide it; else groups of 8); the FFN at BERT's four times that
    width; as many heads as that width holds at the teacher's head size. A value the shape already has, or that does
    not cut, is left out."""
    layers, width, ffn = (min(part, most) for part, most in zip(
        SHAPES["tinybert-4"], (teacher.num_layers, teacher.hidden_size, teacher.ffn_size), strict=True))
    group = 32 if width >= 160 else 8
    narrow = max(group, group * round(0.8 * width / group))
    harsher = ((layers - 1, layers // 2), (narrow,), (4 * narrow,), (narrow // teacher.head_size,))
    defaults = (layers, width, ffn, teacher.num_heads)
    return tuple((0, *sorted({v for v in values if 1 <= v < default}, reverse=True))
                 for values, default in zip(harsher, defaults, strict=True))


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
    if options.cuts < 1:
        raise ValueError(f"--cuts is how many cuts reach the shape, 1 or more, got {options.cuts}.")
    return layers, width, ffn, heads


Parts = tuple[int, int, int, int]   # layers, width, FFN, heads


def waypoint(teacher: EncoderConfig, options: CutOptions, cut: int) -> Parts:
    """The parts after cut ``cut`` of ``options.cuts`` (from 1): that share of the way from the teacher's parts to the
    student's, the width in whole groups of 8 channels until the last cut."""
    final = parts(teacher, options)
    if cut >= options.cuts:
        return final
    start = (teacher.num_layers, teacher.hidden_size, teacher.ffn_size, teacher.num_heads)
    share = cut / options.cuts
    layers, width, ffn, heads = (round(a + (b - a) * share) for a, b in zip(start, final, strict=True))
    width = min(max(8 * round(width / 8), final[1]), start[1])
    return layers, width, ffn, heads


def shaped(teacher: EncoderConfig, kept: Parts) -> EncoderConfig:
    """A student of the teacher's kind with these parts: every layer with the same heads and FFN, the heads as wide as
    the teacher's."""
    layers, width, ffn, heads = kept
    tied = width % heads == 0 and width // heads == teacher.head_size
    return teacher.replace(num_layers=layers, hidden_size=width, embedding_size=width, ffn_size=ffn, num_heads=heads,
                           head_width=0 if tied else teacher.head_size)


def cut_config(teacher: EncoderConfig, options: CutOptions) -> EncoderConfig:
    """The student's shape: every layer with the same heads and FFN, the heads as wide as the teacher's."""
    return shaped(teacher, parts(teacher, options))


def choose_cut(model: Encoder, data: TokenizedTask, options: CutOptions, seed: int,
               device: torch.device | str = "cpu", show_progress: bool = False, kept: Parts | None = None) -> Keep:
    """What of ``model`` (the teacher, or a student cut from it) is kept to reach the parts ``kept`` (None: the
    student's), by importance on ``options.scoring_examples`` training sentences."""
    from compress.prune.importance import score
    from compress.prune.select import Amount, choose
    from compress.training import ticking

    config = model.config
    layers, width, ffn, heads = kept or parts(config, options)
    batches = data.sample(options.scoring_examples, seed)
    with ticking(show_progress, "cut: importance", len(batches) * (1 + config.num_layers)) as tick:
        importance = score(model.to(device).eval(), batches, device, tick=tick)
    amount = Amount(heads=heads / config.num_heads, neurons=ffn / config.ffn_size,
                    drop_layers=config.num_layers - layers, ranking="layer",
                    layer_order=options.layer_order,
                    channels=None if width == config.hidden_size else width)
    return choose(config, importance, amount)


def layerwise_parts(stage: Stage, cuts: int) -> list[Stage]:
    """The layer-wise stage in ``cuts`` parts (one per cut) sharing its epochs, each at least one; the stage as it is
    for one cut."""
    from dataclasses import replace

    if cuts == 1:
        return [stage]
    parts = [replace(stage, name=f"{stage.name} {i + 1}/{cuts}", part=(i, cuts)) for i in range(cuts)]
    return [replace(part, epochs=part.sharing(stage.epochs)) for part in parts]


def kept_by(options: CutOptions) -> Keep | None:
    """The cut :func:`choose_cut` made for this run (None before it); with several cuts, the latest, as indices into
    the teacher."""
    return getattr(options, "_kept", None)


def kept_parts(teacher: EncoderConfig, keep: Keep) -> Parts:
    """The parts a cut of ``teacher`` keeps (every kept layer the same)."""
    first = keep.layers[0]
    width = teacher.hidden_size if keep.channels is None else len(keep.channels)
    return len(keep.layers), width, len(keep.neurons[first]), len(keep.heads[first])


def build_cut(teacher: Encoder, options: CutOptions) -> Encoder:
    """The student: the teacher's weights that the run's cut keeps, in the shape the cut has."""
    from compress.prune.structure import prune_model

    keep = kept_by(options)
    if keep is None:
        raise ValueError("the cut is chosen on the run's data first (prepare).")
    state = prune_model(teacher, keep).state_dict()
    return _shaped_student(teacher.config, keep, state)


def _shaped_student(teacher: EncoderConfig, keep: Keep, state: dict) -> Encoder:
    """A training student holding ``state``, in the uniform shape of the cut ``keep`` of ``teacher``."""
    from compress.models.encoder import Encoder

    return Encoder.holding(shaped(teacher, kept_parts(teacher, keep)), state).train()


def composed(first: Keep, then: Keep) -> Keep:
    """What of the teacher a cut ``then`` of the student that ``first`` cut from it keeps, as indices into the
    teacher (a teacher's layer that ``first`` dropped keeps nothing)."""
    from compress.prune.structure import Keep

    position = {layer: p for p, layer in enumerate(first.layers)}

    def inner(outer: tuple[tuple[int, ...], ...], chosen: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(outer[b][i] for i in chosen[position[b]]) if b in position else () for b in
                     range(len(outer)))

    channels = first.channels if then.channels is None else \
        then.channels if first.channels is None else tuple(first.channels[c] for c in then.channels)
    return Keep(heads=inner(first.heads, then.heads), neurons=inner(first.neurons, then.neurons),
                layers=tuple(first.layers[i] for i in then.layers), channels=channels)


def cut_record(keep: Keep) -> dict[str, list]:
    """A cut as a stage's record holds it (JSON)."""
    return {"layers": list(keep.layers), "channels": None if keep.channels is None else list(keep.channels),
            "heads": [list(h) for h in keep.heads], "neurons": [list(n) for n in keep.neurons]}


def recorded_cut(record: dict[str, list]) -> Keep:
    """The cut a stage's record holds (:func:`cut_record`)."""
    from compress.prune.structure import Keep

    channels = record["channels"]
    return Keep(heads=tuple(map(tuple, record["heads"])), neurons=tuple(map(tuple, record["neurons"])),
                layers=tuple(record["layers"]), channels=None if channels is None else tuple(channels))


def recut(options: CutOptions, turn: StageTurn) -> Encoder:
    """The student that stage ``turn.index`` trains: cut the next k-th of the way where a cut is due before it (after
    each of the layer-wise stage's first ``cuts - 1`` parts; the cut is added to the record of the stage it follows),
    rebuilt at the latest recorded cut where a resumed run's student is not at it yet (its checkpoint's weights then
    load over it), else the student as it is."""
    from compress.device import resolve_device
    from compress.prune.structure import prune_model

    teacher, latest = turn.run.finetuned, kept_by(options)
    if teacher is None or latest is None:
        raise ValueError("the cut is chosen on the run's data first (prepare).")
    made = [r["cut"] for r in turn.done if "cut" in r]
    if 0 < turn.index < options.cuts and len(made) < turn.index:
        step = choose_cut(turn.student, turn.run.data, options, turn.run.seed, resolve_device(turn.run.device),
                          turn.run.show_progress, kept=waypoint(teacher.config, options, turn.index + 1))
        options._kept = keep = composed(latest, step)   # type: ignore[attr-defined]
        turn.done[-1]["cut"] = cut_record(keep)
        state = prune_model(turn.student, step).state_dict()
        return _shaped_student(teacher.config, keep, state)
    if made and cut_record(latest) != made[-1]:
        options._kept = recorded_cut(made[-1])   # type: ignore[attr-defined]
        return build_cut(teacher, options)
    return turn.student
