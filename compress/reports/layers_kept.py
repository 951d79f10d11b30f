"""What structural pruning kept, layer by layer, as table cells with bars: the run report and the comparison draw
them (and a comparison written before [R3 2/4], whose rows carry ``layers``, is rendered with them)."""

from __future__ import annotations

from typing import TypedDict


class LayerRow(TypedDict):
    """One layer of a pruned model's source (compress.methods.prune.layers.layers_kept): ``layer`` (1-based), the
    heads and FFN neurons kept there and those the source had, and whether the layer is gone."""

    layer: int
    heads: int
    heads_of: int
    ffn: int
    ffn_of: int
    dropped: bool


def bar(kept: int, total: int, width: int = 12) -> str:
    """``kept`` of ``total`` as a bar of ``width`` characters: ███████░░░░░."""
    filled = round(width * kept / total) if total else 0
    return "█" * filled + "░" * (width - filled)


def layer_cells(row: LayerRow) -> list[str]:
    """A row of :func:`layers_kept` as table cells: heads kept, their bar, neurons kept, their bar."""
    return [f"{row['heads']} / {row['heads_of']}", bar(row["heads"], row["heads_of"]),
            f"{row['ffn']} / {row['ffn_of']}", bar(row["ffn"], row["ffn_of"])]
