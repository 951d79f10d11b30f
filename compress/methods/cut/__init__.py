"""A student cut from the teacher at any shape (Minitron, Muralidharan et al. 2024; CoFi, Xia et al. 2022): layers,
width, heads and FFN neurons chosen by importance on training sentences, the teacher's own weights kept, then taught
with TinyBERT's two stages, comparing hidden states at the channels and layers it kept.

Engines: :mod:`compress.students.cut`, :mod:`compress.prune` (scores, choice, slicing) and
:func:`compress.distill.recipes.tinybert_recipe`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.models.config import EncoderConfig
from compress.registry import Preparation, StudentMethod, register
from compress.students.cut import CutOptions, build_cut, cut_config, kept_by, layerwise_parts, recut, waypoint

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.data.batching import TokenizedTask
    from compress.distill.recipe import Recipe
    from compress.reports.footprint import Explanation

WHY = ("A student cut from the teacher keeps the teacher's most important layers, channels, heads and neurons: "
       "parameters fall by {params:.2f}x and FLOPs by {flops:.2f}x, and training starts from weights that already "
       "solve the task.")


def prepare(options: CutOptions, run: Preparation) -> TokenizedTask:
    """Chooses the cut on the run's training sentences, from the fine-tuned teacher (held by ``options``)."""
    from compress.device import resolve_device
    from compress.students.cut import choose_cut

    if run.finetuned is None:
        raise ValueError("a cut is chosen from the fine-tuned teacher, which this run did not give.")
    options._kept = choose_cut(run.finetuned, run.data, options, run.seed, resolve_device(run.device),
                                run.show_progress, kept=waypoint(run.finetuned.config, options, 1))  # type: ignore[attr-defined]
    return run.data


def explain(name: str, tc: EncoderConfig, seq_len: int, options: CutOptions) -> Explanation:
    from compress.reports.footprint import footprint, side_by_side

    sc = cut_config(tc, options)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    formula = [
        f"shape: L {tc.num_layers} -> {sc.num_layers}, H {tc.hidden_size} -> {sc.hidden_size}, "
        f"FFN {tc.ffn_size} -> {sc.ffn_size}, heads {tc.num_heads} -> {sc.num_heads} of width {sc.head_size}",
        "kept by importance: channels by |sum of x dL/dx| over every layer norm's output, heads by |dL/dgate|, "
        "neurons by first-order Taylor, layers by the loss increase when skipped",
        "then TinyBERT's stages: embedding, hidden and attention MSE at the kept channels and layers, then soft "
        "cross-entropy on the logits",
    ]
    notes = [
        "Every weight the student keeps is the teacher's: a cut starts where a student grown from random "
        "layers (tinybert) must first arrive.",
        "Minitron: models cut from a larger one needed about 40x fewer training tokens than the same shapes "
        "trained from scratch.",
    ]
    return side_by_side("cut", name, teacher, student, formula, notes)


def recipe(options: CutOptions) -> Recipe:
    """TinyBERT's two stages (the layer-wise one in a part per cut); once the cut is made, its layers faced by the
    ones they were cut from, its states compared at the channels it kept."""
    from dataclasses import replace

    from compress.distill.layer_maps import LayerMap
    from compress.distill.recipes import tinybert_recipe

    intermediate, prediction = tinybert_recipe().stages
    base = replace(tinybert_recipe(), method="cut", stages=[*layerwise_parts(intermediate, options.cuts), prediction])
    keep = kept_by(options)
    if keep is None:
        return base
    return replace(base, layer_map=LayerMap.explicit([layer + 1 for layer in keep.layers]), channels=keep.channels)


METHOD = register(StudentMethod(
    name="cut", rank=35, family="distillation", label="cut from the teacher (any shape)",
    summary="the teacher's most important layers, channels, heads and neurons, then TinyBERT's distillation",
    options=CutOptions, why=WHY, explain=explain,
    student_config=cut_config, build=build_cut, recipe=recipe, prepare=prepare, restage=recut,
    copies=lambda o: o.augment_copies, prepared_parts=("layer_map", "channels"),
))
