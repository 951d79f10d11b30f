"""What structural pruning kept, layer by layer: the rows the run report and the comparison both draw."""

from __future__ import annotations

from typing import Any

from compress.models.config import EncoderConfig


def layers_kept(pruning: dict[str, Any], student_config: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per layer of the pruned model's source, in its order: ``layer`` (1-based), ``heads`` and
    ``ffn`` kept, ``heads_of`` and ``ffn_of`` the source had there, ``dropped`` when the layer is gone.

    ``pruning`` is a prune run's record (``layers_kept``, ``source_config``); ``student_config`` the
    pruned model's configuration.
    """
    before = EncoderConfig.from_dict(pruning["source_config"])
    after = EncoderConfig.from_dict(student_config)
    new_of = {old: new for new, old in enumerate(pruning["layers_kept"])}
    rows = []
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


def bar(kept: int, total: int, width: int = 12) -> str:
    """``kept`` of ``total`` as a bar of ``width`` characters: ███████░░░░░."""
    filled = round(width * kept / total) if total else 0
    return "█" * filled + "░" * (width - filled)


def layer_cells(row: dict[str, Any]) -> list[str]:
    """A row of :func:`layers_kept` as table cells: heads kept, their bar, neurons kept, their bar."""
    return [f"{row['heads']} / {row['heads_of']}", bar(row["heads"], row["heads_of"]),
            f"{row['ffn']} / {row['ffn_of']}", bar(row["ffn"], row["ffn_of"])]
