"""Structured pruning (Michel et al. 2019; Sajjad et al.; TextPruner): score the attention heads, FFN
neurons and layers, physically remove the least important, recover by distillation from the unpruned model.

The verb is :mod:`compress.methods.prune.verb`, on the engine :mod:`compress.prune` (scores, selection,
slicing); its record :mod:`~compress.methods.prune.details`, its report :mod:`~compress.methods.prune.report`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.methods.prune.details import PruneDetails
from compress.methods.prune.options import PruneOptions, channels_to_keep
from compress.methods.prune.report import compared_sections, report_lines, summary_lines
from compress.models.config import EncoderConfig
from compress.registry import Context, Transform, Transformed, register

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.distill.recipe import Recipe
    from compress.models.encoder import Encoder
    from compress.reports.footprint import Explanation
    from compress.runs.config import RunConfig

WHY = ("Pruning removes whole heads and FFN neurons, so the model that is left is smaller and dense: "
       "parameters fall by {params:.2f}x and FLOPs by {flops:.2f}x ({size:.2f}x fewer bytes). The embedding "
       "table is untouched, which is why parameters fall less than FLOPs.")


def uniform_shape(tc: EncoderConfig, keep_heads: float, keep_ffn: float, drop_layers: int = 0,
                  keep_width: float = 1.0) -> EncoderConfig:
    """The teacher's shape with the same share of heads and neurons kept in every layer (an illustration:
    a global ranking keeps more in some layers than in others), and the width ``keep_width`` keeps."""
    if tc.sharing != "none":
        return tc
    layers = tc.num_layers - drop_layers
    hidden = channels_to_keep(keep_width, tc.hidden_size)
    tied = hidden == tc.hidden_size
    return tc.replace(num_layers=layers, groups=1, heads=(round(keep_heads * tc.num_heads),) * layers,
                      ffn_sizes=(round(keep_ffn * tc.ffn_size),) * layers, hidden_size=hidden,
                      embedding_size=tc.embedding_size if tc.factorized else hidden,
                      head_width=0 if tied else tc.head_size)


def explain(name: str, tc: EncoderConfig, seq_len: int, options: PruneOptions) -> Explanation:
    from compress.reports.footprint import footprint, side_by_side

    sc = uniform_shape(tc, options.keep_heads, options.keep_ffn, options.drop_layers, options.keep_width)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    h, d, f, n = tc.hidden_size, tc.head_size, tc.ffn_size, seq_len
    kept_heads, kept_ffn = sc.heads_of(0), sc.ffn_size_of(0)
    formula = [
        "head importance (Michel et al.): I_h = E_x |dL/dxi_h|, xi_h a gate on head h's output, normalised "
        "per layer; neuron importance (Taylor): |sum of w * dL/dw over the neuron's weights|; layer "
        "importance: the loss increase when the layer is skipped",
        f"one head owns 4 * H * d + 3 * d = 4*{h}*{d} + 3*{d} = {4 * h * d + 3 * d:,} parameters "
        f"and 2 n H (4 d) + 4 n^2 d = {2 * n * h * 4 * d + 4 * n * n * d:,} FLOPs per sequence of n = {n}",
        f"one FFN neuron owns 2 * H + 1 = {2 * h + 1:,} parameters and 4 n H = {4 * n * h:,} FLOPs",
        f"this cut, per layer: heads {tc.num_heads} -> {kept_heads}, FFN {f} -> {kept_ffn}, then "
        "distillation from the unpruned model (soft targets + hidden states) to recover",
    ]
    notes = [
        "Pruning removes, it does not mask: the pruned blocks are smaller matrices, so parameters, bytes, "
        "FLOPs and time all go down, and the model exports to ONNX and quantizes like any other.",
        f"The embedding table ({tc.vocab_size} x {tc.embedding_size}) is untouched, so the whole model keeps "
        f"{student.params / teacher.params:.0%} of its parameters but only {student.flops / teacher.flops:.0%} "
        "of its FLOPs; prune-vocab shrinks the table.",
        "Michel et al.: about 40% of BERT's heads can go with no noticeable loss; TextPruner: heads and FFN "
        "at 2/3 width, 1.5x faster, under one point lost.",
    ]
    return side_by_side("prune", name, teacher, student, formula, notes)


def shape(options: PruneOptions, tc: EncoderConfig, context: Context) -> EncoderConfig:
    """The shape a cut gives, with the same share kept in every layer (a global ranking keeps as many in all, spread
    otherwise)."""
    return uniform_shape(tc, options.keep_heads, options.keep_ffn, options.drop_layers, options.keep_width)


def recovery(options: PruneOptions, tc: EncoderConfig) -> Recipe:
    from compress.methods.prune.verb import recovery_recipe

    return recovery_recipe(options, tuple(range(tc.num_layers - options.drop_layers)))


def check(config: RunConfig, options: PruneOptions) -> None:
    from compress.methods.prune.verb import check_pruning

    check_pruning(config, options)


def check_input(options: PruneOptions, shape: EncoderConfig) -> None:
    from compress.methods.prune.verb import check_layers

    check_layers(options, shape)


def apply(model: Encoder, options: PruneOptions, context: Context) -> Transformed:
    from compress.methods.prune.verb import apply as prune

    return prune(model, options, context)


METHOD = register(Transform(
    name="prune", rank=90, family="pruning", label="structured pruning (heads, FFN, layers)",
    summary="importance-scored removal of heads, FFN neurons and layers, recovered by distillation",
    options=PruneOptions, why=WHY, explain=explain, takes="fp32", gives="fp32", run_kind="pruning",
    details=PruneDetails, summary_lines=summary_lines, report_lines=report_lines, compared_sections=compared_sections,
    check=check, check_input=check_input, apply=apply, shape=shape,
    recovery=recovery,
))
