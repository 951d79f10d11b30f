"""What a structural-pruning run records of its own (metrics.json's ``details``; schema 3's ``pruning`` block)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compress.methods.prune.options import PruneOptions
from compress.models.config import EncoderConfigData  # a field's type: Details.from_dict resolves it
from compress.prune.curve import HeadCurve, WidthCurve
from compress.registry import Details


@dataclass
class PruneStep:
    """One cut: what it kept (indices into the model it cut), the parameters left, the examples scored."""

    step: int
    kept: dict[str, list[Any]]    # compress.prune.structure.Keep as lists: heads, neurons (per block), layers
    params: int
    examples: int


@dataclass
class PruneDetails(Details):
    """The options as resolved, every step's cut, the source's shape, the source layers kept (0-based), and
    the head-importance curve (None with --no-head-curve) and the width curve (None where the width stays or with
    --no-width-curve)."""

    options: PruneOptions
    steps: list[PruneStep]
    source_config: EncoderConfigData
    layers_kept: list[int]
    head_curve: HeadCurve | None = None
    width_curve: WidthCurve | None = None
