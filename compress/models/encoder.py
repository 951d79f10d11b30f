"""One transformer encoder whose knobs express BERT, DistilBERT-, TinyBERT- and ALBERT-shaped models.

Layout of the parameters (the names are the ones :mod:`compress.models.accounting` groups):

    embeddings.word_embeddings        V x E     token embeddings
    embeddings.position_embeddings    P x E
    embeddings.token_type_embeddings  T x E
    embeddings.layer_norm             over E
    embeddings.projection             E -> H    only when E != H (ALBERT's factorization)
    attention.{b}                     q, k, v, output (H -> H each) + layer norm; one block per
                                      layer, or one per group when attention is shared
    ffn.{b}                           intermediate (H -> F), output (F -> H) + layer norm; one block
                                      per layer, or one per group when the FFN is shared
    pooler                            H -> H, tanh, on the first token
    classifier                        H -> num_labels

Layer ``i`` runs ``attention[config.attention_block_of(i)]`` then ``ffn[config.ffn_block_of(i)]``,
so sharing changes how many blocks exist, never how many are run: it cuts parameters, not FLOPs.

A factorized model (``config.attention_ranks``, ``config.ffn_ranks``, ``config.word_rank``) holds a matrix
as two, :class:`LowRankLinear` (``down`` in -> r, then ``up`` r -> out, with the bias), where its rank is not 0;
the token embedding as V x r then r -> E. Its parameters, bytes and FLOPs follow the ranks.

A relaxed shared model (``config.delta_rank``, ``config.own_norms``; Bae et al. 2025) keeps its shared blocks and
gives every layer that runs one its own :class:`LayerDelta` (``attention_deltas.{l}``, ``ffn_deltas.{l}``): a rank-r
delta ``up @ down`` added to each shared matrix (W' + B_l A_l, ``up`` starting at zero as LoRA's B does), and with
own norms an offset on each bias and layer-norm weight. Strict sharing is rank 0; at full rank every layer can be
any matrix again.

A pruned model is the same encoder with per-block shapes (``config.heads``, ``config.ffn_sizes``):
block ``b`` holds ``heads_of(b)`` heads of the usual head size and an FFN of width ``ffn_size_of(b)``,
so removed heads and neurons cost nothing. A block with no heads (or no FFN neurons) keeps only
its output bias and layer norm, which is exactly what the full block computes with every gate at 0.

Gates (:class:`Gates`) multiply each head's context, each FFN neuron's activation and each layer's
update by a number: ones change nothing, zeros remove the part. They exist to score importance
(the gradient of the loss with respect to a gate) and to prove that pruning removes exactly what a
zero gate switches off; a forward pass without gates runs no extra operation.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from compress.models.config import EncoderConfig


@dataclass
class EncoderOutput:
    """What a forward pass returns.

    logits            (B, num_labels)
    pooled            (B, H)            tanh(pooler(first token))
    last_hidden_state (B, n, H)
    hidden_states     L+1 tensors (B, n, H): the embedding output (after the E->H projection),
                      then each layer's output; only when requested.
    attention_scores  L tensors (B, heads, n, n): q.k/sqrt(d) + padding mask, before softmax;
                      padded key positions hold the dtype's most negative value. Only when requested.
    attention_probs   L tensors (B, heads, n, n): softmax of the scores. Only when requested.
    """

    logits: torch.Tensor
    pooled: torch.Tensor
    last_hidden_state: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attention_scores: tuple[torch.Tensor, ...] | None = None
    attention_probs: tuple[torch.Tensor, ...] | None = None


@dataclass
class Gates:
    """Multipliers on parts of the forward pass (see the module docstring); None leaves a part ungated.

    heads    one (heads_of(b),) tensor per attention block: scales each head's context vector.
    neurons  one (ffn_size_of(b),) tensor per FFN block: scales each neuron's activation.
    layers   (L,) tensor: layer i's output is x + g_i * (layer_i(x) - x), so 0 skips the layer.
    """

    heads: list[torch.Tensor] | None = None
    neurons: list[torch.Tensor] | None = None
    layers: torch.Tensor | None = None


class OutputBias(nn.Module):
    """What is left of a linear layer whose every input was pruned: its bias."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(size))


def _activation(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "gelu":
        return F.gelu(x)
    if name == "gelu_new":
        return F.gelu(x, approximate="tanh")
    return F.relu(x)


class LowRankLinear(nn.Module):
    """A linear map W (out x in) held as two factors, ``up`` (out x r, with the bias) after ``down`` (r x in):
    r (in + out) weights instead of in * out, and as many multiply-adds per token."""

    def __init__(self, in_features: int, out_features: int, rank: int) -> None:
        super().__init__()
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.down = nn.Linear(in_features, rank, bias=False)
        self.up = nn.Linear(rank, out_features)

    @property
    def bias(self) -> torch.Tensor:
        return self.up.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.down(x))


def linear(in_features: int, out_features: int, rank: int = 0) -> nn.Module:
    """A dense ``nn.Linear``, or its :class:`LowRankLinear` of rank ``rank`` when that is not 0."""
    return LowRankLinear(in_features, out_features, rank) if rank else nn.Linear(in_features, out_features)


class Offset(nn.Module):
    """One layer's own part of a shared linear map, added to its output: a rank-``rank`` delta ``up(down(x))`` and,
    with ``bias``, a bias offset."""

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool) -> None:
        super().__init__()
        self.down = nn.Linear(in_features, rank, bias=False) if rank else None
        self.up = nn.Linear(rank, out_features, bias=False) if rank else None
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.up is None:
            return self.bias
        y = self.up(self.down(x))
        return y if self.bias is None else y + self.bias


class NormOffset(nn.Module):
    """One layer's offsets on a shared layer norm's weight and bias."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(width))
        self.bias = nn.Parameter(torch.zeros(width))


class LayerDelta(nn.Module):
    """What one layer adds to the shared block it runs: an :class:`Offset` per matrix (named as the block's) and,
    with own norms, a :class:`NormOffset` for its layer norm."""

    def __init__(self, shapes: dict[str, tuple[int, int]], width: int, rank: int, own_norms: bool) -> None:
        super().__init__()
        for name, (inp, out) in shapes.items():
            self.add_module(name, Offset(inp, out, rank, own_norms))
        self.layer_norm = NormOffset(width) if own_norms else None


def merges(tokens: int, inp: int, out: int) -> bool:
    """Whether a layer runs its shared matrix and rank-r delta as one matrix W' + B_l A_l (2 r in out multiply-adds
    to form it, once per call) rather than as three products over the tokens (2 tokens r (in + out)): where the
    call has more tokens than in out / (in + out), 192 for a 384 x 384 matrix. A training batch (32 sentences)
    merges, a sentence alone does not."""
    return tokens * (inp + out) > inp * out


def _through(block: nn.Module, name: str, x: torch.Tensor, delta: LayerDelta | None) -> torch.Tensor:
    """Block matrix ``name`` applied to ``x``, plus the running layer's own part of it (merged into one matrix where
    that is fewer multiply-adds: one large product runs faster than a large and two thin ones)."""
    matrix = getattr(block, name)
    if delta is None:
        return matrix(x)
    offset = getattr(delta, name)
    tokens = x.numel() // x.shape[-1]
    if offset.up is None or type(matrix) is not nn.Linear or \
            not merges(tokens, matrix.in_features, matrix.out_features):
        return matrix(x) + offset(x)
    weight = matrix.weight + offset.up.weight @ offset.down.weight
    bias = matrix.bias if offset.bias is None else matrix.bias + offset.bias
    return F.linear(x, weight, bias)


def _norm(block: nn.Module, x: torch.Tensor, delta: LayerDelta | None) -> torch.Tensor:
    """The block's layer norm, with the running layer's offsets on its weight and bias."""
    norm = block.layer_norm
    if delta is None or delta.layer_norm is None:
        return norm(x)
    return F.layer_norm(x, norm.normalized_shape, norm.weight + delta.layer_norm.weight,
                        norm.bias + delta.layer_norm.bias, norm.eps)


class LowRankEmbedding(nn.Module):
    """A token-embedding table V x E held as V x r rows and an r -> E map (ALBERT's factorization, made after the
    fact by SVD of a trained table)."""

    def __init__(self, vocab_size: int, width: int, rank: int, padding_idx: int) -> None:
        super().__init__()
        self.rows = nn.Embedding(vocab_size, rank, padding_idx=padding_idx)
        self.up = nn.Linear(rank, width, bias=False)
        self.num_embeddings, self.embedding_dim = vocab_size, width

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.up(self.rows(ids))


class Embeddings(nn.Module):
    """Token + position + token-type embeddings of width E, layer norm, dropout, then E->H if E != H."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        e = config.embedding_size
        self.word_embeddings: nn.Module = (
            LowRankEmbedding(config.vocab_size, e, config.word_rank, config.pad_token_id) if config.word_rank
            else nn.Embedding(config.vocab_size, e, padding_idx=config.pad_token_id))
        self.position_embeddings = nn.Embedding(config.max_positions, e)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, e)
        self.layer_norm = nn.LayerNorm(e, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.projection = nn.Linear(e, config.hidden_size) if config.factorized else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)[None]
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.dropout(self.layer_norm(x))
        return self.projection(x) if self.projection is not None else x


class AttentionBlock(nn.Module):
    """Multi-head self-attention with the residual connection and post layer norm of BERT."""

    def __init__(self, config: EncoderConfig, heads: int, ranks: tuple[int, ...] = (0, 0, 0, 0)) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = heads
        self.head_size = config.head_size
        inner = heads * config.head_size
        if heads:
            self.query = linear(h, inner, ranks[0])
            self.key = linear(h, inner, ranks[1])
            self.value = linear(h, inner, ranks[2])
            self.output: nn.Module = linear(inner, h, ranks[3])
        else:
            self.output = OutputBias(h)
        self.layer_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.attention_dropout = config.attention_dropout
        self.dropout = nn.Dropout(config.hidden_dropout)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.head_size).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, explicit: bool, gate: torch.Tensor | None = None,
        delta: LayerDelta | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """x: (B, n, H); mask: additive (B, 1, 1, n) or None (no padding); gate: (heads,) or None; delta: the
        running layer's own part of this (shared) block, or None. Returns (output, scores, probs).

        ``explicit`` computes the scores and probabilities (to return them); otherwise the fused
        ``scaled_dot_product_attention`` kernel computes the same result without them.
        """
        if not self.num_heads:
            b, n, _ = x.shape
            empty = x.new_zeros(b, 0, n, n) if explicit else None
            return self.layer_norm(x + self.dropout(self.output.bias)), empty, empty
        q, k, v = (self._heads(_through(self, name, x, delta)) for name in ("query", "key", "value"))
        p = self.attention_dropout if self.training else 0.0
        scores = probs = None
        if explicit:
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_size)
            if mask is not None:
                scores = scores + mask
            probs = scores.softmax(dim=-1)
            context = F.dropout(probs, p=p, training=self.training) @ v
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        if gate is not None:
            context = context * gate[None, :, None, None]
        b, _, n, _ = context.shape
        context = context.transpose(1, 2).reshape(b, n, self.num_heads * self.head_size)
        return _norm(self, x + self.dropout(_through(self, "output", context, delta)), delta), scores, probs


class FeedForwardBlock(nn.Module):
    """H -> F -> H with activation, residual connection and post layer norm."""

    def __init__(self, config: EncoderConfig, width: int, ranks: tuple[int, ...] = (0, 0)) -> None:
        super().__init__()
        self.width = width
        if width:
            self.intermediate = linear(config.hidden_size, width, ranks[0])
            self.output: nn.Module = linear(width, config.hidden_size, ranks[1])
        else:
            self.output = OutputBias(config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.activation = config.activation

    def forward(self, x: torch.Tensor, gate: torch.Tensor | None = None, delta: LayerDelta | None = None
                ) -> torch.Tensor:
        """x: (B, n, H); gate: (width,) or None; delta: the running layer's own part of this block, or None."""
        if not self.width:
            return self.layer_norm(x + self.dropout(self.output.bias))
        a = _activation(self.activation, _through(self, "intermediate", x, delta))
        y = _through(self, "output", a if gate is None else a * gate, delta)
        return _norm(self, x + self.dropout(y), delta)


def _padding_free(attention_mask: torch.Tensor) -> bool:
    """True when no position is padding and the model is not being traced.

    ``scaled_dot_product_attention`` given a mask runs its general kernel; given none, the fused
    flash-attention kernel, as ``transformers`` does. With the mask always given, the minilm teacher ran
    at 0.84x of transformers' speed at batch 32 (2 threads, AVX2); without it, at 0.99-1.02x
    (``benchmarks/encoder.py``). A traced graph (the ONNX export) keeps the mask: its later inputs may
    be padded.
    """
    if torch.jit.is_tracing() or torch.compiler.is_compiling():
        return False
    return bool(attention_mask.all())


_INITIALISERS = ("normal_", "uniform_", "zeros_", "ones_", "constant_", "kaiming_uniform_", "trunc_normal_")


@contextmanager
def shapes_only() -> Iterator[None]:
    """Build modules on the meta device without running their weight initialisers: shapes, no memory. torch runs
    ``normal_`` on meta tensors through Python decompositions whose first call imports torch._dynamo (2-3 s)."""
    saved = {name: getattr(nn.init, name) for name in _INITIALISERS}
    try:
        for name in _INITIALISERS:
            setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
        with torch.device("meta"):
            yield
    finally:
        for name, initialiser in saved.items():
            setattr(nn.init, name, initialiser)


class Encoder(nn.Module):
    """The encoder with BERT's sequence-classification head (pooler + classifier)."""

    @classmethod
    def holding(cls, config: EncoderConfig, state: Mapping[str, torch.Tensor], device: torch.device | str = "cpu",
                dtype: torch.dtype = torch.float32) -> Encoder:
        """An encoder of ``config`` with every weight copied from ``state`` (strictly: each has a place, each place
        a weight), on ``device`` in ``dtype``. Built from shapes, not from random weights the copy would replace:
        drawing them was most of the time a load took (a BERT vocabulary's table alone is 10 million numbers)."""
        with shapes_only():
            model = cls(config)
        model = model.to_empty(device=device).to(dtype)
        model.load_state_dict(state)
        return model

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.attention = nn.ModuleList(AttentionBlock(config, config.heads_of(b), config.attention_ranks_of(b))
                                       for b in range(config.num_attention_blocks))
        self.ffn = nn.ModuleList(FeedForwardBlock(config, config.ffn_size_of(b), config.ffn_ranks_of(b))
                                 for b in range(config.num_ffn_blocks))
        h, f, rank, norms = config.hidden_size, config.ffn_size, config.delta_rank, config.own_norms
        attention = {"query": (h, h), "key": (h, h), "value": (h, h), "output": (h, h)}
        self.attention_deltas = nn.ModuleList(LayerDelta(attention, h, rank, norms) for _ in range(config.num_layers)
                                              ) if config.relaxed and config.shares_attention else None
        ffn = {"intermediate": (h, f), "output": (f, h)}
        self.ffn_deltas = nn.ModuleList(LayerDelta(ffn, h, rank, norms) for _ in range(config.num_layers)
                                        ) if config.relaxed and config.shares_ffn else None
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.classifier_dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:   # a low-rank factor's ``down`` has none
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, Offset) and module.up is not None:
            nn.init.zeros_(module.up.weight)   # after its factors (apply visits children first): a zero delta

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        gates: Gates | None = None,
    ) -> EncoderOutput:
        """input_ids, attention_mask (1 = token, 0 = padding), token_type_ids: (B, n) integer tensors;
        ``gates`` scale heads, FFN neurons and layers (importance scoring)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        # Additive mask: 0 where a key may be attended, the most negative value where it is padding;
        # None where nothing is padding, so the attention kernel runs unmasked (see _padding_free).
        mask = None if _padding_free(attention_mask) else \
            (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min

        hidden = [x] if output_hidden_states else None
        scores: list[torch.Tensor] = []
        probs: list[torch.Tensor] = []
        config = self.config
        for layer in range(config.num_layers):
            a, f = config.attention_block_of(layer), config.ffn_block_of(layer)
            head_gate = gates.heads[a] if gates is not None and gates.heads is not None else None
            neuron_gate = gates.neurons[f] if gates is not None and gates.neurons is not None else None
            attention_delta = self.attention_deltas[layer] if self.attention_deltas is not None else None
            ffn_delta = self.ffn_deltas[layer] if self.ffn_deltas is not None else None
            before = x
            x, s, p = self.attention[a](x, mask, output_attentions, head_gate, attention_delta)
            x = self.ffn[f](x, neuron_gate, ffn_delta)
            if gates is not None and gates.layers is not None:
                x = before + gates.layers[layer] * (x - before)
            if hidden is not None:
                hidden.append(x)
            if output_attentions:
                scores.append(s)
                probs.append(p)

        pooled = torch.tanh(self.pooler(x[:, 0]))
        logits = self.classifier(self.classifier_dropout(pooled))
        return EncoderOutput(
            logits=logits,
            pooled=pooled,
            last_hidden_state=x,
            hidden_states=tuple(hidden) if hidden is not None else None,
            attention_scores=tuple(scores) if output_attentions else None,
            attention_probs=tuple(probs) if output_attentions else None,
        )
