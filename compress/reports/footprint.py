"""Parameters, bytes and FLOPs of a model shape, and the teacher-vs-student block every explanation shares.

Nothing here needs weights or a network: parameters are counted on the meta device, FLOPs analytically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder


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


def _linear_weight_elements(config: EncoderConfig) -> int:
    with torch.device("meta"):
        model = Encoder(config)
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def footprint(config: EncoderConfig, seq_len: int, weight_bytes: float = 4.0,
              linear_only: bool = False) -> Footprint:
    """A shape's footprint. ``weight_bytes`` applies to every parameter, or, with ``linear_only``,
    to the weights of linear layers while the rest stays fp32 (dynamic int8 quantization)."""
    count = count_parameters(config)
    if linear_only:
        linear = _linear_weight_elements(config)
        size = int(linear * weight_bytes + (count.total - linear) * 4)
    else:
        size = int(count.total * weight_bytes)
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
