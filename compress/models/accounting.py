"""Parameter accounting by component and analytic FLOPs, so the papers' arithmetic is visible.

Parameters are counted from the real module (built on the ``meta`` device when only a config is
given, so even ALBERT-xxlarge costs no memory); every parameter belongs to exactly one component
and the components add up to ``sum(p.numel() for p in model.parameters())``.

FLOPs count the matrix multiplications of one forward pass over one sequence of ``n`` tokens, two
FLOPs per multiply-add (layer norms, softmax, activations and the embedding lookup are left out:
together they are a few percent):

    E->H projection          2 n E H                       (only when E != H)
    per layer, L times:      2 n H (3H)   q, k, v
                             2 n n H      scores q.k
                             2 n n H      probabilities . v
                             2 n H H      attention output
                             2 n H F * 2  feed-forward in and out
    pooler + classifier      2 H H + 2 H C                 (first token only)

Sharing blocks across layers changes none of these terms: a shared block still runs L times.
Pruning does: a layer whose attention keeps h of the heads (head size d) and whose FFN keeps F'
neurons counts 2 n H (3 h d) + 2 n n h d * 2 + 2 n h d H for attention and 2 n H F' * 2 for the FFN.
Low-rank factorization does too: a matrix in -> out held as two factors of rank r counts 2 n r (in + out)
instead of 2 n in out, and a factorized token embedding adds 2 n r E (the lookup is free). Relaxed sharing adds
each layer's rank-r delta, 2 n r (in + out) per shared matrix, or 2 r in out where the encoder merges it into
the matrix first (over more than in out / (in + out) tokens: :func:`compress.models.encoder.merges`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from torch import nn

from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder, merges, shapes_only

# Display order and meaning of the components.
COMPONENTS: dict[str, str] = {
    "token_embeddings": "token embeddings (V x E)",
    "embedding_projection": "E -> H projection",
    "position_embeddings": "position embeddings (P x E)",
    "token_type_embeddings": "token-type embeddings (T x E)",
    "attention": "attention q, k, v, output",
    "ffn": "feed-forward in and out",
    "layer_norms": "layer norms",
    "pooler": "pooler (H x H)",
    "classifier": "classifier (H x C)",
}

# The backbone is what transformers' BertModel / AlbertModel hold: embeddings, encoder, pooler.
BACKBONE = tuple(c for c in COMPONENTS if c != "classifier")


def component_of(parameter_name: str) -> str:
    """The component a parameter of :class:`Encoder` belongs to."""
    parts = parameter_name.split(".")
    if "layer_norm" in parts:
        return "layer_norms"
    head = parts[0]
    if head == "embeddings":
        return {
            "word_embeddings": "token_embeddings",
            "projection": "embedding_projection",
            "position_embeddings": "position_embeddings",
            "token_type_embeddings": "token_type_embeddings",
        }[parts[1]]
    if head in ("attention", "ffn", "pooler", "classifier"):
        return head
    if head in ("attention_deltas", "ffn_deltas"):   # a relaxed layer's own part of a shared block
        return head.removesuffix("_deltas")
    raise KeyError(f"parameter {parameter_name!r} belongs to no known component.")


@dataclass(frozen=True)
class ParamCount:
    """Parameters of a model, by component."""

    by_component: dict[str, int]

    @property
    def total(self) -> int:
        """Every parameter, classifier included."""
        return sum(self.by_component.values())

    @property
    def backbone(self) -> int:
        """Embeddings + encoder + pooler: what transformers' BertModel / AlbertModel count."""
        return sum(self.by_component[c] for c in BACKBONE)

    @property
    def classifier(self) -> int:
        return self.by_component["classifier"]


@lru_cache(maxsize=512)
def meta_encoder(config: EncoderConfig) -> Encoder:
    """An encoder of shape ``config`` on the meta device, shapes only (no memory, no initialisers); kept for the
    next call with the same shape (a search counts thousands): read it, never change it."""
    with shapes_only():
        return Encoder(config)


def count_parameters(model_or_config: nn.Module | EncoderConfig) -> ParamCount:
    """Count parameters by component; a config is built on the meta device (no memory used)."""
    if isinstance(model_or_config, EncoderConfig):
        model: nn.Module = meta_encoder(model_or_config)
    else:
        model = model_or_config
    counts = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():  # shared modules are listed once
        counts[component_of(name)] += p.numel()
    return ParamCount(counts)


def _matrix(n: int, inp: int, out: int, rank: int) -> int:
    """2 n in out for a dense matrix over n tokens; 2 n r (in + out) for its two rank-r factors."""
    return 2 * n * (rank * (inp + out) if rank else inp * out)


def _delta(n: int, inp: int, out: int, rank: int) -> int:
    """A relaxed layer's rank-r delta on a shared matrix in -> out over n tokens, as the encoder runs it."""
    return 2 * rank * inp * out if merges(n, inp, out) else _matrix(n, inp, out, rank)


def flops_per_sequence(config: EncoderConfig, seq_len: int) -> int:
    """Analytic FLOPs (2 per multiply-add) of one forward pass over one sequence of ``seq_len`` tokens."""
    if seq_len <= 0:
        raise ValueError(f"seq_len must be a positive integer, got {seq_len!r}.")
    n, e, h = seq_len, config.embedding_size, config.hidden_size
    projection = 2 * n * e * h if config.factorized else 0
    words = 2 * n * config.word_rank * e   # a factorized token embedding: a lookup, then r -> E
    layers = 0
    for layer in range(config.num_layers):
        a, b = config.attention_block_of(layer), config.ffn_block_of(layer)
        inner = config.heads_of(a) * config.head_size   # h d (= H unpruned)
        f = config.ffn_size_of(b)
        q, k, v, o = config.attention_ranks_of(a)
        up, down = config.ffn_ranks_of(b)
        if inner:
            layers += sum(_matrix(n, h, inner, r) for r in (q, k, v)) + 2 * n * n * inner * 2 + _matrix(n, inner, h, o)
        if f:
            layers += _matrix(n, h, f, up) + _matrix(n, f, h, down)
        delta = config.delta_rank
        if delta and config.shares_attention:
            layers += 4 * _delta(n, h, h, delta)
        if delta and config.shares_ffn:
            layers += _delta(n, h, f, delta) + _delta(n, f, h, delta)
    head = 2 * h * h + 2 * h * config.num_labels
    return projection + words + layers + head


def size_bytes(count: ParamCount, bytes_per_param: float = 4.0) -> int:
    """Bytes the parameters take at ``bytes_per_param`` (4 for fp32, 2 for bf16/fp16)."""
    return int(count.total * bytes_per_param)
