"""Importance scores: how much the loss depends on each attention head, FFN neuron and layer.

All scores are measured on training examples in eval mode (no dropout), against a target: the gold
``labels`` (the default: what the task needs, as Michel et al. score heads) or the model's own
``predictions`` (argmax of its logits: what the model does, mistakes included; usable without labels).

heads    Michel et al. 2019: a gate xi_h multiplies head h's context; I_h = E_x |dL/dxi_h| at xi = 1,
         the absolute gradient taken per batch and averaged over batches, then normalised per block
         (I_h / ||I_block||_2) so that blocks whose gradients are larger overall do not dominate a
         global ranking. Pruning a shared block prunes it everywhere, so a shared block's gate gets
         the gradient of every layer that runs it.
neurons  first-order Taylor (Molchanov et al. 2017): removing neuron i changes the loss by about
         -sum_w w * dL/dw over the weights it owns (its row of the intermediate matrix and bias, its
         column of the output matrix); the score is |that sum| per batch, averaged over batches.
layers   the increase of the mean loss when layer l is skipped (its gate set to 0), one forward
         pass over the examples per layer; the "drop the top k" baseline (Sajjad et al.) needs no score.
channels first-order Taylor on the residual stream: at every layer norm's output x (the embeddings', or the E -> H
         projection's output where the embedding is factorized, and each block's), zeroing channel c changes the loss
         by about -sum over the real tokens of x_c dL/dx_c; the score is |that sum| per output and batch, summed
         over the outputs and averaged over batches. Minitron ranks by activation magnitude (mean |x_c|)
         instead; on MR the Taylor score kept 0.9 to 4.8 dev points more after a cut without recovery (384 -> 320, 288, 256 channels of
         the bundled teacher; benchmarks/width_scores.py). It costs no pass of its own (the gradient passes above).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import torch

from compress.distill.losses import hard_ce
from compress.models.encoder import Encoder, Gates
from compress.training import Batch, model_inputs, to_device

if TYPE_CHECKING:
    from compress.jsontypes import JSONObject

TARGETS = ("labels", "predictions")


@dataclass
class Importance:
    """Scores of one model's parts (indices are its blocks and layers) and how they were measured."""

    heads: list[list[float]]        # per attention block, normalised per block
    neurons: list[list[float]]      # per FFN block
    layers: list[float]             # loss increase when the layer is skipped
    base_loss: float
    examples: int
    target: str
    channels: list[float] | None = None   # per channel of the hidden size (None: scored before widths were cut)

    def to_dict(self) -> JSONObject:
        return asdict(self)


def _loss(model: Encoder, batch: Batch, target: str, gates: Gates | None = None) -> torch.Tensor:
    logits = model(**model_inputs(batch), gates=gates).logits
    labels = batch["labels"] if target == "labels" else batch["predicted"]
    return hard_ce(logits, labels)


def score(model: Encoder, batches: Iterable[Batch], device: torch.device | str = "cpu",
          target: str = "labels", tick: Callable[[], None] | None = None) -> Importance:
    """Head, neuron and layer importance of ``model`` over ``batches`` (collated training examples);
    ``tick`` is called after each of the (1 + layers) * batches passes, for a progress bar."""
    tick = tick or (lambda: None)
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}.")
    config = model.config
    was_training = model.training
    wanted = [p.requires_grad for p in model.parameters()]
    model.eval().requires_grad_(True)   # the Taylor scores need every weight's gradient
    batches = [to_device(b, device) for b in batches]
    if target == "predictions":
        with torch.no_grad():
            for b in batches:
                logits = model(**model_inputs(b)).logits
                b["predicted"] = logits[:, 0] if logits.shape[-1] == 1 else logits.argmax(-1)   # a regression's value

    head_gates = [torch.ones(config.heads_of(b), device=device, requires_grad=True)
                  for b in range(config.num_attention_blocks)]
    heads = [torch.zeros(config.heads_of(b), device=device) for b in range(config.num_attention_blocks)]
    neurons = [torch.zeros(config.ffn_size_of(b), device=device) for b in range(config.num_ffn_blocks)]
    total, examples = 0.0, 0
    channels = torch.zeros(config.hidden_size, device=device)
    for batch in batches:
        model.zero_grad(set_to_none=True)
        with layer_norm_outputs(model) as outputs:
            loss = _loss(model, batch, target, Gates(heads=head_gates))
        parameters = list(model.parameters())
        grads = torch.autograd.grad(loss, head_gates + parameters + outputs, allow_unused=True)
        for acc, g in zip(heads, grads[:len(head_gates)], strict=True):
            if g is not None:
                acc += g.abs()
        named = dict(zip((n for n, _ in model.named_parameters()),
                         grads[len(head_gates):len(head_gates) + len(parameters)], strict=True))
        real = batch["attention_mask"].bool()
        for x, g in zip(outputs, grads[len(head_gates) + len(parameters):], strict=True):
            channels += (x.detach()[real] * g[real]).float().sum(dim=0).abs()
        for b, block in enumerate(model.ffn):
            if block.width:
                neurons[b] += _taylor(block, named, f"ffn.{b}.").abs()
        total += float(loss.detach()) * len(batch["input_ids"])
        examples += len(batch["input_ids"])
        tick()
    steps = max(1, len(batches))
    heads = [h / steps for h in heads]
    heads = [h / h.norm() if h.norm() > 0 else h for h in heads]
    base = total / max(1, examples)
    layers = [_skipped_loss(model, batches, target, layer, tick) - base for layer in range(config.num_layers)]
    model.train(was_training)
    for p, flag in zip(model.parameters(), wanted, strict=True):
        p.requires_grad_(flag)
    return Importance(heads=[h.tolist() for h in heads], neurons=[(n / steps).tolist() for n in neurons],
                      layers=layers, base_loss=base, examples=examples, target=target,
                      channels=(channels / steps).tolist())


@contextmanager
def layer_norm_outputs(model: Encoder) -> Iterator[list[torch.Tensor]]:
    """Every layer-norm output of the residual stream that a forward pass inside this block computes (see the module
    docstring), in a list it fills."""
    outputs: list[torch.Tensor] = []

    def add(_module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> None:
        outputs.append(output)

    embeddings = model.embeddings.projection if model.config.factorized else model.embeddings.layer_norm
    norms = [embeddings, *(block.layer_norm for block in (*model.attention, *model.ffn))]
    handles = [norm.register_forward_hook(add) for norm in norms]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


def _taylor(block: torch.nn.Module, grads: dict[str, torch.Tensor | None], prefix: str) -> torch.Tensor:
    """sum over the weights neuron i owns of w * dL/dw, for every neuron i of an FFN block."""
    total = torch.zeros(block.width, device=block.output.weight.device)
    pairs = [(block.intermediate.weight, grads[prefix + "intermediate.weight"], 1),
             (block.intermediate.bias, grads[prefix + "intermediate.bias"], None),
             (block.output.weight, grads[prefix + "output.weight"], 0)]
    for w, g, dim in pairs:
        if g is None:
            continue
        product = w.detach() * g
        total += product if dim is None else product.sum(dim=dim)
    return total


@torch.no_grad()
def _skipped_loss(model: Encoder, batches: list[Batch], target: str, layer: int, tick: Callable[[], None]) -> float:
    gate = torch.ones(model.config.num_layers, device=next(model.parameters()).device)
    gate[layer] = 0.0
    total, count = 0.0, 0
    for batch in batches:
        total += float(_loss(model, batch, target, Gates(layers=gate))) * len(batch["input_ids"])
        count += len(batch["input_ids"])
        tick()
    return total / max(1, count)
