"""Reading a label value as a number: what tells a regression's targets from class names in a file."""

from __future__ import annotations


def number(value: object) -> float | None:
    """``value`` as a number (a number, or text that reads as one; a bool is not one), or None."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)   # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
