"""Weights and inputs as each runtime rounds them, in PyTorch: the arithmetic every other module of the quantization
engine agrees on. :mod:`compress.quantize.fake_quant` trains through these roundings, :mod:`compress.quantize.
bit_allocation` prices each matrix's loss with them, and :mod:`compress.quantize.onnx_backend` writes its int8 weights
on the levels :func:`int8_weight_levels` gives, so the three cannot drift apart.

* ONNX Runtime's dynamic int8: a linear weight symmetric per output channel (:func:`int8_rounded`), a table in uint8
  (:func:`uint8_rounded`), each matrix's input in uint8 over its range as it comes (:func:`uint8_rounded`).
* ONNX Runtime's weight-only int4: one scale per group of input channels (:func:`int4_rounded`), the matmul's input
  in int8 per group (:func:`int8_blocks_rounded`).
* PyTorch's dynamic int8: one scale per matrix (:func:`int8_tensor_rounded`), the input on 7 bits
  (:func:`uint7_rounded`).
"""

from __future__ import annotations

import torch

# ONNX Runtime's x86 int8 kernels multiply uint8 inputs by int8 weights. With VNNI (AVX512-VNNI, AVX-VNNI) or AMX they
# add the products in 32 bits; without (AVX2, AVX-512F alone) VPMADDUBSW adds each pair in 16 bits and saturates there
# (2 x 255 x 127 > 32,767). On such a CPU the weights are stored on 7 bits (-64..64, ``reduce_range``), which cannot
# saturate (2 x 255 x 64 < 32,767), as ONNX Runtime's documentation advises. Measured on a 2-core AVX2 EPYC with
# tests/test_quantization_aware.py's 4-layer encoder: with 8-bit weights the runtime's logits were 15-18x further from
# the exact int8 product than the rounding itself moves them; with 7-bit ones, within 3e-8.
WIDE_INT8_SUMS = ("avx512_vnni", "avx_vnni", "amx_int8")


def int8_weight_levels() -> int:
    """The largest magnitude of ONNX Runtime's int8 weights written on this CPU: 127, or 64 on an x86 CPU whose int8
    kernels add products in 16 bits (no VNNI, no AMX: see :data:`WIDE_INT8_SUMS`)."""
    import platform

    from compress.bench.machine import cpu_features

    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return 127
    features = cpu_features()
    return 127 if any(features.get(name) for name in WIDE_INT8_SUMS) else 64


def int4_rounded(weight: torch.Tensor, group_size: int) -> torch.Tensor:
    """``weight`` as ONNX Runtime's symmetric 4-bit format stores it: one scale per ``group_size`` consecutive
    entries of each row (a linear weight's input channels, a table's columns), the entry of largest magnitude
    mapped to -8 (``s = w_max / -8``), every entry to ``round(w / s)`` clipped to -8..7."""
    rows, cols = weight.shape
    w = torch.nn.functional.pad(weight.detach().float(), (0, -cols % group_size)).reshape(rows, -1, group_size)
    scale = w.gather(-1, w.abs().argmax(-1, keepdim=True)) / -8
    q = torch.where(scale == 0, 0, w / torch.where(scale == 0, 1, scale)).round().clamp(-8, 7)
    return (q * scale).reshape(rows, -1)[:, :cols]


def int8_rounded(weight: torch.Tensor, table: bool, levels: int | None = None) -> torch.Tensor:
    """``weight`` as ONNX Runtime's dynamic int8 stores it: a linear weight symmetric with one scale per output
    channel (max|w| / L, every entry rounded to -L..L, L = ``levels``: 127, or 64 where this CPU's kernels would
    saturate, :func:`int8_weight_levels`), a table in uint8 with one scale and zero
    point over a range that holds 0."""
    w = weight.detach().float()
    if table:
        return uint8_rounded(w)
    levels = int8_weight_levels() if levels is None else levels
    scale = w.abs().amax(1, keepdim=True) / levels
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return (w / scale).round().clamp(-levels, levels) * scale


def uint8_rounded(x: torch.Tensor, over: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` through ``DynamicQuantizeLinear`` and back: uint8 over ``[min(x, 0), max(x, 0)]``, scale
    ``(max - min) / 255``, zero point ``round(-min / scale)``, every entry ``round(x / scale) + zero`` clipped to
    0..255 (ties to even, as both round). With ``over``, the range is ``over``'s: ``x`` holds some of its entries
    (the rows of a table that a batch reads)."""
    x = x.detach().float()
    over = x if over is None else over.detach().float()
    low, high = over.min().clamp(max=0.0), over.max().clamp(min=0.0)
    scale = (high - low) / 255
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    zero = (-low / scale).round().clamp(0, 255)
    return ((x / scale).round() + zero).clamp(0, 255).sub(zero) * scale


SMALLEST_TORCH_SCALE = 6.1e-5   # PyTorch raises a smaller activation scale to this (its quant_utils)


def uint7_rounded(x: torch.Tensor) -> torch.Tensor:
    """``x`` as PyTorch's dynamic int8 linear quantizes its input (``ChooseQuantizationParams`` with the reduced
    range): over ``[min(x, 0), max(x, 0)]`` on 0..127, the scale ``(max - min) / 127`` worked in double and kept in
    float, zero point ``round(-min / scale)``, every entry ``round(x / scale) + zero``."""
    x = x.detach().float()
    low, high = x.min().clamp(max=0.0).double(), x.max().clamp(min=0.0).double()
    scale = (high - low) / 127
    scale = torch.where(scale.float() == 0, torch.full_like(scale, 0.1), scale)
    zero = (-low / scale).round().clamp(0, 127).float()
    scale = scale.clamp(min=SMALLEST_TORCH_SCALE).float()
    return ((x / scale).round() + zero).clamp(0, 255).sub(zero) * scale


def int8_tensor_rounded(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` as PyTorch's dynamic int8 stores it: symmetric, one scale for the whole matrix, ``max|w| / 127.5``
    (the range -128..127 spread over both signs), every entry ``round(w * (1 / s))`` (its multiplication by the
    inverse, which rounds a largest negative weight to -127, not -128) clipped to -128..127."""
    w = weight.detach().float()
    scale = w.abs().max() / 127.5
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return (w * (1 / scale)).round().clamp(-128, 127) * scale


def int8_blocks_rounded(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """``x`` as ONNX Runtime's 4-bit matmul quantizes its input at accuracy level 4: each row's entries in groups of
    ``group_size``, each group in int8, symmetric, scale max|x| / 127 (``round(x * 127 / max)``)."""
    x = x.detach().float()
    width = x.shape[-1]
    blocks = torch.nn.functional.pad(x, (0, -width % group_size)).unflatten(-1, (-1, group_size))
    largest = blocks.abs().amax(-1, keepdim=True)
    inverse = torch.where(largest == 0, 0, 127 / torch.where(largest == 0, 1, largest))
    rounded = (blocks * inverse).round().clamp(-127, 127) * (largest / 127)
    return rounded.flatten(-2)[..., :width]
