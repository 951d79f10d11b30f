"""TinyBERT (Jiao et al. 2020): a narrower and shallower student, intermediate-layer then
prediction-layer distillation, optionally after general distillation on raw text and with data
augmentation.

Engines: :mod:`compress.students.tinybert`, :func:`compress.distill.recipes.tinybert_recipe`,
:mod:`compress.students.tinybert.general`; its data augmentation is every student's transfer data
(:mod:`compress.students.transfer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.models.config import EncoderConfig
from compress.registry import Preparation, StudentMethod, register
from compress.students.tinybert import TinyBertOptions, build_tinybert, tinybert_config

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.data.batching import TokenizedTask
    from compress.distill.recipe import Recipe
    from compress.reports.footprint import Explanation

WHY = ("A narrower and shallower student cuts both: parameters by {params:.2f}x (the embedding table "
       "shrinks with H) and FLOPs by {flops:.2f}x (the encoder shrinks with L * H^2).")


def prepare(options: TinyBertOptions, run: Preparation) -> TokenizedTask:
    """A general-distilled starting point, when the options ask for one (the augmented copies are the run's transfer
    data: :mod:`compress.students.transfer`)."""
    from compress.students.tinybert.general import general_distillation

    if options.general_distillation and not options.init_from:
        options.init_from = str(general_distillation(run.teacher, run.student_shape, device=run.device,
                                                     show_progress=run.show_progress))
    return run.data


def explain(name: str, tc: EncoderConfig, seq_len: int, options: TinyBertOptions) -> Explanation:
    from compress.reports.footprint import footprint, side_by_side

    sc = tinybert_config(tc, options)
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
    return side_by_side("tinybert", name, teacher, student, formula, notes)


def recipe(options: TinyBertOptions) -> Recipe:
    from compress.distill.recipes import tinybert_recipe

    return tinybert_recipe()


METHOD = register(StudentMethod(
    name="tinybert", rank=30, family="distillation", label="TinyBERT-4 (narrow and shallow)",
    summary="narrow and shallow, intermediate-layer then prediction-layer distillation",
    options=TinyBertOptions, why=WHY, explain=explain,
    student_config=tinybert_config, build=build_tinybert, recipe=recipe, prepare=prepare,
    copies=lambda o: o.augment_copies,
))
