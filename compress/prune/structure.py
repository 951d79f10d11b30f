"""Structural removal: a smaller dense encoder holding only the heads, FFN neurons and layers kept.

transformers 5 removed ``prune_heads``, so the weights are sliced here. With head size d, head j of
an attention block owns rows ``j*d .. (j+1)*d`` of the query, key and value matrices (and of their
biases) and the same columns of the output matrix; FFN neuron i owns row i of the intermediate
matrix (and bias i) and column i of the output matrix. Keeping a subset copies exactly those rows
and columns, so the pruned model computes what the full model computes with the removed parts'
gates at zero (:class:`compress.models.encoder.Gates`), and costs only what it keeps.

Sharing composes: indices are per *block*, so pruning a shared block prunes it for every layer
that runs it. Dropping layers removes the blocks only those layers ran.

Cutting the width (Minitron's embedding channels, CoFi's hidden dimensions) keeps some channels of the residual stream, the hidden size every
layer reads and writes: every tensor with a side of H keeps that side's kept entries (:data:`_WIDTH_SIDES`) and the
heads keep their width, which no longer derives from H (``EncoderConfig.head_width``). Unlike a head or a neuron, a
channel is not removed exactly: each layer norm's mean and variance now run over the channels kept, so a width cut
changes what the model computes a little even where the removed channels carry little, and recovery distils it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder, Gates


@dataclass(frozen=True)
class Keep:
    """What a pruned model keeps, as indices into the model it is cut from.

    heads     per attention block, the head indices kept (ascending).
    neurons   per FFN block, the neuron indices kept (ascending).
    layers    the layer indices kept (ascending).
    channels  the channels of the hidden size kept (ascending); None keeps the width.
    """

    heads: tuple[tuple[int, ...], ...]
    neurons: tuple[tuple[int, ...], ...]
    layers: tuple[int, ...]
    channels: tuple[int, ...] | None = None

    @classmethod
    def everything(cls, config: EncoderConfig) -> Keep:
        return cls(
            heads=tuple(tuple(range(config.heads_of(b))) for b in range(config.num_attention_blocks)),
            neurons=tuple(tuple(range(config.ffn_size_of(b))) for b in range(config.num_ffn_blocks)),
            layers=tuple(range(config.num_layers)),
        )

    def check(self, config: EncoderConfig) -> None:
        """ValueError when these indices do not fit ``config``."""
        if len(self.heads) != config.num_attention_blocks or len(self.neurons) != config.num_ffn_blocks:
            raise ValueError("keep needs one entry per attention block and per FFN block.")
        for what, kept, size in [*(("heads", k, config.heads_of(b)) for b, k in enumerate(self.heads)),
                                 *(("neurons", k, config.ffn_size_of(b)) for b, k in enumerate(self.neurons)),
                                 ("layers", self.layers, config.num_layers)]:
            if list(kept) != sorted(set(kept)) or any(not 0 <= i < size for i in kept):
                raise ValueError(f"kept {what} must be distinct ascending indices below {size}, got {list(kept)}.")
        if not self.layers:
            raise ValueError("at least one layer must remain.")
        if self.channels is not None:
            channels = list(self.channels)
            if not channels or channels != sorted(set(channels)) or not 0 <= channels[0] <= channels[-1] < \
                    config.hidden_size:
                raise ValueError(f"kept channels must be distinct ascending indices below {config.hidden_size}, "
                                 "at least one.")
            if config.factorized and len(channels) <= config.embedding_size:
                raise ValueError(f"a factorized embedding of width {config.embedding_size} feeds the hidden size "
                                 f"through a projection, so the width must stay above it (not {len(channels)}).")
            if config.relaxed:
                raise ValueError("the width of a relaxed ALBERT cannot be cut (its deltas span the full width).")
        if len(self.layers) < config.num_layers and config.sharing != "none" and config.groups > 1:
            raise ValueError("layers cannot be dropped from a model that shares blocks in several groups.")


def _shared(config: EncoderConfig, part: str) -> bool:
    return config.sharing in ("all", part)


def block_sources(config: EncoderConfig, layers: tuple[int, ...], part: str) -> list[int]:
    """For each block of the pruned model, the block of ``config``'s model it is cut from."""
    if len(layers) == config.num_layers or _shared(config, part):
        return list(range(config.num_attention_blocks if part == "attention" else config.num_ffn_blocks))
    block_of = config.attention_block_of if part == "attention" else config.ffn_block_of
    return [block_of(layer) for layer in layers]


def pruned_config(config: EncoderConfig, keep: Keep) -> EncoderConfig:
    """The shape of ``config``'s model after keeping only ``keep``."""
    keep.check(config)
    attention = block_sources(config, keep.layers, "attention")
    ffn = block_sources(config, keep.layers, "ffn")
    heads = tuple(len(keep.heads[b]) for b in attention)
    widths = tuple(len(keep.neurons[b]) for b in ffn)
    dropped = len(keep.layers) < config.num_layers
    hidden = config.hidden_size if keep.channels is None else len(keep.channels)
    tied = hidden % config.num_heads == 0 and hidden // config.num_heads == config.head_size
    return config.replace(
        num_layers=len(keep.layers),
        groups=1 if dropped else config.groups,
        heads=None if all(h == config.num_heads for h in heads) else heads,
        ffn_sizes=None if all(w == config.ffn_size for w in widths) else widths,
        hidden_size=hidden,
        embedding_size=config.embedding_size if config.factorized else hidden,
        head_width=0 if tied else config.head_size,
    )


def _rows(kept: tuple[int, ...], size: int) -> torch.Tensor:
    """The rows of a (heads * size)-row matrix that the kept heads own."""
    return torch.tensor([j * size + i for j in kept for i in range(size)], dtype=torch.long)


def prune_model(model: Encoder, keep: Keep) -> Encoder:
    """A new encoder holding only what ``keep`` names, weights copied from ``model`` (left untouched)."""
    config = model.config
    new_config = pruned_config(config, keep)
    source = {k: v.detach() for k, v in model.state_dict().items()}
    state = {k: v.clone() for k, v in source.items() if not k.startswith(("attention.", "ffn."))}
    for new, old in enumerate(block_sources(config, keep.layers, "attention")):
        src, dst = f"attention.{old}.", f"attention.{new}."
        rows = _rows(keep.heads[old], config.head_size)
        for name in ("query", "key", "value"):
            if len(rows):
                state[f"{dst}{name}.weight"] = source[f"{src}{name}.weight"][rows].clone()
                state[f"{dst}{name}.bias"] = source[f"{src}{name}.bias"][rows].clone()
        if len(rows):
            state[f"{dst}output.weight"] = source[f"{src}output.weight"][:, rows].clone()
        for name in ("output.bias", "layer_norm.weight", "layer_norm.bias"):
            state[dst + name] = source[src + name].clone()
    for new, old in enumerate(block_sources(config, keep.layers, "ffn")):
        src, dst = f"ffn.{old}.", f"ffn.{new}."
        idx = torch.tensor(keep.neurons[old], dtype=torch.long)
        if len(idx):
            state[f"{dst}intermediate.weight"] = source[f"{src}intermediate.weight"][idx].clone()
            state[f"{dst}intermediate.bias"] = source[f"{src}intermediate.bias"][idx].clone()
            state[f"{dst}output.weight"] = source[f"{src}output.weight"][:, idx].clone()
        for name in ("output.bias", "layer_norm.weight", "layer_norm.bias"):
            state[dst + name] = source[src + name].clone()
    if keep.channels is not None:
        state = _cut_width(state, torch.tensor(keep.channels, dtype=torch.long), config.factorized)
    return Encoder.holding(new_config, state, next(model.parameters()).device).train(model.training)


# Which sides of each tensor run along the hidden size H: (name pattern, dimensions). Inputs of the maps that read
# the residual stream (a low-rank map reads it through ``down``), outputs and biases of those that write it (through
# ``up``), every layer norm, the pooler both ways, the classifier's input; the embeddings where they are H wide
# (unfactorized; else the projection's output is).
_WIDTH_SIDES: tuple[tuple[str, tuple[int, ...]], ...] = (
    (r"(attention\.\d+\.(query|key|value)|ffn\.\d+\.intermediate)(\.down)?\.weight", (1,)),
    (r"(attention|ffn)\.\d+\.output(\.up)?\.(weight|bias)", (0,)),
    (r"(attention|ffn)\.\d+\.layer_norm\.(weight|bias)", (0,)),
    (r"pooler\.weight", (0, 1)),
    (r"pooler\.bias", (0,)),
    (r"classifier\.weight", (1,)),
)
_EMBEDDING_SIDES: tuple[tuple[str, tuple[int, ...]], ...] = (
    (r"embeddings\.(word_embeddings|position_embeddings|token_type_embeddings)\.weight", (1,)),
    (r"embeddings\.word_embeddings\.up\.weight", (0,)),
    (r"embeddings\.layer_norm\.(weight|bias)", (0,)),
)
_PROJECTION_SIDES: tuple[tuple[str, tuple[int, ...]], ...] = ((r"embeddings\.projection\.(weight|bias)", (0,)),)


def _cut_width(state: dict[str, torch.Tensor], channels: torch.Tensor, factorized: bool) -> dict[str, torch.Tensor]:
    """``state`` with only ``channels`` kept along every side that runs along the hidden size."""
    sides = _WIDTH_SIDES + (_PROJECTION_SIDES if factorized else _EMBEDDING_SIDES)
    cut = {}
    for name, tensor in state.items():
        dims = next((d for pattern, d in sides if re.fullmatch(pattern, name)), ())
        for dim in dims:
            tensor = tensor.index_select(dim, channels)
        cut[name] = tensor.clone() if dims else tensor
    return cut


def gates_for(config: EncoderConfig, keep: Keep) -> Gates:
    """Gates on ``config``'s model that are 1 on what ``keep`` keeps and 0 on the rest."""
    keep.check(config)

    def mask(size: int, kept: tuple[int, ...]) -> torch.Tensor:
        g = torch.zeros(size)
        g[list(kept)] = 1.0
        return g

    return Gates(
        heads=[mask(config.heads_of(b), k) for b, k in enumerate(keep.heads)],
        neurons=[mask(config.ffn_size_of(b), k) for b, k in enumerate(keep.neurons)],
        layers=mask(config.num_layers, keep.layers),
    )
