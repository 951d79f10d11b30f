"""The one configuration that describes every BERT-, DistilBERT-, TinyBERT- and ALBERT-shaped encoder."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

SHARING_MODES: tuple[str, ...] = ("none", "all", "attention", "ffn")
ACTIVATIONS: tuple[str, ...] = ("gelu", "gelu_new", "relu")
# What every encoder takes, by name (the model, its ONNX export and the speed inputs all use these).
INPUT_NAMES: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")


# Fields written to JSON only when set, so a model without them (and every cache key and checkpoint made from
# it) reads as it did before they existed.
_OMITTED_WHEN_UNSET = {"attention_ranks": None, "ffn_ranks": None, "word_rank": 0, "delta_rank": 0,
                       "own_norms": False, "head_width": 0}


class EncoderConfigData(TypedDict, total=False):
    """:meth:`EncoderConfig.to_dict`: every field as a JSON value (a tuple is a list once read back); the low-rank
    and relaxed-sharing fields only when set. What records keep of a model's shape (a run's student, a transform's
    source)."""

    vocab_size: int
    embedding_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    ffn_size: int
    max_positions: int
    type_vocab_size: int
    sharing: str
    groups: int
    hidden_dropout: float
    attention_dropout: float
    classifier_dropout: float
    layer_norm_eps: float
    activation: str
    initializer_range: float
    num_labels: int
    pad_token_id: int
    heads: Sequence[int] | None
    ffn_sizes: Sequence[int] | None
    attention_ranks: Sequence[Sequence[int]] | None
    ffn_ranks: Sequence[Sequence[int]] | None
    word_rank: int
    delta_rank: int
    own_norms: bool
    head_width: int


@dataclass(frozen=True)
class EncoderConfig:
    """Shape knobs of the encoder; validated when constructed.

    vocab_size         V, rows of the token-embedding matrix.
    embedding_size     E, width of the embeddings. E == H means no factorization; E < H adds
                       an E->H projection (ALBERT's factorized embedding: V*E + E*H instead of V*H).
    hidden_size        H.
    num_layers         L, the depth of the forward pass (sharing never changes it).
    num_heads          attention heads; H must be divisible by it.
    ffn_size           inner size of the feed-forward block.
    sharing            which blocks are shared across layers: ``none``, ``all``, ``attention``, ``ffn``.
    groups             G: layers split into G contiguous groups, sharing applies inside a group
                       (ALBERT's ``num_hidden_groups``). L must be divisible by G.
    num_labels         classes of the sequence-classification head (pooler + classifier).
    heads              after pruning: the heads each attention block keeps (one entry per block, in
                       0..num_heads; the head size H / num_heads is unchanged; 0 leaves only the
                       block's output bias and layer norm). None: num_heads in every block.
    ffn_sizes          after pruning: the inner width of each feed-forward block (0 allowed likewise).
                       None: ffn_size in every block.
    attention_ranks    after low-rank factorization: per attention block, the rank of its query, key, value
                       and output matrices (0: that matrix is dense). None: every matrix dense.
    ffn_ranks          likewise per feed-forward block, for its intermediate and output matrices.
    word_rank          after factorizing the token embedding: V x r then r -> E (0: one V x E table).
    delta_rank         relaxed sharing: every layer that runs a shared block adds its own rank-r delta B_l A_l to
                       each of the block's matrices (W' + B_l A_l; 0: strict sharing). At most min(out, in) of
                       the smallest shared matrix, where B_l A_l can be any matrix.
    own_norms          relaxed sharing: every such layer also adds its own offsets to the block's biases and
                       layer-norm weights (a few thousand parameters per layer).
    head_width         after cutting the hidden size (width pruning): each head's width, which no longer derives from
                       H (0: H / num_heads, BERT's tie; transformers cannot hold another).
    """

    vocab_size: int = 30522
    embedding_size: int = 768
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ffn_size: int = 3072
    max_positions: int = 512
    type_vocab_size: int = 2
    sharing: str = "none"
    groups: int = 1
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    classifier_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    initializer_range: float = 0.02
    num_labels: int = 2
    pad_token_id: int = 0
    heads: tuple[int, ...] | None = None
    ffn_sizes: tuple[int, ...] | None = None
    attention_ranks: tuple[tuple[int, ...], ...] | None = None
    ffn_ranks: tuple[tuple[int, ...], ...] | None = None
    word_rank: int = 0
    delta_rank: int = 0
    own_norms: bool = False
    head_width: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                     "ffn_size", "max_positions", "type_vocab_size", "groups", "num_labels"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if not isinstance(self.head_width, int) or isinstance(self.head_width, bool) or self.head_width < 0:
            raise ValueError(f"head_width must be an integer >= 0 (0: hidden_size / num_heads), got "
                             f"{self.head_width!r}.")
        if not self.head_width and self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})."
            )
        if self.embedding_size > self.hidden_size:
            raise ValueError(
                f"embedding_size ({self.embedding_size}) must not exceed hidden_size "
                f"({self.hidden_size}): factorization only makes the embedding smaller."
            )
        if self.sharing not in SHARING_MODES:
            raise ValueError(
                f"sharing must be one of {', '.join(SHARING_MODES)}, got {self.sharing!r}."
            )
        if self.num_layers % self.groups:
            raise ValueError(
                f"groups ({self.groups}) must divide num_layers ({self.num_layers}) so every group "
                "holds the same number of contiguous layers."
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}."
            )
        for name in ("hidden_dropout", "attention_dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}.")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}.")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id must be a token id below vocab_size, got {self.pad_token_id!r}.")
        self._check_per_block("heads", self.num_attention_blocks, self.num_heads)
        self._check_per_block("ffn_sizes", self.num_ffn_blocks, None)
        self._check_ranks("attention_ranks", self.num_attention_blocks, 4)
        self._check_ranks("ffn_ranks", self.num_ffn_blocks, 2)
        if not isinstance(self.word_rank, int) or isinstance(self.word_rank, bool) or self.word_rank < 0:
            raise ValueError(f"word_rank must be an integer >= 0, got {self.word_rank!r}.")
        self._check_relaxed()

    def _check_relaxed(self) -> None:
        if not isinstance(self.delta_rank, int) or isinstance(self.delta_rank, bool) or self.delta_rank < 0:
            raise ValueError(f"delta_rank must be an integer >= 0, got {self.delta_rank!r}.")
        if not self.relaxed:
            return
        if self.sharing == "none":
            raise ValueError("delta_rank and own_norms relax shared blocks, and this model shares none.")
        if self.pruned or self.low_rank:
            raise ValueError("relaxed sharing needs dense, unpruned shared blocks.")
        if self.delta_rank > self.max_delta_rank:
            raise ValueError(f"delta_rank ({self.delta_rank}) must be at most {self.max_delta_rank}, the smaller "
                             "side of the smallest shared matrix: beyond it a delta holds more than a full matrix.")

    def _check_ranks(self, name: str, blocks: int, matrices: int) -> None:
        value = getattr(self, name)
        if value is None:
            return
        value = tuple(tuple(ranks) for ranks in value)  # JSON gives lists; the frozen config holds tuples
        object.__setattr__(self, name, value)
        if len(value) != blocks or any(len(ranks) != matrices for ranks in value):
            raise ValueError(f"{name} needs {matrices} ranks for each of the {blocks} blocks, got {value!r}.")
        if any(not isinstance(r, int) or isinstance(r, bool) or r < 0 for ranks in value for r in ranks):
            raise ValueError(f"{name} entries must be integers >= 0 (0: dense), got {value!r}.")

    def _check_per_block(self, name: str, blocks: int, most: int | None) -> None:
        value = getattr(self, name)
        if value is None:
            return
        value = tuple(value)  # JSON gives lists; the frozen config holds tuples
        object.__setattr__(self, name, value)
        if len(value) != blocks:
            raise ValueError(f"{name} needs one entry per block ({blocks}), got {len(value)}.")
        for v in value:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or (most is not None and v > most):
                upper = f" and at most {most}" if most is not None else ""
                raise ValueError(f"{name} entries must be integers >= 0{upper}, got {v!r}.")

    # --- derived shape -------------------------------------------------------------------
    @property
    def head_size(self) -> int:
        """Each head's width: ``head_width`` where the hidden size was cut, else H / num_heads."""
        return self.head_width or self.hidden_size // self.num_heads

    @property
    def factorized(self) -> bool:
        """True when token embeddings are narrower than the hidden size (an E->H projection exists)."""
        return self.embedding_size != self.hidden_size

    @property
    def num_attention_blocks(self) -> int:
        """Distinct attention blocks held in memory: G when attention is shared, else L."""
        return self.groups if self.shares_attention else self.num_layers

    @property
    def num_ffn_blocks(self) -> int:
        """Distinct feed-forward blocks held in memory: G when the FFN is shared, else L."""
        return self.groups if self.shares_ffn else self.num_layers

    @property
    def pruned(self) -> bool:
        """True when some block has its own number of heads or FFN width, or the hidden size was cut away from the
        heads' width (transformers cannot hold it)."""
        return self.heads is not None or self.ffn_sizes is not None or bool(self.head_width)

    @property
    def total_heads(self) -> int:
        """Heads held in memory, over every attention block."""
        return sum(self.heads_of(b) for b in range(self.num_attention_blocks))

    @property
    def total_ffn(self) -> int:
        """FFN neurons held in memory, over every feed-forward block."""
        return sum(self.ffn_size_of(b) for b in range(self.num_ffn_blocks))

    @property
    def low_rank(self) -> bool:
        """True when some matrix is held as two low-rank factors."""
        return bool(self.word_rank) or any(r for ranks in (self.attention_ranks or ()) + (self.ffn_ranks or ())
                                           for r in ranks)

    @property
    def relaxed(self) -> bool:
        """True when the layers that share a block add their own deltas or offsets to it."""
        return bool(self.delta_rank) or self.own_norms

    @property
    def max_delta_rank(self) -> int:
        """min(out, in) of the smallest shared matrix: the rank at which a delta can be any matrix."""
        sides = [self.hidden_size]
        if self.shares_ffn:
            sides.append(self.ffn_size)
        return min(sides)

    @property
    def shares_attention(self) -> bool:
        """True when the layers of a group run one attention block."""
        return self.sharing in ("all", "attention")

    @property
    def shares_ffn(self) -> bool:
        """True when the layers of a group run one feed-forward block."""
        return self.sharing in ("all", "ffn")

    def attention_ranks_of(self, block: int) -> tuple[int, ...]:
        """The ranks of attention block ``block``'s query, key, value and output (0: dense)."""
        return (0, 0, 0, 0) if self.attention_ranks is None else self.attention_ranks[block]

    def ffn_ranks_of(self, block: int) -> tuple[int, ...]:
        """The ranks of feed-forward block ``block``'s intermediate and output (0: dense)."""
        return (0, 0) if self.ffn_ranks is None else self.ffn_ranks[block]

    def heads_of(self, block: int) -> int:
        """Heads of attention block ``block``."""
        return self.num_heads if self.heads is None else self.heads[block]

    def ffn_size_of(self, block: int) -> int:
        """Inner width of feed-forward block ``block``."""
        return self.ffn_size if self.ffn_sizes is None else self.ffn_sizes[block]

    def attention_block_of(self, layer: int) -> int:
        """Index of the attention block that layer ``layer`` runs."""
        return layer * self.num_attention_blocks // self.num_layers

    def ffn_block_of(self, layer: int) -> int:
        """Index of the feed-forward block that layer ``layer`` runs."""
        return layer * self.num_ffn_blocks // self.num_layers

    # --- edits and JSON ------------------------------------------------------------------
    def replace(self, **changes: Any) -> EncoderConfig:
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> EncoderConfigData:
        """The fields as JSON values; the low-rank and relaxed-sharing ones only when set (``_OMITTED_WHEN_UNSET``)."""
        data: EncoderConfigData = dataclasses.asdict(self)  # type: ignore[assignment]
        for name, unset in _OMITTED_WHEN_UNSET.items():
            if data[name] == unset:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> EncoderConfig:
        """The config ``data`` describes (a :meth:`to_dict`, or a JSON object read from a file); unknown fields are an
        error, and the values are checked as any config's are."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown encoder config field(s): {', '.join(unknown)}.")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> EncoderConfig:
        text = Path(text_or_path).read_text() if isinstance(text_or_path, Path) else text_or_path
        return cls.from_dict(json.loads(text))
