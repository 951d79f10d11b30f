"""Durations and sizes as a user types them on the command line and reads them in answers: one grammar for every
option that takes a time (``compress search --budget``, ``compress cache prune --older-than``) or a size
(``--max-size``). Importable without torch."""

from __future__ import annotations

import re

from compress.errors import CompressError

_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_UNIT_NAMES = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile("".join(rf"(?:({_NUMBER}){unit})?" for unit in _DURATION_UNITS))
_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
               "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_duration(text: str, option: str, bare: str | None = None) -> float:
    """Seconds in ``text``: numbers with units d, h, m and s, largest first (``30d``, ``1.5h``, ``1h30m``, ``5400s``).
    A bare number counts in the unit ``bare`` (``--budget 90`` is minutes); without one it is refused as ambiguous."""
    value = re.sub(r"\s+", "", text.lower())
    if bare is not None and re.fullmatch(_NUMBER, value):
        return float(value) * _DURATION_UNITS[bare]
    parts = _DURATION.fullmatch(value)
    if not value or parts is None or not any(parts.groups()):
        example = "90m, 1h30m, 1.5h, 2d or 5400s" + (f" (a bare number is in {_UNIT_NAMES[bare]})" if bare else "")
        raise CompressError(f"{option} takes a time such as {example}, not {text!r}.")
    return sum(float(number) * length for number, length in zip(parts.groups(), _DURATION_UNITS.values(), strict=True)
               if number)


def parse_size(text: str, option: str = "--max-size") -> int:
    """Bytes in ``text``: a number and an optional unit, K, M, G, T (powers of 1000) or KiB, MiB, GiB, TiB."""
    match = re.fullmatch(rf"\s*({_NUMBER})\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in _SIZE_UNITS:
        raise CompressError(f"{option} takes a size such as 20G, 500M or 2GiB (0 or more), not {text!r}.")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])


def human_size(size: int) -> str:
    """``size`` bytes for a reader: 512 B, 4.1 KB, 23.6 MB, 1.2 GB (powers of 1000)."""
    if size < 1000:
        return f"{size} B"
    for unit in ("KB", "MB", "GB", "TB"):
        size /= 1000
        if size < 999.95 or unit == "TB":
            return f"{size:.1f} {unit}"
    raise AssertionError("unreachable")


def human_age(seconds: float) -> str:
    """``seconds`` for a reader: 40 s, 12 min, 5 h, 3 d."""
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit}"
    return f"{seconds:.0f} s"
