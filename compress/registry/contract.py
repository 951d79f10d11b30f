"""The one verb every transform supplies, on models: ``apply(model, options, context) -> Transformed``.

A transform (quantization, pruning, vocabulary pruning, ...) takes a model and gives a changed one plus its
own typed record, :class:`Details`. It needs no run directory: from Python, ``apply`` works on any encoder
with a :class:`Context` holding what that transform uses (training batches, the tokenizer, the model to
recover from). ``compress run`` wraps the same call in :mod:`compress.runs.writer`, which loads the input,
evaluates, times, saves and writes the record, the same way for every method.
"""

from __future__ import annotations

import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar

from compress.train_config import StageRecord, TrainSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from compress.bench.measurement import Speed
    from compress.data.batching import TokenizedTask
    from compress.data.task import TaskData
    from compress.distill.recipe import RecipeData
    from compress.jsontypes import JSONObject
    from compress.predictions import Predictions


@dataclass
class Details:
    """A method's own part of its run record (``metrics.json``'s ``details``): subclassed by each method that
    records something of its own, as a dataclass of JSON values and nested dataclasses. ``SCHEMA`` is
    written with it; a field added later needs a default, so records written before still load."""

    SCHEMA: ClassVar[int] = 1

    def to_dict(self) -> JSONObject:
        return {"schema_version": self.SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: JSONObject) -> Details:
        return build(cls, data)

    @property
    def warning(self) -> str | None:
        """Why this CPU runs the model badly (shown beside it in a comparison), if it does."""
        return None

    @property
    def runtime_note(self) -> str | None:
        """Where the runtime it runs on was not the fastest for both batch 1 and large batches: which one its speed
        is measured on and which was faster for the other (shown beside it in a comparison)."""
        return None


def build(cls: type, data: Any) -> Any:
    """``data`` (parsed JSON) as an instance of dataclass ``cls``: nested dataclasses, lists and dicts of them
    are built too; keys ``cls`` does not have are ignored (a newer writer's), missing ones take defaults."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls) if f.init}
    return cls(**{k: _value(hints[k], v) for k, v in data.items() if k in known})


def _value(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0], value) if len(inner) == 1 else value
    if isinstance(hint, type) and is_dataclass(hint):
        return build(hint, value)
    if origin is list and args:
        return [_value(args[0], v) for v in value]
    if origin is dict and len(args) == 2:
        return {k: _value(args[1], v) for k, v in value.items()}
    return value


@dataclass
class Context:
    """What a transform may use besides the model and its options; each transform reads what it needs.

    data       the task tokenized for the model: training batches (scores, calibration, recovery), dev, test
    task       the task itself (texts, for vocabulary pruning)
    tokenizer  the model's tokenizer
    device     where to compute ("cpu", "cuda")
    speed_device  where the model is timed and served ("cpu", "cuda"): a transform that measures speed to choose
               (quantization's --backend auto) chooses among what runs there
    threads    threads to time with, when a transform measures speed to choose (quantization's --backend auto)
    workdir    where a transform may write files (a quantized artefact); a temporary directory when None
    log        where training losses go, one JSON line each (a run's log.jsonl)
    name       what the input is called in plots ("minilm", a run's directory name)
    teacher_answers  the fine-tuned teacher's logits on a split of ``data`` (split name -> examples x classes): the
               soft targets a recovery learns from where the run's recipe says ``taught_by = teacher``; None where it
               does not, or where the teacher is not at hand
    """

    data: TokenizedTask | None = None
    task: TaskData | None = None
    tokenizer: Any = None
    device: str = "cpu"
    speed_device: str = "cpu"
    train: TrainSettings = field(default_factory=TrainSettings)
    threads: int | None = None
    workdir: Path | None = None
    log: IO[str] | None = None
    show_progress: bool = False
    name: str = "the model"
    teacher_answers: Callable[[str], torch.Tensor] | None = None

    @property
    def seed(self) -> int:
        return self.train.seed


@dataclass
class Artefact:
    """A transformed model that is files, not an encoder: a quantized model, run by ``backend``."""

    directory: Path
    backend: str
    dtype: str


@dataclass
class Section:
    """A method's own part of a report, what its ``compared_sections`` gives a comparison row (the per-layer picture
    of a pruned model): an optional title, sentences, and a table, as plain text cells. ``name`` names it for the page
    (the HTML table's class); ``align`` has one entry per column, "left" or "right"."""

    name: str
    title: str | None = None
    lines: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    align: list[str] = field(default_factory=list)


@dataclass
class Transformed:
    """What ``apply`` gives: the changed model and the method's details, with what the run writer needs.

    model      an Encoder (a transform that gives "fp32") or a predictor loaded from ``artefact``
    details    the method's typed record (its class is the method's ``details``)
    tokenizer  the new tokenizer, when the transform changed the vocabulary (None: the input's)
    artefact   where a quantized model's files are (the run writer moves them into the run)
    files      more files for the run directory, by name (scores, plots)
    stages     the training stages it ran (pruning's recovery), as the run record lists them
    recipe     the recipe those stages followed (config.json records it)
    test       its test predictions, when the transform made them the way its model must be scored
    dev        its dev predictions, likewise
    speed      timings it made already ("source", "student"), so the run writer does not time twice
    """

    model: Any
    details: Details | None = None
    tokenizer: Any = None
    artefact: Artefact | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    stages: list[StageRecord] = field(default_factory=list)
    recipe: RecipeData | None = None
    test: Predictions | None = None
    dev: Predictions | None = None
    speed: dict[str, Speed] = field(default_factory=dict)
