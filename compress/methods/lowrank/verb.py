"""Low-rank factorization's verb: measure what the weighting needs on calibration batches, choose every matrix's
rank, replace each matrix by its two factors where that is smaller, and recover by distillation from the
unfactorized model. The result is an ordinary dense encoder whose config records the ranks."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from compress.device import resolve_device
from compress.distill.layer_maps import LayerMap
from compress.distill.recipe import Recipe, Stage
from compress.distill.recipes import recovery_terms
from compress.distill.stage import distil_stage
from compress.errors import CompressError
from compress.methods.lowrank.details import FactorizedMatrix, LowRankDetails
from compress.methods.lowrank.factorize import (
    Matrix,
    Weighted,
    break_even,
    cholesky,
    energy_ranks,
    fisher_rows,
    input_covariances,
    linear_of,
    matrices,
    uniform_ranks,
    weighted,
)
from compress.methods.lowrank.options import LowRankOptions
from compress.models.checkpoints import model_digest
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder, shapes_only
from compress.registry import Context, Transformed
from compress.training import seed_everything


def check_shape(options: LowRankOptions, shape: EncoderConfig) -> None:
    """The checks against the model it will be given: not already factorized, and a budget that keeps something."""
    if shape.low_rank:
        raise CompressError("lowrank takes a dense model, and this one is already factorized; factorize the model "
                            "it was made from with other options instead.")
    if shape.relaxed:
        raise CompressError("lowrank cannot factorize a relaxed ALBERT (its layers add deltas to shared blocks); a "
                            "smaller --rank is the way to a smaller one.")
    if options.keep == 1 and options.rank is None and options.embedding_rank is None:
        raise CompressError("--keep 1 keeps every matrix whole and no --embedding-rank is given: nothing would be "
                            "factorized; add --embedding-rank to factorize the token embedding alone, or keep less.")
    if options.embedding_rank is not None and options.embedding_rank >= shape.embedding_size:
        raise CompressError(f"--embedding-rank {options.embedding_rank} keeps the whole token embedding: it must be "
                            f"below its width E = {shape.embedding_size}.")
    if options.rank is None:
        blocks = [(shape.heads_of(b) * shape.head_size, shape.hidden_size) for b in range(shape.num_attention_blocks)]
        ffn = [(shape.ffn_size_of(b), shape.hidden_size) for b in range(shape.num_ffn_blocks)]
        total = sum(4 * inner * h for inner, h in blocks) + sum(2 * f * h for f, h in ffn)
        least = sum(4 * (inner + h) for inner, h in blocks if inner) + sum(2 * (f + h) for f, h in ffn if f)
        if options.keep * total < least:
            raise CompressError(f"--keep {options.keep} keeps nothing: {options.keep * total:,.0f} parameters cannot "
                                f"hold rank 1 of every matrix ({least:,}); keep at least {least / total:.4f}.")


def recovery_recipe(options: LowRankOptions, layers: int) -> Recipe:
    """Distillation from the unfactorized model: its soft targets and, layer by layer, its hidden states (same
    depth and width, so layer i faces layer i)."""
    stages = [Stage("recover", recovery_terms(), epochs=options.recovery_epochs, lr=options.recovery_lr)] \
        if options.recovery_epochs else []
    return Recipe("lowrank", stages, LayerMap("explicit", tuple(range(1, layers + 1))))


def choose_ranks(options: LowRankOptions, found: list[Matrix], spectra: dict[str, Weighted]) -> dict[str, int]:
    """Every matrix's rank (0: dense) as the options ask: one --rank, or --keep shared out by the allocation."""
    if options.rank is not None:
        return {m.key: options.rank if options.rank <= break_even(m.out, m.inp) else 0 for m in found}
    if options.keep == 1:   # every matrix whole (the token embedding alone factorized, with --embedding-rank)
        return {m.key: 0 for m in found}
    if options.allocation == "uniform":
        return uniform_ranks(found, options.keep)
    return energy_ranks(found, spectra, int(options.keep * sum(m.params for m in found)))


def factorized_config(config: EncoderConfig, ranks: dict[str, int], word_rank: int) -> EncoderConfig:
    attention = tuple(tuple(ranks.get(f"attention.{b}.{n}", 0) for n in ("query", "key", "value", "output"))
                      for b in range(config.num_attention_blocks))
    ffn = tuple(tuple(ranks.get(f"ffn.{b}.{n}", 0) for n in ("intermediate", "output"))
                for b in range(config.num_ffn_blocks))
    return config.replace(attention_ranks=attention, ffn_ranks=ffn, word_rank=word_rank)


@torch.no_grad()
def factorize(model: Encoder, ranks: dict[str, int], weights: Mapping[str, Weighted | dict[str, torch.Tensor]],
              word_rank: int = 0) -> Encoder:
    """A new encoder holding ``model``'s weights, with every matrix of non-zero rank in ``ranks`` replaced by its
    two factors under the weighting (``weights``: per matrix key, ``rows`` or ``whiten`` or nothing, or the
    matrix's :class:`Weighted` already computed) and the token embedding by plain SVD factors when
    ``word_rank``; ``model`` is left as it was."""
    config = factorized_config(model.config, ranks, word_rank)
    state = model.state_dict()
    with shapes_only():
        new = {name: state[name] for name in Encoder(config).state_dict() if name in state}
    for m in matrices(model):
        rank = ranks.get(m.key, 0)
        if not rank:
            continue
        linear = linear_of(model, m)
        given = weights.get(m.key, {})
        found = given if isinstance(given, Weighted) else weighted(linear.weight.detach().cpu(), **given)
        up, down = found.factors(rank, linear.weight.dtype)
        new |= {f"{m.key}.up.weight": up, f"{m.key}.up.bias": linear.bias, f"{m.key}.down.weight": down}
    if word_rank:
        table = model.embeddings.word_embeddings.weight.detach().cpu()
        u, s, vh = torch.linalg.svd(table.double(), full_matrices=False)
        root = s[:word_rank].sqrt()
        new |= {"embeddings.word_embeddings.rows.weight": (u[:, :word_rank] * root).to(table.dtype),
                "embeddings.word_embeddings.up.weight": (root[:, None] * vh[:word_rank]).T.to(table.dtype)}
    return Encoder.holding(config, new, next(model.parameters()).device).eval()


def statistics(model: Encoder, weighting: str, batches: list[dict[str, torch.Tensor]],
               device: torch.device, found: list[Matrix]) -> dict[str, dict[str, torch.Tensor]]:
    """What the weighting needs, per matrix: nothing (svd), Fisher row weights, or the inputs' Cholesky factor."""
    if weighting == "fisher":
        rows = fisher_rows(model, batches, device, found)
        # A row with no gradient at all (never used) gets a small weight, not zero, so the weighting can be undone.
        return {key: {"rows": r + 1e-6 * (float(r.mean()) or 1.0)} for key, r in rows.items()}
    if weighting == "activation":
        return {key: {"whiten": cholesky(c)} for key, c in input_covariances(model, batches, device, found).items()}
    return {m.key: {} for m in found}


def apply(model: Encoder, options: LowRankOptions, context: Context) -> Transformed:
    """``model`` factorized as ``options`` say, calibrated on ``context.data``'s training split, and recovered
    (when ``options.recovery_epochs``) by distillation from ``model`` itself, which is left as it was."""
    check_shape(options, model.config)
    if context.data is None:
        raise CompressError("lowrank needs the task's data to calibrate and recover on (Context.data).")
    device = resolve_device(context.device)
    reference = model.to(device).eval()
    found = matrices(reference)
    needs_batches = options.weighting != "svd"
    batches = context.data.sample(options.calibration_examples, context.seed) if needs_batches else []
    weights = statistics(reference, options.weighting, batches, device, found)
    spectra = {m.key: weighted(linear_of(reference, m).weight.detach().cpu(), **weights[m.key]) for m in found}
    ranks = choose_ranks(options, found, spectra)
    student = factorize(reference, ranks, spectra, options.embedding_rank or 0)   # the SVDs computed once
    stages = []
    recipe = recovery_recipe(options, student.config.num_layers)
    if recipe.stages:
        seed_everything(context.seed)
        # The unfactorized model's outputs are stored once for every epoch and later run of the same model (keyed
        # by a digest of its weights).
        stages.append(distil_stage(recipe.stages[0], recipe, reference, student, context.data,
                                   model_digest(reference), context.train, device, context.log,
                                   context.show_progress, answers=context.teacher_answers))
    vocab, width = reference.config.vocab_size, reference.config.embedding_size
    details = LowRankDetails(
        options=options, source_config=reference.config.to_dict(),
        matrices=[FactorizedMatrix(m.kind, m.block, m.name, m.out, m.inp, ranks[m.key], break_even(m.out, m.inp),
                                   spectra[m.key].energy(ranks[m.key]) if ranks[m.key] else 1.0) for m in found],
        matrix_params_before=sum(m.params for m in found),
        matrix_params_after=sum(ranks[m.key] * (m.out + m.inp) if ranks[m.key] else m.params for m in found),
        embedding_params_before=vocab * width,
        embedding_params_after=options.embedding_rank * (vocab + width) if options.embedding_rank else vocab * width)
    return Transformed(student.eval(), details, stages=stages, recipe=recipe.to_dict())
