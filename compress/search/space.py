"""The space a search looks in: declared by the methods, narrowed by the user, enumerated as pipelines.

Each method's options declare the values worth trying (field metadata ``search``, mildest compression first; see
:class:`compress.registry.Method`). A candidate is a pipeline: at most one student method first, then transforms in
the registry's order, each at most once and each allowed to follow the step before it by the pipeline rules (so a
quantization comes last, pruning before low-rank), every searched option at one of its values and every other
option at its default. Options at their default are left out of the pipeline's text, so a candidate is named as
`compress run` and `compress compare` name the same run (``distilbert+prune+int8``) and their runs are shared.

A space file (TOML or JSON) narrows it: its top-level keys are the methods to search, each with the values to try
for any of its options, e.g. ``[prune]`` ``keep_heads = [0.5, 0.25]``; ``--methods`` keeps only the methods named.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compress.errors import CompressError
from compress.models.config import EncoderConfig
from compress.registry import Context, Method, StudentMethod, Transform, all_methods, get_method
from compress.registry.method import default_of, format_value, option_fields
from compress.registry.pipeline import Pipeline, Step, check


@dataclass(frozen=True)
class Space:
    """The methods searched (registry order) and, per method, the values each searched option takes."""

    values: dict[str, dict[str, tuple[Any, ...]]]

    @property
    def methods(self) -> list[Method]:
        return [get_method(name) for name in self.values]

    def size(self) -> int:
        """How many option combinations the methods hold between them (not the pipelines they make)."""
        total = 0
        for options in self.values.values():
            count = 1
            for values in options.values():
                count *= len(values)
            total += count
        return total

    def to_dict(self) -> dict[str, dict[str, list[Any]]]:
        return {name: {k: [format_value(v) for v in values] for k, values in options.items()}
                for name, options in self.values.items()}


def declared_values(method: Method, teacher: EncoderConfig) -> dict[str, tuple[Any, ...]]:
    """The values ``method`` declares worth trying, per option (mildest first), for this teacher's shape."""
    found = {}
    for name, f in option_fields(method.options).items():
        values = f.metadata.get("search")
        if values is None:
            continue
        found[name] = tuple(values(teacher) if callable(values) else values)
    return found


def declared(teacher: EncoderConfig, names: list[str] | None = None, objective: str | None = None) -> Space:
    """Every method that runs well on this machine (``in_compare``) or is searched for ``objective`` by default
    (``searched_for``), or the ``names`` given, with the values each declares."""
    if names is not None:
        chosen = [get_method(name) for name in names]   # an unknown name fails here, in one line
        methods = [m for m in all_methods() if m in chosen]
    else:
        methods = [m for m in all_methods() if m.in_compare() or objective in m.searched_for]
    return Space({m.name: declared_values(m, teacher) for m in methods})


def _read(path: Path) -> dict[str, dict[str, object]]:
    """The tables of a --space file, by method name: each option's value or list of values, checked later."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CompressError(f"--space {path}: cannot read it ({e.strerror}).") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise CompressError(f"--space {path} is not valid {kind}: {e}.") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise CompressError(f"--space {path} must map method names to tables of option values "
                            "([prune] keep_heads = [0.5, 0.25]).")
    return data


def from_file(path: Path, teacher: EncoderConfig) -> Space:
    """The space a file declares: its methods only, each with the values it gives (a list, or one value) over the
    ones the method declares; an unknown method or option, or a value the option cannot take, fails in one line."""
    data, values = _read(Path(path)), {}
    for name in data:
        get_method(name)
    for method in all_methods():
        if method.name not in data:
            continue
        options = declared_values(method, teacher)
        for key, given in data[method.name].items():
            if key not in option_fields(method.options):
                raise CompressError(f"--space {path}: {method.name} has no option {key!r}; it takes "
                                    f"{', '.join(option_fields(method.options)) or 'none'}.")
            given = given if isinstance(given, list) else [given]
            if not given:
                raise CompressError(f"--space {path}: {method.name}.{key} lists no value.")
            options[key] = tuple(method.option_values({key: v})[key] for v in given)
        values[method.name] = options
    return Space(values)


def narrowed(space: Space, names: list[str]) -> Space:
    """``space`` with only the methods ``names`` (each must be a method; one not in the space fails)."""
    for name in names:
        get_method(name)
    missing = [n for n in names if n not in space.values]
    if missing:
        raise CompressError(f"--methods names {', '.join(missing)}, which the space does not hold "
                            f"({', '.join(space.values)}).")
    return Space({k: v for k, v in space.values.items() if k in names})


# --- candidates ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One pipeline of the space and the shape of the model it gives (an estimate where data decide it); where it was
    found in a space, ``shapes`` holds the shape its first step is given, then the shape after each step (the last
    one ``shape``), as the search's context made them (a pruned vocabulary's size is the task's)."""

    pipeline: Pipeline
    shape: EncoderConfig = field(compare=False)
    shapes: tuple[EncoderConfig, ...] = field(default=(), compare=False)

    @property
    def text(self) -> str:
        return str(self.pipeline)

    def prefix(self, steps: int) -> Candidate:
        """The candidate of this one's first ``steps`` steps (its shape this one's where no shapes are known)."""
        shapes = self.shapes[:steps + 1]
        return Candidate(Pipeline(self.pipeline.steps[:steps]), shapes[-1] if shapes else self.shape, shapes)

    @property
    def trains(self) -> bool:
        return any(isinstance(m, StudentMethod) for m in self.methods)

    @property
    def methods(self) -> list[Method]:
        return [get_method(step.name) for step in self.pipeline.steps]


def _combinations(method: Method, values: dict[str, tuple[object, ...]]) -> list[dict[str, object]]:
    """Every combination of the searched values, as the pipeline writes them (defaults left out)."""
    combos: list[dict[str, object]] = [{}]
    fields = option_fields(method.options)
    for key, options in values.items():
        default = default_of(fields[key])
        combos = [{**c, **({} if v == default else {key: v})} for c in combos for v in options]
    unique = {json.dumps(c, sort_keys=True, default=str): c for c in combos}
    return list(unique.values())


def candidates(space: Space, teacher: EncoderConfig, context: Context) -> list[Candidate]:
    """Every pipeline of ``space`` that the pipeline rules and each step's checks against its input's shape allow,
    each with its shape (``context`` holds the task and tokenizer a step's shape may read, the kept vocabulary)."""
    methods = space.methods
    transforms = [m for m in methods if isinstance(m, Transform)]
    found: list[Candidate] = []
    shapes: dict[tuple[str, EncoderConfig], EncoderConfig] = {}

    def shape_after(method: Transform, step: Step, shape: EncoderConfig) -> EncoderConfig:
        key = (str(step), shape)
        if key not in shapes:
            options = method.make_options(step.options)
            if method.check_input is not None:
                method.check_input(options, shape)
            shapes[key] = method.shape(options, shape, context) if method.shape is not None else shape
        return shapes[key]

    def extend(steps: list[Step], shapes: tuple[EncoderConfig, ...], start: int) -> None:
        shape = shapes[-1]
        if steps:
            found.append(Candidate(Pipeline(tuple(steps)), shape, shapes))
        for index in range(start, len(transforms)):
            method = transforms[index]
            for combo in _combinations(method, space.values[method.name]):
                step = Step(method.name, combo)
                try:
                    check(Pipeline((*steps, step)))
                    after = shape_after(method, step, shape)
                except (CompressError, ValueError):
                    continue   # a step that may not follow this one, or cannot take its shape
                extend([*steps, step], (*shapes, after), index + 1)

    extend([], (teacher,), 0)
    for student in (m for m in methods if isinstance(m, StudentMethod)):
        for combo in _combinations(student, space.values[student.name]):
            try:
                shape = student.student_config(teacher, student.make_options(combo))
            except (CompressError, ValueError):
                continue
            extend([Step(student.name, combo)], (teacher, shape), 0)
    return found


def compresses_at_least(a: Candidate, b: Candidate, space: Space) -> bool:
    """Whether ``a`` compresses at least as much as ``b``: the same student (or ``b`` has none), every step of ``b``
    also in ``a``, and every searched option of those steps at ``b``'s value or a harsher one. The search assumes
    that a candidate like that keeps no more accuracy than ``b`` (a step or a harsher setting adds none)."""
    first_a, first_b = a.pipeline.steps[0], b.pipeline.steps[0]
    if isinstance(get_method(first_b.name), StudentMethod) and first_a.name != first_b.name:
        return False
    steps = {step.name: step for step in a.pipeline.steps}
    for step in b.pipeline.steps:
        mine = steps.get(step.name)
        if mine is None:
            return False
        fields = option_fields(get_method(step.name).options)
        for key, values in space.values[step.name].items():
            default = default_of(fields[key])
            va, vb = mine.options.get(key, default), step.options.get(key, default)
            if va != vb and (va not in values or vb not in values or values.index(va) < values.index(vb)):
                return False
    return True
