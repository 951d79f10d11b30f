"""Choosing the torch device: ``auto`` (CUDA when present, else CPU), ``cpu`` or ``cuda``."""

from __future__ import annotations

import torch

from compress.distributed import launched, world
from compress.errors import CompressError

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str = "auto") -> torch.device:
    """The device for ``name``; asking for ``cuda`` where there is none fails with one sentence."""
    if name not in DEVICES:
        raise CompressError(f"unknown device {name!r}; use one of {', '.join(DEVICES)}.")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise CompressError("--device cuda was asked for but no CUDA device is available; use --device cpu.")
    if name == "cuda" and launched():  # one GPU per process of a data-parallel run
        index = world(name).local_rank
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device(name)
