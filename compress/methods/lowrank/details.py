"""What a low-rank run records of its own (metrics.json's ``details``)."""

from __future__ import annotations

from dataclasses import dataclass

from compress.methods.lowrank.options import LowRankOptions
from compress.models.config import EncoderConfigData  # a field's type: Details.from_dict resolves it
from compress.registry import Details


@dataclass
class FactorizedMatrix:
    """One matrix: where it is, its shape, the rank kept (0: dense) and the share of its weighted energy kept."""

    kind: str          # attention or ffn
    block: int
    name: str          # query, key, value, output; intermediate, output
    out: int
    inp: int
    rank: int
    break_even: int
    energy: float


@dataclass
class LowRankDetails(Details):
    """The options as resolved, every matrix's rank and energy kept, the source's shape, and the parameters of
    the attention and FFN matrices (weights only) before and after."""

    options: LowRankOptions
    matrices: list[FactorizedMatrix]
    source_config: EncoderConfigData
    matrix_params_before: int
    matrix_params_after: int
    embedding_params_before: int
    embedding_params_after: int

    @property
    def kept(self) -> float:
        return self.matrix_params_after / self.matrix_params_before
