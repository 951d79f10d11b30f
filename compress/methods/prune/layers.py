"""What structural pruning kept, layer by layer: the rows of the run report's table and the comparison's section."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.methods.prune.details import PruneDetails
from compress.models.config import EncoderConfig, EncoderConfigData

if TYPE_CHECKING:
    from compress.reports.layers_kept import LayerRow


def layers_kept(pruning: PruneDetails, student_config: EncoderConfigData) -> list[LayerRow]:
    """One row per layer of the pruned model's source, in its order: ``layer`` (1-based), ``heads`` and
    ``ffn`` kept, ``heads_of`` and ``ffn_of`` the source had there, ``dropped`` when the layer is gone.

    ``pruning`` is a prune run's details; ``student_config`` the pruned model's configuration.
    """
    before = EncoderConfig.from_dict(pruning.source_config)
    after = EncoderConfig.from_dict(student_config)
    new_of = {old: new for new, old in enumerate(pruning.layers_kept)}
    rows: list[LayerRow] = []
    for old in range(before.num_layers):
        new = new_of.get(old)
        rows.append({
            "layer": old + 1,
            "heads": 0 if new is None else after.heads_of(after.attention_block_of(new)),
            "heads_of": before.heads_of(before.attention_block_of(old)),
            "ffn": 0 if new is None else after.ffn_size_of(after.ffn_block_of(new)),
            "ffn_of": before.ffn_size_of(before.ffn_block_of(old)),
            "dropped": new is None,
        })
    return rows
