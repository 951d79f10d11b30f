"""Structured pruning's verb: score the heads, FFN neurons and layers of a model, remove the least important,
recover by distillation from the unpruned model (Michel et al. 2019; Sajjad et al.; TextPruner).

One step (``steps=1``) scores once and cuts to the asked amount; ``steps=k`` cuts an equal share of
what goes k times, scoring again and recovering after each cut (iterative pruning). Besides the pruned
model, :func:`apply` gives ``importance.json`` (the scores of every step) and ``head_curve.png`` (dev accuracy
with 0-90% of the source's heads removed, importance against random order) for the run directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from compress.data.batching import TokenizedTask
from compress.device import resolve_device
from compress.distill.layer_maps import LayerMap
from compress.distill.recipe import Recipe, Stage
from compress.distill.recipes import recovery_terms
from compress.distill.stage import distil_stage
from compress.errors import CompressError
from compress.methods.prune.details import PruneDetails, PruneStep
from compress.methods.prune.options import WIDTH_STATES, PruneOptions, channels_to_keep
from compress.models.accounting import count_parameters
from compress.models.checkpoints import model_digest, read_config
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.prune.curve import SHARES, WIDTH_SHARES, head_curve, head_curve_png, width_curve, width_curve_png
from compress.prune.importance import TARGETS, score
from compress.prune.select import LAYER_ORDERS, RANKINGS, Amount, choose
from compress.prune.structure import Keep, prune_model
from compress.registry import Context, Transformed
from compress.teachers.registry import teacher_config
from compress.training import autocast, evaluate, resolve_precision, seed_everything, ticking


def check_pruning(config: Any, options: PruneOptions) -> None:
    """Every check of a pruning run that needs no data, so a pipeline fails before its first step trains."""
    if config.epochs or config.lr or config.layer_map or config.patience:
        raise CompressError("prune recovers with --recovery-epochs and --recovery-lr; --epochs, --lr, --layer-map "
                            "and --patience do not apply.")
    for flag, value in (("--keep-heads", options.keep_heads), ("--keep-ffn", options.keep_ffn)):
        if not 0 < value <= 1:
            raise CompressError(f"{flag} is the share to keep and must be in (0, 1], got {value}.")
    for flag, value, least in (("--drop-layers", options.drop_layers, 0), ("--steps", options.steps, 1),
                               ("--recovery-epochs", options.recovery_epochs, 0),
                               ("--scoring-examples", options.scoring_examples, 1)):
        if value < least:
            raise CompressError(f"{flag} must be an integer >= {least}, got {value}.")
    if not options.recovery_lr > 0:
        raise CompressError(f"--recovery-lr must be positive, got {options.recovery_lr}.")
    for flag, value, allowed in (("--layer-order", options.layer_order, LAYER_ORDERS),
                                 ("--ranking", options.ranking, RANKINGS),
                                 ("--score-against", options.score_against, TARGETS),
                                 ("--width-states", options.width_states, WIDTH_STATES)):
        if value not in allowed:
            raise CompressError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}.")
    check_layers(options, teacher_config(config.teacher) if config.target == "teacher" else
                 read_config(Path(config.target) / "student")[0])


def check_layers(options: PruneOptions, shape: EncoderConfig) -> None:
    """The checks of ``--drop-layers`` and ``--keep-width`` against the model that will be pruned, which must not be
    a relaxed ALBERT."""
    try:
        channels = channels_to_keep(options.keep_width, shape.hidden_size)
    except ValueError as e:
        raise CompressError(str(e)) from None
    if shape.factorized and channels <= shape.embedding_size:
        raise CompressError(f"--keep-width {options.keep_width:g} keeps {channels} channels; a factorized embedding "
                            f"feeds them through a projection, so keep more than the factorized embedding's "
                            f"{shape.embedding_size}.")
    if shape.relaxed:
        raise CompressError("prune cannot cut a relaxed ALBERT (its layers add deltas to shared blocks); a smaller "
                            "--rank is the way to a smaller one.")
    if options.drop_layers >= shape.num_layers:
        raise CompressError(f"--drop-layers {options.drop_layers} would remove every layer: the model has "
                            f"{shape.num_layers}.")
    if options.drop_layers and shape.sharing != "none" and shape.groups > 1:
        raise CompressError("--drop-layers cannot remove layers of a model that shares blocks in several groups.")


def step_amounts(options: PruneOptions, hidden: int) -> list[Amount]:
    """The cuts of each step as shares of the model that step cuts, so that after every step the whole
    cut so far is (step / steps) of the asked one; layers are all dropped by the first step. The width (of a model
    ``hidden`` wide) falls by an equal number of channels each step."""
    channels = channels_to_keep(options.keep_width, hidden)
    amounts = []
    for step in range(1, options.steps + 1):
        def share(keep: float) -> float:
            before, after = (1 - (1 - keep) * (step - 1) / options.steps), (1 - (1 - keep) * step / options.steps)
            return after / before
        amounts.append(Amount(heads=share(options.keep_heads), neurons=share(options.keep_ffn),
                              drop_layers=options.drop_layers if step == 1 else 0, ranking=options.ranking,
                              layer_order=options.layer_order,
                              channels=None if channels == hidden else
                              round(hidden - (hidden - channels) * step / options.steps)))
    return amounts


def recovery_recipe(options: PruneOptions, kept_layers: tuple[int, ...],
                    channels: tuple[int, ...] | None = None) -> Recipe:
    """Distillation from the unpruned model after each pruning step (none with ``--recovery-epochs 0``): its
    soft targets and, layer by layer, its hidden states (kept layer i faces the unpruned model's layer i; where the
    width was cut, at the ``channels`` kept, or through a learned projection with ``--width-states projection``).
    One stage per step, so the recipe lists exactly the stages a run trains."""
    stages = [Stage(f"recover {number}/{options.steps}", recovery_terms(), epochs=options.recovery_epochs,
                    lr=options.recovery_lr) for number in range(1, options.steps + 1)] if options.recovery_epochs else []
    return Recipe("prune", stages, LayerMap("explicit", tuple(i + 1 for i in kept_layers)),
                  channels if options.width_states == "channels" else None)


def apply(model: Encoder, options: PruneOptions, context: Context) -> Transformed:
    """``model`` pruned as ``options`` say, scored on ``context.data``'s training split and recovered (when
    ``options.recovery_epochs``) by distillation from ``model`` itself, which is left as it was."""
    if context.data is None:
        raise CompressError("prune needs the task's data to score the model on (Context.data).")
    device = resolve_device(context.device)
    data = context.data
    reference = model.to(device).eval()
    batches = data.sample(options.scoring_examples, context.seed)
    pruned: Encoder = reference
    first: Keep | None = None
    steps, stages, files = [], [], {}
    curve = widths = None
    channels: tuple[int, ...] | None = None   # the unpruned model's channels kept so far (None: every one)
    reference_digest = ""
    # Scoring and the curve are forward passes of the unpruned model, in bf16 autocast where the device computes it
    # natively under auto (~2.9x faster on a CPU with bf16 units, benchmarks/training_speed.py's teacher column).
    scoring = resolve_precision(context.train.precision, context.device)
    for number, amount in enumerate(step_amounts(options, reference.config.hidden_size), 1):
        passes = len(batches) * (1 + pruned.config.num_layers)
        with ticking(context.show_progress, f"prune: importance {number}/{options.steps}", passes) as tick, \
                autocast(scoring, device):
            importance = score(pruned, batches, device, options.score_against, tick)
        if number == 1 and options.head_curve:
            with ticking(context.show_progress, "prune: head-importance curve", 2 * len(SHARES)) as tick, \
                    autocast(scoring, device):
                curve = head_curve(reference, importance, lambda m, split: _accuracy(m, data, split, device, tick),
                                   context.seed)
            files["head_curve.png"] = head_curve_png(curve, context.name)
        if number == 1 and options.width_curve and amount.channels is not None:
            with ticking(context.show_progress, "prune: width curve", 2 * len(WIDTH_SHARES)) as tick, \
                    autocast(scoring, device):
                widths = width_curve(reference, importance,
                                     lambda m, split: _accuracy(m, data, split, device, tick), context.seed)
            files["width_curve.png"] = width_curve_png(widths, context.name)
        keep = choose(pruned.config, importance, amount)
        pruned = prune_model(pruned, keep)
        first = first or keep
        if keep.channels is not None:   # as indices into the unpruned model's channels
            channels = keep.channels if channels is None else tuple(channels[c] for c in keep.channels)
        steps.append({"step": number, "importance": importance.to_dict(), "kept": asdict(keep),
                      "params": count_parameters(pruned).total})
        if options.recovery_epochs:
            seed_everything(context.seed + number)
            recipe = recovery_recipe(options, first.layers, channels)
            # The unpruned model's outputs are stored once for every step, epoch and later run of the same model
            # (keyed by a digest of its weights: a run's student has no teacher fingerprint).
            reference_digest = reference_digest or model_digest(reference)
            stages.append(distil_stage(recipe.stages[number - 1], recipe, reference, pruned, data, reference_digest,
                                       context.train, device, context.log, context.show_progress,
                                       answers=context.teacher_answers))
    # The details say what each step kept; the scores themselves (a number per head, neuron and layer) are in
    # importance.json only.
    files["importance.json"] = json.dumps(steps, indent=1).encode()
    details = PruneDetails(
        options=options, source_config=reference.config.to_dict(), layers_kept=list(first.layers),
        steps=[PruneStep(step["step"], step["kept"], step["params"], step["importance"]["examples"])
               for step in json.loads(files["importance.json"])],   # as written: the kept indices as lists
        head_curve=curve, width_curve=widths)
    return Transformed(pruned, details, files=files, stages=stages,
                       recipe=recovery_recipe(options, first.layers, channels).to_dict())


def _accuracy(model: Encoder, data: TokenizedTask, split: str, device: torch.device, tick: Callable[[], None]) -> float:
    accuracy = evaluate(model, data.eval_batches(split), device).primary
    tick()
    return accuracy
