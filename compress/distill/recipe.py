"""A method is data: a recipe names loss terms with weights, grouped in stages.

Recipes are dataclasses with a JSON round trip, so every run writes the exact recipe it ran.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import NotRequired, TypedDict

from compress.distill.layer_maps import LayerMap, LayerMapData, parse_layer_map
from compress.distill.losses import LOSSES, get_loss


@dataclass
class LossTerm:
    """One weighted loss of a stage.

    loss        a name registered in :data:`compress.distill.losses.LOSSES`.
    weight      its coefficient in the stage's sum.
    options     keyword options of the loss (``temperature``, ``scale_by_t2``).
    layers      for layer losses: ``mapped`` pairs every student layer m with teacher layer
                g(m) (summed over m, as TinyBERT does); ``last`` uses the last layers only
                (DistilBERT's cosine loss).
    """

    loss: str
    weight: float = 1.0
    options: dict[str, float | bool] = field(default_factory=dict)
    layers: str = "mapped"

    def __post_init__(self) -> None:
        spec = get_loss(self.loss)
        unknown = sorted(set(self.options) - set(spec.options))
        if unknown:
            raise ValueError(f"loss {self.loss} takes no option(s) {', '.join(unknown)}.")
        if self.layers not in ("mapped", "last"):
            raise ValueError(f"layers must be 'mapped' or 'last', got {self.layers!r}.")

    @property
    def reads(self) -> str:
        return LOSSES[self.loss].reads


@dataclass
class Stage:
    """A training stage: its loss terms, its length and its learning rate's schedule (a linear warm-up over
    ``warmup_ratio`` of its steps, then ``decay``: linear, cosine or constant).

    ``select_on`` picks the kept epoch: ``accuracy`` on dev, or ``loss`` (the stage's own
    distillation loss on dev, for intermediate-layer stages that do not train the classifier).
    ``epochs`` is a ceiling where the run stops on patience (the recipe's, ``--recipe``).
    """

    name: str
    terms: list[LossTerm]
    epochs: int = 3
    lr: float = 5e-5
    select_on: str = "accuracy"
    warmup_ratio: float = 0.1
    decay: str = "linear"
    part: tuple[int, int] | None = None   # (i, k): the i-th (from 0) of k parts sharing one stage's epochs

    @property
    def reads(self) -> set[str]:
        return {t.reads for t in self.terms}

    def to_dict(self) -> StageData:
        data = asdict(self)
        if self.part is None:
            del data["part"]   # stages that are no part read as they did before stages were split
        return StageData(**data)

    def sharing(self, epochs: int) -> int:
        """This stage's share of ``epochs`` where it is a part of a split stage (each part at least one, the first
        ones one more where they do not divide), else ``epochs``."""
        if self.part is None:
            return epochs
        index, parts = self.part
        share, extra = divmod(epochs, parts)
        return max(1, share + (index < extra))


class TermData(TypedDict):
    loss: str
    weight: float
    options: dict[str, float | bool]
    layers: str


class StageData(TypedDict):
    name: str
    terms: list[TermData]
    epochs: int
    lr: float
    select_on: str
    warmup_ratio: float
    decay: str
    part: NotRequired[list[int]]


class RecipeData(TypedDict):
    """A recipe as JSON (config.json's ``recipe``; :meth:`Recipe.to_dict`)."""

    method: str
    stages: list[StageData]
    layer_map: LayerMapData
    channels: NotRequired[list[int]]


@dataclass
class Recipe:
    """Stages of one method, the layer map that pairs student and teacher layers, and for a student cut from its
    teacher's width the teacher's channels its hidden states are compared with (no projection; None: the widths are
    equal, or a learned projection maps the student's onto the teacher's)."""

    method: str
    stages: list[Stage]
    layer_map: LayerMap = field(default_factory=lambda: LayerMap("uniform"))
    channels: tuple[int, ...] | None = None   # a width cut's: the teacher's channels its hidden states face

    def to_dict(self) -> RecipeData:
        data = asdict(self)
        data["stages"] = [stage.to_dict() for stage in self.stages]
        if self.channels is None:
            del data["channels"]   # recipes without one read as they did before widths were cut
        return RecipeData(**data)

    def for_run(self, epochs: int | None, lr: float | None, layer_map: str | None, warmup: float | None = None,
                decay: str | None = None) -> Recipe:
        """The recipe a run follows: its ``--epochs``, ``--lr``, ``--warmup``, ``--decay`` and ``--layer-map``, where
        given, over every stage's own (ValueError on a bad layer map)."""
        stages = [replace(s, epochs=s.epochs if epochs is None else s.sharing(epochs), lr=s.lr if lr is None else lr,
                          warmup_ratio=s.warmup_ratio if warmup is None else warmup,
                          decay=s.decay if decay is None else decay)
                  for s in self.stages]
        return replace(self, stages=stages, layer_map=parse_layer_map(layer_map) if layer_map else self.layer_map)

    @classmethod
    def from_dict(cls, data: RecipeData) -> Recipe:
        stages = [
            Stage(**{**s, "terms": [LossTerm(**t) for t in s["terms"]],
                     "part": tuple(s["part"]) if "part" in s else None}) for s in data["stages"]
        ]
        channels = data.get("channels")
        return cls(method=data["method"], stages=stages, layer_map=LayerMap.from_dict(data["layer_map"]),
                   channels=None if channels is None else tuple(channels))
