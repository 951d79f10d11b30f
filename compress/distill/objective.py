"""A stage's loss as a function of (student, batch): the teacher runs once per batch, or not at all.

The objective asks the teacher only for what its terms read (logits; hidden states; attention
scores or probabilities, which switch the teacher to the explicit attention path), and reads them
from the batch instead when they were stored for the dataset (``teacher_logits``, ``teacher_hidden``,
``teacher_attention``: :mod:`compress.distill.teacher_targets`; :meth:`DistillationObjective.target_spec`
says which layers).
Projections W (student width -> teacher width) are created here when widths differ and are
trained with the student; a student cut from its teacher's width (``channels``, the teacher's channels it kept)
instead compares its states with the teacher's at those channels, with no projection.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from compress.distill.layer_maps import LayerMap, teacher_layers
from compress.distill.losses import LOSSES, make_projection
from compress.distill.recipe import LossTerm, Stage
from compress.distill.teacher_targets import INDEX, StoredTargets, TargetSpec
from compress.errors import CompressError
from compress.models.encoder import Encoder, EncoderOutput
from compress.training import Batch, model_inputs, to_device

_PROJECTED = {"embeddings": "embedding", "hidden_states": "hidden"}


def teacher_runs_live(stage: Stage) -> bool:
    """Whether training ``stage`` runs the teacher on every batch: its terms read two kinds of attention map, which
    are never stored (otherwise the teacher's outputs are read from their cache, :meth:`target_spec`)."""
    return len(stage.reads - set(_PROJECTED) - {"logits"}) > 1


class DistillationObjective(nn.Module):
    """Sum of a stage's weighted loss terms; an ``nn.Module`` only to own the projections."""

    def __init__(self, stage: Stage, teacher: Encoder, student: Encoder, layer_map: LayerMap,
                 channels: tuple[int, ...] | None = None) -> None:
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
        if channels is not None and (len(channels) != s.hidden_size or max(channels) >= t.hidden_size):
            raise ValueError(f"the student's {s.hidden_size} channels cannot be {len(channels)} of the teacher's "
                             f"{t.hidden_size}.")
        self.channels = channels
        for term in stage.terms:
            kind = _PROJECTED.get(term.reads)
            if kind is None or s.hidden_size == t.hidden_size or channels is not None:
                continue
            if LOSSES[term.loss].uses_projection:
                if kind not in self.projections:
                    self.projections[kind] = make_projection(s.hidden_size, t.hidden_size)
            else:
                raise CompressError(
                    f"loss {term.loss} compares hidden states of equal width only (student {s.hidden_size}, "
                    f"teacher {t.hidden_size}); use hidden_mse, which learns a projection."
                )
        self.targets = self.target_spec()
        self.resident: StoredTargets | None = None   # targets kept on the training device (teacher_targets.INDEX)

    def teacher_outputs(self, batch: Batch) -> EncoderOutput:
        with torch.no_grad():
            return self.teacher(**model_inputs(batch), output_hidden_states=self.needs_hidden,
                                output_attentions=self.needs_attention)

    def _layers(self, term: LossTerm) -> list[tuple[int, int]]:
        """(student, teacher) indices the term compares: into ``hidden_states`` (0: the embedding output) for the
        hidden terms, into the attention maps for the attention terms."""
        if term.reads == "embeddings":
            return [(0, 0)]
        shift = 0 if term.reads == "hidden_states" else 1
        pairs = [(m - shift, g - shift) for m, g in enumerate(self.hidden_map) if m]
        return pairs[-1:] if term.layers == "last" else pairs

    def target_spec(self) -> TargetSpec | None:
        """What the terms read of the teacher besides logits (None: two kinds of attention map, never stored)."""
        hidden, layers, kinds = set(), set(), set()
        for term in self.stage.terms:
            if term.reads in _PROJECTED:
                hidden.update(g for _, g in self._layers(term))
            elif term.reads != "logits":
                kinds.add(term.reads)
                layers.update(g for _, g in self._layers(term))
        if teacher_runs_live(self.stage):
            return None
        return TargetSpec(tuple(sorted(hidden)), next(iter(kinds), None), tuple(sorted(layers)))

    def stored_outputs(self, batch: Batch) -> SimpleNamespace | None:
        """The teacher's outputs read from the batch's stored targets, or None when the batch lacks what the
        terms read: ``hidden_states`` and the attention maps as {index: tensor}, as :meth:`_pairs` reads them."""
        spec = self.targets
        if self.resident is not None and INDEX in batch:
            batch = batch | self.resident.gather(batch[INDEX], batch["input_ids"].shape[1])
        if spec is None or "teacher_logits" not in batch or (spec.hidden and "teacher_hidden" not in batch) \
                or (spec.attention and "teacher_attention" not in batch):
            return None
        out = SimpleNamespace(logits=batch["teacher_logits"])
        if spec.hidden:
            out.hidden_states = dict(zip(spec.hidden, batch["teacher_hidden"].unbind(1), strict=True))
        if spec.attention:
            setattr(out, spec.attention, dict(zip(spec.layers, batch["teacher_attention"].unbind(1), strict=True)))
        return out

    def _pairs(self, term: LossTerm, student: EncoderOutput, teacher: Any) -> list[tuple[Any, Any]]:
        if term.reads in _PROJECTED:
            pairs = [(student.hidden_states[m], teacher.hidden_states[g]) for m, g in self._layers(term)]
            if self.channels is None:
                return pairs
            kept = torch.tensor(self.channels, device=pairs[0][1].device)
            return [(s, t.index_select(-1, kept)) for s, t in pairs]
        s_maps, t_maps = getattr(student, term.reads), getattr(teacher, term.reads)
        return [(s_maps[m], t_maps[g]) for m, g in self._layers(term)]

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
        teacher = self.stored_outputs(batch) or self.teacher_outputs(batch)
        teacher_logits = teacher.logits
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
