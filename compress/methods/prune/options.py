"""Structured pruning's options (their fields become ``compress run`` flags), importable without torch."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PruneOptions:
    keep_heads: float = field(default=0.5, metadata={
        "help": "share of the attention heads to keep, in (0, 1] (default 0.5).", "search": (0.75, 0.5, 0.25)})
    keep_ffn: float = field(default=0.5, metadata={
        "help": "share of the FFN neurons to keep, in (0, 1] (default 0.5).", "search": (0.75, 0.5, 0.25)})
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
