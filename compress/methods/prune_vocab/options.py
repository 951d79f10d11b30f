"""Vocabulary pruning's options (their fields become ``compress run`` flags)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class VocabOptions:
    vocab_from: str = field(default="train", metadata={
        "help": "the text whose tokens are kept: train (the training split: honest, test words may split "
                "differently) or all (every split: what a closed corpus allows)."})
