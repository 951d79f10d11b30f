"""A quantization format as the method modules declare it, importable without torch (the registry, and so
``compress --help``, loads every method module); :mod:`compress.quantize.artefacts` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuantMethod:
    """A quantization format (the method modules in compress.methods declare theirs)."""

    name: str
    dtype: str
    backends: tuple[str, ...]   # in order of preference when nothing was measured
    summary: str
    calibrated: bool = False    # activation ranges fixed in advance on calibration batches (static int8)
    group_size: int | None = None   # weight-only formats (int4): weights sharing one scale, along the input channels
