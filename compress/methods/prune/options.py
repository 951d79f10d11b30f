"""Structured pruning's options (their fields become ``compress run`` flags), importable without torch."""

from __future__ import annotations

from dataclasses import dataclass, field

CHANNEL_STEP = 8   # a share of the width rounds to a multiple of this many channels
WIDTH_STATES = ("channels", "projection")


@dataclass
class PruneOptions:
    keep_heads: float = field(default=0.5, metadata={
        "help": "share of the attention heads to keep, in (0, 1] (default 0.5).", "search": (0.75, 0.5, 0.25)})
    keep_ffn: float = field(default=0.5, metadata={
        "help": "share of the FFN neurons to keep, in (0, 1] (default 0.5).", "search": (0.75, 0.5, 0.25)})
    keep_width: float = field(default=1.0, metadata={
        "help": "hidden channels to keep (the width every layer reads and writes): a share in (0, 1], rounded to "
                "a multiple of 8 channels, or a count above 1 (default 1: the width stays).", "added_later": True})
    width_states: str = field(default="channels", metadata={
        "help": "what a width cut's recovery compares its hidden states with: the unpruned model's at the kept "
                "channels (channels) or through a learned projection (projection).", "added_later": True})
    drop_layers: int = field(default=0, metadata={"help": "layers to remove (default 0)."})
    layer_order: str = field(default="top", metadata={
        "help": "which layers go: top (the last ones, Sajjad et al.) or importance (the least loss increase when "
                "skipped)."})
    ranking: str = field(default="global", metadata={
        "help": "rank heads and neurons across all layers (global) or keep the same share of each layer (layer)."})
    steps: int = field(default=1, metadata={
        "help": "1 cuts once; k cuts in k equal slices, scoring again and recovering after each (iterative)."})
    recovery_epochs: int = field(default=2, metadata={
        "help": "epochs of distillation from the unpruned model after each cut (0: training-free)."})
    recovery_lr: float = field(default=5e-5, metadata={"help": "learning rate of the recovery (default 5e-5)."})
    scoring_examples: int = field(default=1024, metadata={
        "help": "training examples the importance scores are measured on (default 1024)."})
    score_against: str = field(default="labels", metadata={
        "help": "what the scoring loss compares with: labels (gold) or predictions (the model's own)."})
    head_curve: bool = field(default=True, metadata={"flag": "--no-head-curve", "help": (
        "skip the head-importance curve (dev accuracy with 0-90% of the heads removed, by importance and at "
        "random; about 20 evaluations of the dev split).")})
    width_curve: bool = field(default=True, metadata={"flag": "--no-width-curve", "help": (
        "skip the width curve where the run cuts the width (dev accuracy keeping 12/12 to 6/12 of the hidden "
        "channels, by importance and at random; 14 evaluations of the dev split)."), "added_later": True})


def channels_to_keep(keep_width: float, hidden: int) -> int:
    """The hidden channels ``keep_width`` keeps of a model ``hidden`` wide: a share in (0, 1] rounded to the nearest
    multiple of :data:`CHANNEL_STEP` (at least one multiple, at most ``hidden``), or a count above 1 as it is. A bad
    value raises ValueError with the sentence to show."""
    if keep_width > 1:
        if keep_width != int(keep_width) or keep_width > hidden:
            raise ValueError(f"--keep-width {keep_width:g} is a count of channels above 1, and must be a whole number "
                             f"at most the model's hidden size, {hidden}.")
        return int(keep_width)
    if not keep_width > 0:
        raise ValueError(f"--keep-width is a share of the hidden channels in (0, 1] or a count above 1, got "
                         f"{keep_width:g}.")
    return min(hidden, max(CHANNEL_STEP, CHANNEL_STEP * round(keep_width * hidden / CHANNEL_STEP)))
