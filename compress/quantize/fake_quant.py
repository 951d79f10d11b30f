"""Fake quantization: a PyTorch model computing as its quantized form will (ONNX Runtime's dynamic int8 or weight-only
int4 graph, or PyTorch's own dynamic int8), so it can be trained
(quantization-aware) with the rounding in its forward pass and then exported to a real quantized model that answers
as it did.

ONNX Runtime's dynamic int8 (``quantize_dynamic``, per channel, the graph `compress` writes) stores every weight a
``MatMul`` reads (each ``nn.Linear``, the heads' too) in int8, symmetric, one scale per output channel (max|w| / 127;
on 7 bits, max|w| / 64, on a CPU whose int8 kernels would saturate: :func:`compress.quantize.rounding.
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
from compress.quantize.rounding import (
    int4_rounded,
    int8_blocks_rounded,
    int8_rounded,
    int8_tensor_rounded,
    int8_weight_levels,
    uint7_rounded,
    uint8_rounded,
)


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
