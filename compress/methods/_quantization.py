"""What the quantization methods share: their options, their explanation, and how one is declared.

Each quantization method is a tiny module (``int8.py``, ``bf16.py``, ...) calling :func:`quantization`
with its format; the engine is :mod:`compress.quantize` (backends, artefacts, the quantization run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compress.errors import CompressError
from compress.methods.registry import Transform, all_methods, register
from compress.models.config import EncoderConfig
from compress.quantize.formats import QuantMethod

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.


@dataclass
class QuantOptions:
    backend: str = field(default="auto", metadata={
        "help": "torch, onnxruntime, or auto (build each the method runs on, measure, keep the fastest)."})


@dataclass(frozen=True, kw_only=True)
class Quantization(Transform):
    """A quantization transform: its format (dtype, backends) is what the engine needs."""

    format: QuantMethod


def explain(name: str, tc: EncoderConfig, seq_len: int, options: Any = None) -> dict[str, Any]:
    from compress.reports.footprint import footprint, side_by_side

    teacher = footprint(tc, seq_len)
    int8 = footprint(tc, seq_len, weight_bytes=1.0, linear_only=True)
    bf16 = footprint(tc, seq_len, weight_bytes=2.0)
    formula = [
        "dynamic int8: w_int8 = round(w / s), s = max|w| / 127 per weight matrix; activations are "
        "quantized on the fly per batch, matrix products run in int8 and are rescaled to fp32",
        "bf16: every weight stored in 16 bits (8 exponent bits, like fp32, 7 mantissa bits)",
    ]
    notes = [
        "Quantization changes bytes and time, not parameters or FLOPs: the same multiplications "
        "run on narrower numbers.",
        "Dynamic int8 quantizes the linear layers only; embeddings and layer norms stay fp32, "
        f"which is why int8 is {teacher.size_bytes / int8.size_bytes:.2f}x smaller here, not 4x.",
        "Reference: int8 dynamic quantization of BERT on CPU is about 1.8x faster with under one "
        "point of accuracy lost; compress measures it on your CPU.",
    ]
    out = side_by_side("quantize", name, teacher, int8, formula, notes)
    out["precisions"] = {"fp32": teacher.size_bytes, "int8_dynamic": int8.size_bytes, "bf16": bf16.size_bytes}
    return out


def quantization(*, name: str, rank: int, dtype: str, backends: tuple[str, ...], label: str, summary: str,
                 why: str, calibrated: bool = False, follows_students: bool = False) -> Quantization:
    """Declare and register one quantization method. A half-precision one is compared by default only
    where the CPU computes in its format (elsewhere it runs emulated, slower than fp32)."""
    fmt = QuantMethod(name, dtype, backends, summary, calibrated)

    def in_compare() -> bool:
        from compress.bench.machine import cpu_features
        from compress.quantize.torch_backend import HALF_DTYPES, half_available

        return dtype not in HALF_DTYPES or half_available(dtype, cpu_features()) is None

    def check(config: Any, options: QuantOptions) -> None:
        from compress.runs.quantization import check_quantization

        check_quantization(config, fmt, options.backend)

    def run(config: Any, options: QuantOptions, show_progress: bool, pipeline: str | None) -> Any:
        from compress.runs.quantization import quantize_run

        return quantize_run(config, fmt, options.backend, show_progress, pipeline)

    return register(Quantization(
        name=name, rank=rank, family="quantization", label=label, summary=summary, options=QuantOptions,
        why=why, explain=explain, topic="quantize", in_compare=in_compare, format=fmt, takes="fp32",
        gives="quantized", follows_students=follows_students,
        check=check, run=run,
    ))


def quant_format(name: str) -> QuantMethod:
    """The format of the quantization method ``name`` (for the engine's tests and benchmarks)."""
    found = {m.name: m.format for m in all_methods("transform") if isinstance(m, Quantization)}
    try:
        return found[name]
    except KeyError:
        raise CompressError(f"unknown quantization method {name!r}; known: {', '.join(found)}.") from None
