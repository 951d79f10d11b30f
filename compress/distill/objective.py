"""A stage's loss as a function of (student, batch): the teacher runs once per batch, or not at all.

The objective asks the teacher only for what its terms read (logits; hidden states; attention
scores or probabilities, which switch the teacher to the explicit attention path), and reads
teacher logits from the batch when they were cached for the dataset (``teacher_logits``).
Projections W (student width -> teacher width) are created here when widths differ and are
trained with the student.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from compress.distill.layer_maps import LayerMap, teacher_layers
from compress.distill.losses import LOSSES, make_projection
from compress.distill.recipe import LossTerm, Stage
from compress.errors import CompressError
from compress.models.encoder import Encoder, EncoderOutput
from compress.training import Batch, model_inputs, to_device

_PROJECTED = {"embeddings": "embedding", "hidden_states": "hidden"}


class DistillationObjective(nn.Module):
    """Sum of a stage's weighted loss terms; an ``nn.Module`` only to own the projections."""

    def __init__(self, stage: Stage, teacher: Encoder, student: Encoder, layer_map: LayerMap) -> None:
        super().__init__()
        self.stage = stage
        self.teacher = teacher.eval().requires_grad_(False)
        s, t = student.config, teacher.config
        self.hidden_map = teacher_layers(layer_map, s.num_layers, t.num_layers)  # index into hidden_states
        reads = stage.reads
        self.needs_hidden = bool(reads & {"embeddings", "hidden_states"})
        self.needs_attention = bool(reads & {"attention_scores", "attention_probs"})
        self.needs_teacher_forward = self.needs_hidden or self.needs_attention
        # Different head counts are allowed: attention losses then compare head-averaged maps.
        self.projections = nn.ModuleDict()
        for term in stage.terms:
            kind = _PROJECTED.get(term.reads)
            if kind is None or s.hidden_size == t.hidden_size:
                continue
            if LOSSES[term.loss].uses_projection:
                if kind not in self.projections:
                    self.projections[kind] = make_projection(s.hidden_size, t.hidden_size)
            else:
                raise CompressError(
                    f"loss {term.loss} compares hidden states of equal width only (student {s.hidden_size}, "
                    f"teacher {t.hidden_size}); use hidden_mse, which learns a projection."
                )

    def teacher_outputs(self, batch: Batch) -> EncoderOutput:
        with torch.no_grad():
            return self.teacher(**model_inputs(batch), output_hidden_states=self.needs_hidden,
                                output_attentions=self.needs_attention)

    def _pairs(self, term: LossTerm, student: EncoderOutput, teacher: EncoderOutput) -> list[tuple[Any, Any]]:
        reads = term.reads
        if reads == "embeddings":
            return [(student.hidden_states[0], teacher.hidden_states[0])]
        if reads == "hidden_states":
            pairs = [(student.hidden_states[m], teacher.hidden_states[g]) for m, g in enumerate(self.hidden_map) if m]
        else:
            s_maps = getattr(student, reads)
            t_maps = getattr(teacher, reads)
            pairs = [(s_maps[m - 1], t_maps[g - 1]) for m, g in enumerate(self.hidden_map) if m]
        return pairs[-1:] if term.layers == "last" else pairs

    @torch.no_grad()
    def mean_loss(self, student: Encoder, batches: Iterable[Batch], device: torch.device) -> dict[str, float]:
        """The objective averaged over examples of ``batches`` (a stage's dev score when it has no classifier)."""
        student.eval()
        total, count = 0.0, 0
        for batch in batches:
            batch = to_device(batch, device)
            total += float(self(student, batch)[0]) * len(batch["input_ids"])
            count += len(batch["input_ids"])
        return {"loss": total / max(1, count)}

    def forward(self, student: Encoder, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        out = student(**model_inputs(batch), output_hidden_states=self.needs_hidden,
                      output_attentions=self.needs_attention)
        teacher: EncoderOutput | None = None
        if self.needs_teacher_forward or "teacher_logits" not in batch:
            teacher = self.teacher_outputs(batch)
        teacher_logits = batch["teacher_logits"] if "teacher_logits" in batch else teacher.logits
        mask = batch["attention_mask"]
        total = torch.zeros((), device=out.logits.device)
        parts: dict[str, float] = {}
        for term in self.stage.terms:
            spec = LOSSES[term.loss]
            if spec.uses_labels:
                value = spec.fn(out.logits, batch["labels"])
            elif term.reads == "logits":
                value = spec.fn(out.logits, teacher_logits, **term.options)
            else:
                # the term's options, the mask, and the learned projection where the loss takes one
                kwargs: dict[str, float | bool | torch.Tensor | nn.Module] = dict(term.options, attention_mask=mask)
                kind = _PROJECTED.get(term.reads)
                if spec.uses_projection and kind in self.projections:
                    kwargs["projection"] = self.projections[kind]
                value = sum(spec.fn(s, t, **kwargs) for s, t in self._pairs(term, out, teacher))
            total = total + term.weight * value
            parts[term.loss] = float(value.detach()) if torch.is_tensor(value) else float(value)
        return total, parts
