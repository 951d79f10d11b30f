"""Fake quantization: a PyTorch model computing as its quantized form will (ONNX Runtime's dynamic int8 or weight-only
int4 graph, or PyTorch's own dynamic int8), so it can be trained
(quantization-aware) with the rounding in its forward pass and then exported to a real quantized model that answers
as it did.

ONNX Runtime's dynamic int8 (``quantize_dynamic``, per channel, the graph `compress` writes) stores every weight a
``MatMul`` reads (each ``nn.Linear``, the heads' too) in int8, symmetric, one scale per output channel (max|w| / 127;
on 7 bits, max|w| / 64, on a CPU whose int8 kernels would saturate: :func:`compress.quantize.onnx_backend.
int8_weight_levels`), and every embedding table in uint8 with one scale and zero point; at run time each such
``MatMul``'s input is quantized by ``DynamicQuantizeLinear``: uint8, one scale and zero point over the whole
tensor's range stretched to hold 0, ``(max - min) / 255``. ``MatMulInteger`` then sums the integer products exactly, so the graph computes
``dequantized(input) @ dequantized(weight)``: what :class:`FakeQuantized` makes the PyTorch model compute, with the
rounding passed straight through in the backward pass (the straight-through estimator of Bengio et al. 2013, as
Q8BERT trains with). The products of two activations (attention's scores and context) stay in fp32 there and here.

PyTorch's dynamic int8 (``torch.ao``'s ``quantize_dynamic``, its x86 kernels) stores every ``nn.Linear`` weight, the
heads' too, in int8 with one scale for the whole matrix (symmetric, ``max|w| / 127.5``, -128..127) and leaves the tables
in fp32; each linear's input is quantized as it comes over its range stretched to hold 0, on 7 bits (0..127: the
kernels' reduced range, which keeps their 16-bit sums from overflowing): ``FakeQuantized(..., backend="torch")``.

Its weight-only int4 (``MatMulNBits``, ``GatherBlockQuantized``) stores every linear weight (the heads' too: compress
rewrites their ``Gemm`` as ``MatMul`` for it) and every embedding table in 4 bits, one scale per group of input
channels (a table's columns); at the accuracy level `compress` asks for, its 4-bit matmul quantizes each input to int8
in the same groups, symmetric (max|x| / 127 per group of each row): :class:`FakeQuantized` with ``group_size`` does
both.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

from compress.models.encoder import Encoder
from compress.quantize.onnx_backend import int8_weight_levels


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
    saturate, :func:`compress.quantize.onnx_backend.int8_weight_levels`), a table in uint8 with one scale and zero
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


def _straight_through(x: torch.Tensor, rounded: torch.Tensor) -> torch.Tensor:
    """``rounded``'s value with ``x``'s gradient."""
    return x + (rounded.to(x.dtype) - x).detach()


class _Rows(nn.Module):
    def __init__(self, levels: int) -> None:
        super().__init__()
        self.levels = levels

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return _straight_through(weight, int8_rounded(weight, table=False, levels=self.levels))


class _Matrix(nn.Module):
    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return _straight_through(weight, int8_tensor_rounded(weight))


class _TableRows:
    """A table's rounding applied to the rows a batch reads rather than to the whole table every step: the same
    numbers (each entry's rounding depends on the table's range, int8, or on its own row's groups, int4) at a
    fraction of the work for a 30,522-row vocabulary."""

    def __init__(self, group_size: int | None) -> None:
        self.group_size = group_size

    def __call__(self, module: nn.Embedding, args: tuple[torch.Tensor, ...], rows: torch.Tensor) -> torch.Tensor:
        if self.group_size is None:
            rounded = uint8_rounded(rows, over=module.weight)
        else:
            rounded = int4_rounded(rows.reshape(-1, rows.shape[-1]), self.group_size).reshape(rows.shape)
        return _straight_through(rows, rounded)


class _Groups(nn.Module):
    def __init__(self, group_size: int) -> None:
        super().__init__()
        self.group_size = group_size

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return _straight_through(weight, int4_rounded(weight, self.group_size))


def _input_rounded(module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return (_straight_through(args[0], uint8_rounded(args[0])), *args[1:])


def _input_rounded_7_bits(module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return (_straight_through(args[0], uint7_rounded(args[0])), *args[1:])


class _InputBlocks:
    def __init__(self, group_size: int) -> None:
        self.group_size = group_size

    def __call__(self, module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return (_straight_through(args[0], int8_blocks_rounded(args[0], self.group_size)), *args[1:])


class FakeQuantized:
    """``model`` made to compute as its ONNX Runtime graph in dynamic int8 does (every linear weight per output channel,
    every table per tensor, every linear's input per tensor, as it comes) or, with ``group_size``, in int4 (every
    weight and every table, per group of ``group_size`` input channels, and the matrices' inputs in int8 per group),
    or, with ``backend="torch"``, as PyTorch's dynamic int8 does (every linear weight per matrix, its input per tensor
    on 7 bits, the tables in fp32), until :meth:`remove`, which leaves its fp32 weights, trained or not, as the real
    quantizer will read them."""

    def __init__(self, model: Encoder, group_size: int | None = None, backend: str = "onnxruntime") -> None:
        if model.config.relaxed:
            raise ValueError("relaxed sharing forms each layer's matrix from the shared one and its delta as it runs, "
                             "a product the quantized runtimes do not quantize: fake quantization does not model it")
        if backend not in ("onnxruntime", "torch") or (backend == "torch" and group_size is not None):
            raise ValueError(f"fake quantization models ONNX Runtime's int8 and int4 and PyTorch's int8, not "
                             f"{backend} with group size {group_size}")
        self.model = model
        self._hooks = []
        levels = int8_weight_levels()   # decided once: every matrix as the export on this CPU will store it
        for module in model.modules():
            if backend == "torch":
                if isinstance(module, nn.Linear):
                    parametrize.register_parametrization(module, "weight", _Matrix())
                    self._hooks.append(module.register_forward_pre_hook(_input_rounded_7_bits))
            elif isinstance(module, nn.Embedding):
                self._hooks.append(module.register_forward_hook(_TableRows(group_size)))
            elif isinstance(module, nn.Linear) and group_size is None:
                parametrize.register_parametrization(module, "weight", _Rows(levels))
                self._hooks.append(module.register_forward_pre_hook(_input_rounded))
            elif isinstance(module, nn.Linear):
                parametrize.register_parametrization(module, "weight", _Groups(group_size))
                self._hooks.append(module.register_forward_pre_hook(_InputBlocks(group_size)))

    def remove(self) -> Encoder:
        """The model as it was, but for what training changed: plain fp32 modules again."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        for module in self.model.modules():
            if parametrize.is_parametrized(module, "weight"):
                parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
        return self.model
