"""Layer maps: which teacher layer each student layer learns from (TinyBERT's g(m)), as config values.

Indexing follows ``EncoderOutput.hidden_states``: index 0 is the embedding output, index i the
output of layer i. A student with M layers has M+1 hidden states and a teacher with N layers N+1;
:func:`teacher_layers` returns, for each student hidden state 0..M, the teacher hidden-state index it
is paired with. The embedding output is always paired with the teacher's (0 -> 0).

Kinds (M student layers, N teacher layers, m = 1..M):

    uniform      g(m) = floor(m * N / M)          TinyBERT. 4 of 12 -> [0, 3, 6, 9, 12]. When M does
                                                  not divide N the steps are spread as evenly as
                                                  flooring allows and g(M) = N still holds
                                                  (12 onto 5 -> [0, 2, 4, 7, 9, 12]); TinyBERT's code
                                                  used m * floor(N / M), the same whenever M divides N.
    last         g(m) = N - M + m                 the top M teacher layers.
    every_other  g(m) = N - 2 * (M - m)           DistilBERT: one of every two teacher layers, counted
                                                  down from the last one, so the student's last layer
                                                  faces the teacher's last. 6 -> 3 gives [0, 2, 4, 6]:
                                                  student layer i (0-based) comes from teacher layer
                                                  2i + 1 when N is even, 2i when N is odd. Needs
                                                  M <= ceil(N / 2).
    explicit     g(m) = layers[m - 1]             any M teacher hidden-state indices in 1..N.

Attention maps and weight initialisation use 0-based layer indices (``attention_scores[j]`` belongs
to layer j + 1): :func:`teacher_blocks` gives g(m) - 1 for each student layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

__all__ = ["LAYER_MAP_KINDS", "LayerMap", "parse_layer_map", "teacher_blocks", "teacher_layers"]

LAYER_MAP_KINDS: tuple[str, ...] = ("uniform", "last", "every_other", "explicit")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class LayerMapData(TypedDict):
    """A layer map as JSON (a recipe in config.json)."""

    kind: str
    layers: list[int] | None


@dataclass(frozen=True)
class LayerMap:
    """A layer map as a config value.

    kind     one of ``uniform``, ``last``, ``every_other``, ``explicit``.
    layers   only for ``explicit``: the teacher hidden-state index (1..N) for student layers 1..M,
             in order. The embedding pairing 0 -> 0 is implied and not listed.
    """

    kind: str = "uniform"
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in LAYER_MAP_KINDS:
            raise ValueError(f"layer map kind must be one of {', '.join(LAYER_MAP_KINDS)}, got {self.kind!r}.")
        if self.kind == "explicit":
            if self.layers is None or isinstance(self.layers, (str, bytes)) or not self.layers:
                raise ValueError("an explicit layer map needs a non-empty list of teacher layer indices.")
            layers = tuple(self.layers)
            if not all(_is_int(x) and x >= 1 for x in layers):
                raise ValueError(
                    f"explicit teacher layer indices must be integers >= 1 (0 is the embedding output, "
                    f"paired automatically), got {list(layers)}."
                )
            object.__setattr__(self, "layers", layers)
        elif self.layers is not None:
            raise ValueError(f"layers is only used with kind 'explicit', not with {self.kind!r}.")

    @classmethod
    def explicit(cls, layers: list[int] | tuple[int, ...]) -> LayerMap:
        """An explicit map: student layer m (1..M) learns from teacher hidden state ``layers[m - 1]``."""
        return cls("explicit", tuple(layers))

    def to_dict(self) -> LayerMapData:
        """JSON-friendly: ``{"kind": ..., "layers": [...] or None}``."""
        return LayerMapData(kind=self.kind, layers=list(self.layers) if self.layers is not None else None)

    @classmethod
    def from_dict(cls, data: LayerMapData) -> LayerMap:
        """Inverse of :meth:`to_dict`; unknown fields are an error."""
        unknown = sorted(set(data) - {"kind", "layers"})
        if unknown:
            raise ValueError(f"unknown layer map field(s): {', '.join(unknown)}.")
        layers = data.get("layers")
        if isinstance(layers, list):
            layers = tuple(layers)
        return cls(kind=data.get("kind", "uniform"), layers=layers)


def parse_layer_map(text: str) -> LayerMap:
    """A layer map from its command-line form: a kind (``uniform``, ``last``, ``every_other``) or
    a comma-separated list of teacher layers (``2,4,6``: student layer m <- teacher layer list[m-1])."""
    text = text.strip()
    if text and all(part.strip().isdigit() for part in text.split(",")):
        return LayerMap.explicit([int(part) for part in text.split(",")])
    return LayerMap(kind=text)


def teacher_layers(layer_map: LayerMap, student_layers: int, teacher_layers: int) -> list[int]:
    """Teacher hidden-state index for each student hidden state 0..M (length M + 1, first entry 0).

    Raises ValueError (one sentence) when the map does not fit: M or N not positive, M > N for
    ``uniform`` / ``last``, M > ceil(N / 2) for ``every_other``, an explicit list whose length is
    not M or with an index outside 1..N.
    """
    return _hidden_map(layer_map, student_layers, teacher_layers)


def teacher_blocks(layer_map: LayerMap, student_layers: int, teacher_layers: int) -> list[int]:
    """0-based teacher layer for each 0-based student layer: g(m) - 1 for m = 1..M.

    Pairs ``student.attention_scores[j]`` with ``teacher.attention_scores[result[j]]``, and says
    which teacher layer's weights initialise student layer j (DistilBERT's initialisation).
    Raises as :func:`teacher_layers`.
    """
    return [g - 1 for g in _hidden_map(layer_map, student_layers, teacher_layers)[1:]]


def _hidden_map(layer_map: LayerMap, m_count: int, n_count: int) -> list[int]:
    for name, value in (("student_layers", m_count), ("teacher_layers", n_count)):
        if not _is_int(value) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    kind = layer_map.kind
    if kind in ("uniform", "last") and m_count > n_count:
        raise ValueError(
            f"a {kind} layer map needs at most as many student layers as teacher layers, "
            f"got {m_count} student and {n_count} teacher layers."
        )
    if kind == "uniform":
        mapped = [m * n_count // m_count for m in range(1, m_count + 1)]
    elif kind == "last":
        mapped = [n_count - m_count + m for m in range(1, m_count + 1)]
    elif kind == "every_other":
        if 2 * m_count - 1 > n_count:
            raise ValueError(
                f"every_other takes one of every two teacher layers, so {n_count} teacher layers allow at "
                f"most {(n_count + 1) // 2} student layers, got {m_count}; use uniform or an explicit list."
            )
        mapped = [n_count - 2 * (m_count - m) for m in range(1, m_count + 1)]
    else:
        assert layer_map.layers is not None
        if len(layer_map.layers) != m_count:
            raise ValueError(
                f"the explicit layer map lists {len(layer_map.layers)} teacher layers but the student has "
                f"{m_count}; give one teacher index per student layer."
            )
        bad = [x for x in layer_map.layers if x > n_count]
        if bad:
            raise ValueError(
                f"explicit teacher layer indices must be in 1..{n_count} (the teacher's layers), got {bad}."
            )
        mapped = list(layer_map.layers)
    return [0, *mapped]

