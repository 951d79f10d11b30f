"""Why each method saves what it saves, computed on the teacher's real shape.

:func:`explain` returns plain data (JSON-ready); the CLI renders it with rich. Each method module
holds its own explanation; methods explained together (the quantization formats) share a topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

from compress.errors import CompressError
from compress.registry import Method, all_methods, get_method
from compress.registry.pipeline import Step, parse
from compress.teachers.registry import teacher_config

if TYPE_CHECKING:
    from compress.reports.footprint import Explanation

DEFAULT_SEQ_LEN = 128


class AllExplained(TypedDict):
    """`compress explain all --json`: every topic's explanation for one teacher."""

    teacher: str
    seq_len: int
    methods: dict[str, Explanation]


def topics() -> dict[str, Method]:
    """What `compress explain` lists: one entry per topic, the first method of each explaining it."""
    found: dict[str, Method] = {}
    for method in all_methods():
        found.setdefault(method.explain_topic, method)
    return found


def _method(name: str) -> Method:
    found = topics()
    if name in found:
        return found[name]
    try:
        return get_method(name)
    except CompressError:
        raise CompressError(f"unknown method {name!r}; known: {', '.join(found)}, all.") from None


def explain(method: str, teacher: str, seq_len: int = DEFAULT_SEQ_LEN,
            options: Mapping[str, object] | None = None) -> Explanation | AllExplained:
    """The explanation of ``method`` (a method, a topic, or ``all``) for ``teacher``, as JSON-ready data.

    ``method`` may carry options in brackets as in a pipeline (``albert[sharing=attention]``); ``options``
    adds more (the CLI's flags). Without options a method is explained with its defaults."""
    step = Step("all") if method == "all" else _one_step(method)
    given = {**step.options, **(options or {})}
    if seq_len <= 0:
        raise CompressError(f"--seq-len must be a positive integer, got {seq_len}.")
    if step.name == "all" and given:
        raise CompressError("options explain one method, not all: name the method (compress explain albert ...).")
    chosen = None if step.name == "all" else _method(step.name)
    config = teacher_config(teacher)
    try:
        if chosen is None:
            return {"teacher": teacher, "seq_len": seq_len,
                    "methods": {topic: {"seq_len": seq_len, **m.explain(teacher, config, seq_len, m.make_options({}))}
                                for topic, m in topics().items()}}
        return {"seq_len": seq_len, **chosen.explain(teacher, config, seq_len, chosen.make_options(given))}
    except ValueError as e:  # the student does not fit this teacher (e.g. TinyBERT-4 on a narrow one)
        raise CompressError(f"cannot explain {method} for {teacher}: {e}") from None


def _one_step(text: str) -> Step:
    steps = parse(text).steps
    if len(steps) != 1:
        raise CompressError(f"explain takes one method, not the pipeline {text!r}; explain its steps one by one.")
    return steps[0]
