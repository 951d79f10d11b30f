"""The compression methods `compress run` knows: how each shapes, builds and trains its student.

A method is data plus functions: its options (a dataclass the CLI fills), the student's shape
(checked before any work starts), the student built from the fine-tuned teacher, its recipe, and
optionally a step that prepares data and starting point before the student is built (TinyBERT's
augmentation and general distillation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from compress.data.batching import TokenizedTask
from compress.data.task import TaskData
from compress.distill.augment import AugmentConfig, augmented_train_split
from compress.distill.general import general_distillation
from compress.distill.recipe import Recipe
from compress.distill.recipes import albert_recipe, distilbert_recipe, tinybert_recipe
from compress.errors import CompressError
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.quantize.artefacts import QUANT_METHODS
from compress.students.albert import AlbertOptions, albert_config, build_albert
from compress.students.distilbert import DistilBertOptions, build_distilbert, distilbert_config
from compress.students.tinybert import TinyBertOptions, build_tinybert, tinybert_config
from compress.teachers.registry import resolve_teacher_dir


@dataclass(frozen=True)
class Preparation:
    """What a method's ``prepare`` step may use: the run's data, task, teacher and student shape."""

    data: TokenizedTask
    task: TaskData
    teacher: str
    student_shape: EncoderConfig
    device: str
    show_progress: bool


@dataclass(frozen=True)
class Method:
    name: str
    summary: str
    options: type
    student_config: Callable[[EncoderConfig, Any], EncoderConfig]
    build: Callable[[Encoder, Any], Encoder]
    recipe: Callable[[Any], Recipe]
    # Runs after the teacher is fine-tuned and before the student is built; returns the training data
    # and may fill options (a starting checkpoint).
    prepare: Callable[[Any, Preparation], TokenizedTask] | None = None


def _prepare_tinybert(options: TinyBertOptions, run: Preparation) -> TokenizedTask:
    """Augmented training data and a general-distilled starting point, when the options ask for them."""
    data = run.data
    if options.augment_copies:
        # The pre-trained teacher, not the fine-tuned one: only the former can hold a masked-LM head.
        data = augmented_train_split(data, run.task, resolve_teacher_dir(run.teacher),
                                     AugmentConfig(copies=options.augment_copies))
    if options.general_distillation and not options.init_from:
        options.init_from = str(general_distillation(run.teacher, run.student_shape, device=run.device,
                                                     show_progress=run.show_progress))
    return data


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "albert", "factorized embedding + cross-layer sharing, distilled on the logits", AlbertOptions,
            lambda t, o: albert_config(t, o.embedding_size, o.sharing, o.groups, o.dropout),
            build_albert, lambda o: albert_recipe(hidden_loss=o.hidden_loss),
        ),
        Method(
            "distilbert", "every other teacher layer, soft targets + gold labels + cosine", DistilBertOptions,
            lambda t, o: distilbert_config(t, o.num_layers), build_distilbert, lambda o: distilbert_recipe(),
        ),
        Method(
            "tinybert", "narrow and shallow, intermediate-layer then prediction-layer distillation",
            TinyBertOptions, tinybert_config, build_tinybert, lambda o: tinybert_recipe(), _prepare_tinybert,
        ),
    )
}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        known = ", ".join([*METHODS, *QUANT_METHODS])
        raise CompressError(f"unknown method {name!r}; known: {known}.") from None


def method_options(method: Method, values: dict[str, Any]) -> Any:
    """The method's options dataclass from ``values``; options it does not take are an error."""
    known = {f.name for f in fields(method.options)}
    unknown = sorted(k for k, v in values.items() if k not in known)
    if unknown:
        flags = ", ".join("--" + k.replace("_", "-") for k in unknown)
        raise CompressError(f"{flags} do(es) not apply to {method.name}; it takes {', '.join(sorted(known))}.")
    return method.options(**values)
