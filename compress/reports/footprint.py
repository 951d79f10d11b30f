"""Parameters, bytes and FLOPs of a model shape, and the teacher-vs-student block every explanation shares.

Nothing here needs weights or a network: parameters are counted on the meta device, FLOPs analytically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.config import EncoderConfig


@dataclass(frozen=True)
class Footprint:
    """Parameters, bytes and FLOPs of one model shape at one precision."""

    config: EncoderConfig
    params: int                     # embeddings + encoder + pooler (as transformers counts a BertModel)
    params_by_component: dict[str, int]
    classifier_params: int
    flops: int                      # per sequence of seq_len tokens
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(), "params": self.params,
            "params_by_component": self.params_by_component,
            "classifier_params": self.classifier_params, "flops": self.flops,
            "size_bytes": self.size_bytes,
        }


def footprint(config: EncoderConfig, seq_len: int) -> Footprint:
    """A shape's footprint, its size in fp32 (what each quantization stores: compress.quantize.sizes)."""
    count = count_parameters(config)
    size = count.total * 4
    return Footprint(config, count.backbone, count.by_component, count.classifier,
                     flops_per_sequence(config, seq_len), size)


def _ratio(a: int, b: int) -> float:
    return round(a / b, 3) if b else float("inf")


def side_by_side(method: str, teacher_name: str, teacher: Footprint, student: Footprint,
                 formula: list[str], notes: list[str]) -> dict[str, Any]:
    """The explanation every method gives: both footprints, their ratios, the formula and notes."""
    return {
        "method": method,
        "teacher": {"name": teacher_name, **teacher.to_dict()},
        "student": student.to_dict(),
        "ratios": {
            "params": _ratio(teacher.params, student.params),
            "flops": _ratio(teacher.flops, student.flops),
            "size": _ratio(teacher.size_bytes, student.size_bytes),
        },
        "formula": formula,
        "notes": notes,
    }
