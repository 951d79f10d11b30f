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
from dataclasses import dataclass, field
from typing import Any

from compress.errors import CompressError
from compress.registry.method import Method, all_methods, families, format_value, get_method

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_BARE = re.compile(r'[^,\[\]+="\s]+')


@dataclass(frozen=True)
class Step:
    name: str
    options: dict[str, Any] = field(default_factory=dict)

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


def for_throughput(pipeline: Pipeline, batch_shape: str) -> Pipeline:
    """``pipeline`` as it runs when batch throughput in batches of ``batch_shape`` is what counts: each step whose
    method runs differently for it (:attr:`Transform.for_throughput`: quantization left to choose its backend) with
    the options that say so; the rest as they are."""
    steps = []
    for step in pipeline.steps:
        adapt = getattr(get_method(step.name), "for_throughput", None)
        steps.append(Step(step.name, adapt(step.options, batch_shape)) if adapt else step)
    return Pipeline(tuple(steps))
