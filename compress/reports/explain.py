"""Why each method saves what it saves, computed on the teacher's real shape.

:func:`explain` returns plain data (JSON-ready); the CLI renders it with rich. Nothing here needs
weights or a network: parameters are counted on the meta device, FLOPs analytically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from compress.errors import CompressError
from compress.models.accounting import count_parameters, flops_per_sequence
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.models.presets import PAPER_ABLATION, PAPER_CONFIGS, PAPER_PARAMS
from compress.students import albert_config, distilbert_config, tinybert_config
from compress.teachers.registry import teacher_config

METHODS = ("albert", "distilbert", "tinybert", "quantize")
DEFAULT_SEQ_LEN = 128


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


def _comparison(method: str, teacher_name: str, teacher: Footprint, student: Footprint,
                formula: list[str], notes: list[str]) -> dict[str, Any]:
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


def _explain_albert(name: str, tc: EncoderConfig, seq_len: int) -> dict[str, Any]:
    sc = albert_config(tc)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    v, e, h, l = tc.vocab_size, sc.embedding_size, tc.hidden_size, tc.num_layers
    formula = [
        f"factorized embedding: V*H = {v}*{h} = {v * h:,}  ->  V*E + E*H = {v}*{e} + {e}*{h} = {v * e + e * h:,}",
        f"cross-layer sharing (all): L x (attention + FFN) = {l} blocks  ->  1 block run {l} times",
    ]
    notes = [
        "Sharing cuts parameters, not FLOPs: every layer still runs, so the shared block is applied "
        f"{l} times; the student computes {student.flops / teacher.flops:.3f}x the teacher's FLOPs "
        "(the E->H projection even adds a little) and is not faster at inference.",
        "Memory for weights and the size on disk shrink with the parameters; activations do not.",
    ]
    sharings = ("all", "attention", "ffn", "none")
    ablation = [
        {"embedding_size": emb, "sharing": sharing,
         "params": count_parameters(albert_config(tc, emb, sharing)).backbone}
        for emb in dict.fromkeys((h, e))
        for sharing in sharings
    ]
    base = PAPER_CONFIGS["bert-base"]
    paper_ablation = [
        {"embedding_size": emb, "sharing": sharing, "paper": PAPER_ABLATION[emb, sharing],
         "params": count_parameters(albert_config(base, emb, sharing)).backbone}
        for emb, sharing in PAPER_ABLATION
    ]
    paper = [
        {"model": key, "params": count_parameters(cfg).backbone, "paper": PAPER_PARAMS[key],
         "layers": cfg.num_layers, "hidden": cfg.hidden_size, "embedding": cfg.embedding_size,
         "sharing": cfg.sharing}
        for key, cfg in PAPER_CONFIGS.items()
    ]
    out = _comparison("albert", name, teacher, student, formula, notes)
    out["ablation"] = ablation
    out["paper_ablation"] = paper_ablation
    out["paper_table2"] = paper
    return out


def _explain_distilbert(name: str, tc: EncoderConfig, seq_len: int) -> dict[str, Any]:
    sc = distilbert_config(tc)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    formula = [
        f"layers: L = {tc.num_layers}  ->  {sc.num_layers} (every other teacher layer), width H = {tc.hidden_size} kept",
        "loss = alpha * KL(soft targets at T) + beta * CE(gold labels) + gamma * (1 - cos(hidden states))",
    ]
    notes = [
        "Halving the depth halves the encoder's parameters and FLOPs; the embeddings are untouched, "
        f"so the whole model keeps {student.params / teacher.params:.0%} of the parameters.",
        "DistilBERT paper (BERT-base): 40% fewer parameters, 60% faster, 97% of the GLUE score.",
    ]
    return _comparison("distilbert", name, teacher, student, formula, notes)


def _explain_tinybert(name: str, tc: EncoderConfig, seq_len: int) -> dict[str, Any]:
    sc = tinybert_config(tc)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    formula = [
        f"shape: L {tc.num_layers} -> {sc.num_layers}, H {tc.hidden_size} -> {sc.hidden_size}, "
        f"FFN {tc.ffn_size} -> {sc.ffn_size}, heads {tc.num_heads} -> {sc.num_heads}",
        "layer map g(m) = m * N / M; losses: embedding and hidden MSE through a learned projection W, "
        "attention MSE on pre-softmax scores, soft cross-entropy on the logits",
    ]
    notes = [
        "Narrower and shallower: parameters and FLOPs both fall, roughly with L * H^2 in the encoder "
        "and with H in the embeddings.",
        "TinyBERT paper (TinyBERT-4 vs BERT-base): 7.5x smaller, 9.4x faster, >96.8% of the GLUE score.",
    ]
    return _comparison("tinybert", name, teacher, student, formula, notes)


def _explain_quantize(name: str, tc: EncoderConfig, seq_len: int) -> dict[str, Any]:
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
    out = _comparison("quantize", name, teacher, int8, formula, notes)
    out["precisions"] = {"fp32": teacher.size_bytes, "int8_dynamic": int8.size_bytes, "bf16": bf16.size_bytes}
    return out


_EXPLAINERS = {
    "albert": _explain_albert,
    "distilbert": _explain_distilbert,
    "tinybert": _explain_tinybert,
    "quantize": _explain_quantize,
}


def explain(method: str, teacher: str, seq_len: int = DEFAULT_SEQ_LEN) -> dict[str, Any]:
    """The explanation of ``method`` (or ``all``) for ``teacher``, as JSON-ready data."""
    if method != "all" and method not in _EXPLAINERS:
        raise CompressError(f"unknown method {method!r}; known: {', '.join(METHODS)}, all.")
    if seq_len <= 0:
        raise CompressError(f"--seq-len must be a positive integer, got {seq_len}.")
    config = teacher_config(teacher)
    try:
        if method == "all":
            return {"teacher": teacher, "seq_len": seq_len,
                    "methods": {m: _EXPLAINERS[m](teacher, config, seq_len) for m in METHODS}}
        return {"seq_len": seq_len, **_EXPLAINERS[method](teacher, config, seq_len)}
    except ValueError as e:  # the default student does not fit this teacher (e.g. TinyBERT-4 on a narrow one)
        raise CompressError(f"cannot explain {method} for {teacher}: {e}") from None

