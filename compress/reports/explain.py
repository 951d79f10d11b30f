"""Why each method saves what it saves, computed on the teacher's real shape.

:func:`explain` returns plain data (JSON-ready); the CLI renders it with rich. Each method module
holds its own explanation; methods explained together (the quantization formats) share a topic.
"""

from __future__ import annotations

from typing import Any

from compress.errors import CompressError
from compress.methods.registry import Method, all_methods, get_method
from compress.teachers.registry import teacher_config

DEFAULT_SEQ_LEN = 128


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


def explain(method: str, teacher: str, seq_len: int = DEFAULT_SEQ_LEN) -> dict[str, Any]:
    """The explanation of ``method`` (a method, a topic, or ``all``) for ``teacher``, as JSON-ready data."""
    chosen = None if method == "all" else _method(method)
    if seq_len <= 0:
        raise CompressError(f"--seq-len must be a positive integer, got {seq_len}.")
    config = teacher_config(teacher)
    try:
        if chosen is None:
            return {"teacher": teacher, "seq_len": seq_len,
                    "methods": {topic: m.explain(teacher, config, seq_len) for topic, m in topics().items()}}
        return {"seq_len": seq_len, **chosen.explain(teacher, config, seq_len)}
    except ValueError as e:  # the default student does not fit this teacher (e.g. TinyBERT-4 on a narrow one)
        raise CompressError(f"cannot explain {method} for {teacher}: {e}") from None
