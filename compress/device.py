"""Choosing the torch device: ``auto`` (CUDA when present, else CPU), ``cpu`` or ``cuda``; and the device speed is
measured on (``--speed-device``)."""

from __future__ import annotations

import torch

from compress.distributed import launched, world
from compress.errors import CompressError
from compress.train_config import check_device_names


def resolve_device(name: str = "auto") -> torch.device:
    """The device for ``name``; asking for ``cuda`` where there is none fails with one sentence. On CUDA, fp32
    matrix products run in TF32 where the card has it (:func:`use_tf32`)."""
    check_device_names(name)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise CompressError("--device cuda was asked for but no CUDA device is available; use --device cpu.")
    if name == "cpu":
        return torch.device("cpu")
    device = torch.device("cuda")
    if launched():   # one GPU per process of a data-parallel run
        index = world(name).local_rank
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    use_tf32(device)
    return device


def has_tf32(device: torch.device) -> bool:
    """Whether ``device`` is a CUDA card with TF32 tensor cores (compute capability 8.0, Ampere, or later)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8


def fp8_unavailable() -> str | None:
    """None when this machine's GPU multiplies in float8 (compute capability 8.9, Ada and Hopper, or later), else why
    not (one sentence)."""
    if not torch.cuda.is_available():
        return "there is no CUDA device here."
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 9):
        return (f"this GPU ({torch.cuda.get_device_name()}, compute capability {major}.{minor}) has no float8 units "
                "(Ada and Hopper, 8.9 and 9.0, are the first).")
    return None


def use_tf32(device: torch.device) -> None:
    """fp32 matrix products and convolutions in TF32 on a card that has it: what ``fp32`` training means on CUDA
    (10 mantissa bits in the products, fp32 accumulation; PyTorch's default leaves them in full fp32)."""
    if has_tf32(device):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def check_speed_device(name: str) -> None:
    """One sentence, before any work, for a speed device that is unknown or absent here."""
    check_device_names("auto", name)
    if name == "cuda" and not torch.cuda.is_available():
        raise CompressError("--speed-device cuda was asked for but no CUDA device is available; "
                            "use --speed-device cpu.")
