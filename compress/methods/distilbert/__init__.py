"""DistilBERT (Sanh et al. 2019): every other teacher layer at the same width, initialised from the
teacher, trained on soft targets + gold labels + the cosine of the hidden states.

Engines: :mod:`compress.students.distilbert` and :func:`compress.distill.recipes.distilbert_recipe`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.models.config import EncoderConfig
from compress.registry import StudentMethod, register
from compress.students.distilbert import DistilBertOptions, build_distilbert, distilbert_config

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.distill.recipe import Recipe
    from compress.reports.footprint import Explanation

WHY = ("Fewer layers cut parameters and FLOPs of the encoder alike; the embedding table is untouched, "
       "so parameters fall by {params:.2f}x while FLOPs fall by {flops:.2f}x.")


def explain(name: str, tc: EncoderConfig, seq_len: int, options: DistilBertOptions) -> Explanation:
    from compress.reports.footprint import footprint, side_by_side

    sc = distilbert_config(tc, options.num_layers)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    formula = [
        f"layers: L = {tc.num_layers}  ->  {sc.num_layers} (every other teacher layer), "
        f"width H = {tc.hidden_size} kept",
        "loss = alpha * KL(soft targets at T) + beta * CE(gold labels) + gamma * (1 - cos(hidden states))",
    ]
    notes = [
        "Halving the depth halves the encoder's parameters and FLOPs; the embeddings are untouched, "
        f"so the whole model keeps {student.params / teacher.params:.0%} of the parameters.",
        "DistilBERT paper (BERT-base): 40% fewer parameters, 60% faster, 97% of the GLUE score.",
    ]
    return side_by_side("distilbert", name, teacher, student, formula, notes)


def recipe(options: DistilBertOptions) -> Recipe:
    from compress.distill.recipes import distilbert_recipe

    return distilbert_recipe()


METHOD = register(StudentMethod(
    name="distilbert", rank=20, family="distillation", label="DistilBERT (half the layers)",
    summary="every other teacher layer, soft targets + gold labels + cosine",
    options=DistilBertOptions, why=WHY, explain=explain,
    student_config=lambda t, o: distilbert_config(t, o.num_layers), build=build_distilbert,
    recipe=recipe,
))
