"""Choosing what to keep from importance scores: heads and neurons ranked globally or per block,
layers dropped from the top (Sajjad et al.) or by importance."""

from __future__ import annotations

from dataclasses import dataclass

from compress.models.config import EncoderConfig
from compress.prune.importance import Importance
from compress.prune.structure import Keep, block_sources

RANKINGS = ("global", "layer")
LAYER_ORDERS = ("top", "importance")


@dataclass(frozen=True)
class Amount:
    """How much one pruning step keeps, as fractions of what the model it cuts holds."""

    heads: float = 1.0
    neurons: float = 1.0
    drop_layers: int = 0
    ranking: str = "global"
    layer_order: str = "top"
    channels: int | None = None   # hidden channels to keep (None: the width stays)


def dropped_layers(config: EncoderConfig, importance: Importance, amount: Amount) -> list[int]:
    """The layers to drop: the top ``drop_layers``, or those whose removal raises the loss least."""
    if amount.layer_order == "top":
        return list(range(config.num_layers - amount.drop_layers, config.num_layers))
    order = sorted(range(config.num_layers), key=lambda layer: importance.layers[layer])
    return sorted(order[:amount.drop_layers])


def _keep_top(scores: list[list[float]], blocks: list[int], fraction: float,
              ranking: str) -> dict[int, tuple[int, ...]]:
    """For each of ``blocks``, the indices with the highest scores: ``fraction`` of each block
    (``layer``), or of all of them together (``global``). Ties go to the lower index."""
    if ranking == "layer":
        kept = {}
        for b in blocks:
            count = round(fraction * len(scores[b]))
            order = sorted(range(len(scores[b])), key=lambda i: (-scores[b][i], i))
            kept[b] = tuple(sorted(order[:count]))
        return kept
    everything = [(b, i) for b in blocks for i in range(len(scores[b]))]
    count = round(fraction * len(everything))
    best = sorted(everything, key=lambda bi: (-scores[bi[0]][bi[1]], bi))[:count]
    return {b: tuple(sorted(i for bb, i in best if bb == b)) for b in blocks}


def choose(config: EncoderConfig, importance: Importance, amount: Amount) -> Keep:
    """What to keep of ``config``'s model: layers first, then heads and neurons among the blocks left."""
    dropped = set(dropped_layers(config, importance, amount))
    layers = tuple(i for i in range(config.num_layers) if i not in dropped)
    heads = _keep_top(importance.heads, sorted(set(block_sources(config, layers, "attention"))), amount.heads,
                      amount.ranking)
    neurons = _keep_top(importance.neurons, sorted(set(block_sources(config, layers, "ffn"))), amount.neurons,
                        amount.ranking)
    return Keep(heads=tuple(heads.get(b, ()) for b in range(config.num_attention_blocks)),
                neurons=tuple(neurons.get(b, ()) for b in range(config.num_ffn_blocks)),
                layers=layers, channels=kept_channels(importance, amount.channels))


def kept_channels(importance: Importance, count: int | None) -> tuple[int, ...] | None:
    """The ``count`` hidden channels with the highest scores (ties to the lower index), ascending; None where the
    width stays (``count`` None or every channel)."""
    scores = importance.channels
    if count is None:
        return None
    if scores is None:
        raise ValueError("these importance scores hold no channel scores to cut the width by.")
    if count >= len(scores):
        return None
    return tuple(sorted(sorted(range(len(scores)), key=lambda c: (-scores[c], c))[:count]))
