"""Pipelines of methods: ``distilbert+int8``, with options inside,
``albert[sharing=attention,embedding_size=256]+int8``.

Grammar::

    pipeline := step ("+" step)*
    step     := NAME ["[" option ("," option)* "]"]
    option   := KEY "=" VALUE          VALUE is bare (no , ] + = [ " or spaces) or "double quoted"

:func:`parse` reads the text (syntax only); ``str(pipeline)`` writes it back; :func:`check` asks the
registry whether the steps exist and fit together: a student method only first, and each step
taking what the one before it gives. Option values stay text here; each method converts its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compress.errors import CompressError
from compress.registry.method import Method, all_methods, families, flag_for, format_value, get_method, option_fields

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_BARE = re.compile(r'[^,\[\]+="\s]+')


@dataclass(frozen=True)
class Step:
    name: str
    options: dict[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return f"{self.name}[{','.join(f'{k}={_quote(format_value(v))}' for k, v in self.options.items())}]"


@dataclass(frozen=True)
class Pipeline:
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return "+".join(map(str, self.steps))

    def __add__(self, other: Pipeline) -> Pipeline:
        return Pipeline(self.steps + other.steps)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]


def _quote(value: str) -> str:
    if value and _BARE.fullmatch(value):
        return value
    if '"' in value:
        raise CompressError(f"the option value {value!r} cannot be written in a pipeline (it holds a double quote).")
    return f'"{value}"'


def parse(text: str) -> Pipeline:
    """The pipeline ``text`` describes; one sentence naming the position when it is malformed."""
    pos, steps = 0, []

    def fail(what: str) -> CompressError:
        return CompressError(f"cannot read the pipeline {text!r}: {what} at character {pos + 1}.")

    while True:
        name = _NAME.match(text, pos)
        if not name:
            raise fail("expected a method name")
        pos = name.end()
        options: dict[str, str] = {}
        if text.startswith("[", pos):
            pos += 1
            while True:
                key = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(text, pos)
                if not key:
                    raise fail("expected an option name")
                pos = key.end()
                if not text.startswith("=", pos):
                    raise fail(f"expected '=' after {key.group()}")
                pos += 1
                if text.startswith('"', pos):
                    end = text.find('"', pos + 1)
                    if end < 0:
                        raise fail("unclosed quote")
                    value, pos = text[pos + 1:end], end + 1
                else:
                    bare = _BARE.match(text, pos)
                    if not bare:
                        raise fail(f"expected a value for {key.group()}")
                    value, pos = bare.group(), bare.end()
                if key.group() in options:
                    raise CompressError(f"the pipeline {text!r} gives {key.group()} twice to {name.group()}.")
                options[key.group()] = value
                if text.startswith(",", pos):
                    pos += 1
                elif text.startswith("]", pos):
                    pos += 1
                    break
                else:
                    raise fail("expected ',' or ']'")
        steps.append(Step(name.group(), options))
        if pos == len(text):
            return Pipeline(tuple(steps))
        if not text.startswith("+", pos):
            raise fail("expected '+' or the end")
        pos += 1


def split_list(text: str) -> list[str]:
    """The pipelines of a comma-separated list: commas inside brackets or quotes separate options, not
    pipelines (``albert[sharing=attention,embedding_size=256]+int8,distilbert``)."""
    items, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "[]":
            depth += 1 if char == "[" else -1
        elif not quoted and depth == 0 and char == ",":
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def check(pipeline: Pipeline) -> list[Method]:
    """The registered method of every step, once the steps are known to fit together."""
    methods = [get_method(step.name) for step in pipeline.steps]
    for before, method in zip(methods, methods[1:]):
        if method.kind == "student":
            transforms = all_methods("transform")
            raise CompressError(f"{method.name} trains a student and can only be a pipeline's first step; --then "
                                f"takes a {families(transforms)} method ({', '.join(m.name for m in transforms)}).")
        if method.name in before.not_before:
            raise CompressError(f"{method.name} cannot follow {before.name}: {before.not_before[method.name]}")
        if method.takes != before.gives:  # type: ignore[attr-defined]
            raise CompressError(f"{method.name} cannot follow {before.name}: {before.name} gives a {before.gives} "
                                f"model and {method.name} takes a {method.takes} one.")  # type: ignore[attr-defined]
    return methods


@dataclass
class ResolvedStep:
    """One step of a pipeline, its options checked by its method: as given (``values``) and as built."""

    method: Method
    values: dict[str, object]
    options: Any


def resolve(text: str, then: list[str], options: Mapping[str, object], target: str = "teacher") -> list[ResolvedStep]:
    """The steps of the pipeline ``text`` followed by each of ``then``, with every option given by flag or --set
    (``options``) placed on the one step whose method takes it and each step's options built by its method;
    ``target``: what a first transform takes (``teacher`` or a run directory). A bad step, order or option fails
    here in one sentence, before anything but the registry is imported (``compress run`` checks this first)."""
    pipeline = parse(text)
    for more in then:
        pipeline += parse(more)
    methods = check(pipeline)
    given = [dict(step.options) for step in pipeline.steps]
    _place(options, methods, given)
    if methods[0].kind == "student" and target != "teacher":
        raise _for_transforms([], methods)
    if target != "teacher" and not Path(target).is_dir():
        raise CompressError(f"--target must be 'teacher' or a run directory; {target!r} is neither.")
    steps = []
    for method, values in zip(methods, given):
        values = method.option_values(values)
        steps.append(ResolvedStep(method, values, method.options(**values)))
    return steps


def _place(options: Mapping[str, object], methods: list[Method], given: list[dict[str, object]]) -> None:
    """Give each option (a flag or --set) to the one step whose method takes it."""
    unplaced = []
    for key, value in options.items():
        takers = [i for i, m in enumerate(methods) if key in option_fields(m.options)]
        if not takers:
            unplaced.append(key)
        elif len(takers) > 1:
            names = " and ".join(methods[i].name for i in takers)
            raise CompressError(f"{flag_for(key)} applies to {names}; give it inside the pipeline instead, "
                                f"as {methods[takers[0]].name}[{key}=...].")
        elif key in given[takers[0]]:
            raise CompressError(f"{flag_for(key)} is given twice to {methods[takers[0]].name}: as a flag and "
                                "inside the pipeline.")
        else:
            given[takers[0]][key] = value
    if not unplaced:
        return
    takers = [m for m in all_methods() if any(k in option_fields(m.options) for k in unplaced)]
    steps = "+".join(m.name for m in methods)
    if takers and all(m.kind == "transform" for m in takers) and all(m.kind == "student" for m in methods):
        raise _for_transforms(unplaced, methods)
    if takers and all(m.kind == "student" for m in takers) and all(m.kind == "transform" for m in methods):
        raise CompressError(f"{steps} trains nothing: student options ({', '.join(map(flag_for, unplaced))}), "
                            "--epochs, --lr, --layer-map and --patience do not apply.")
    known = sorted({f for m in methods for f in option_fields(m.options)})
    raise CompressError(f"{', '.join(map(flag_for, unplaced))} do(es) not apply to {steps}; "
                        f"it takes {', '.join(known) or 'no options'}.")


def _for_transforms(keys: list[str], methods: list[Method]) -> CompressError:
    """The error for --target or a transform's options given to a pipeline of students only."""
    transforms = [m for m in all_methods("transform") if not keys or set(keys) & set(option_fields(m.options))]
    flags = ["--target", *map(flag_for, keys)]
    return CompressError(f"{' and '.join(flags)} {'is' if len(flags) == 1 else 'are'} for {families(transforms)} "
                         f"({', '.join(m.name for m in transforms)}); {methods[0].name} trains a student (add "
                         f"--then {transforms[0].name} to apply one to it afterwards).")


def for_throughput(pipeline: Pipeline, batch_shape: str) -> Pipeline:
    """``pipeline`` as it runs when batch throughput in batches of ``batch_shape`` is what counts: each step whose
    method runs differently for it (:attr:`Transform.for_throughput`: quantization left to choose its backend) with
    the options that say so; the rest as they are."""
    steps = []
    for step in pipeline.steps:
        adapt = getattr(get_method(step.name), "for_throughput", None)
        steps.append(Step(step.name, adapt(step.options, batch_shape)) if adapt else step)
    return Pipeline(tuple(steps))
