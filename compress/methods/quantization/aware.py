"""Quantization-aware training (Q8BERT's, with distillation as TernaryBERT trains): a copy of the model learns with
the format's rounding in its forward pass (:class:`~compress.quantize.fake_quant.FakeQuantized`: ONNX Runtime's dynamic
int8 or weight-only int4, or PyTorch's dynamic int8, exactly), distilled from the fp32 model it was given; its weights
are then quantized for real, and the exported model's answers are checked against the fake-quantized model's."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from compress.device import resolve_device
from compress.distill.layer_maps import LayerMap
from compress.distill.recipe import Recipe, Stage
from compress.distill.recipes import recovery_terms
from compress.distill.stage import distil_stage
from compress.errors import CompressError
from compress.methods.quantization.details import AwareTraining
from compress.methods.quantization.options import AwareOptions, relaxed_refusal
from compress.methods.quantization.verb import apply as quantize
from compress.models.checkpoints import model_digest
from compress.models.encoder import Encoder
from compress.predictions import Predictions
from compress.quantize.fake_quant import FakeQuantized
from compress.quantize.formats import QuantMethod
from compress.quantize.predictors import TorchPredictor, predict_batches
from compress.registry import Context, Transformed
from compress.training import seed_everything, with_progress


def aware_recipe(name: str, options: AwareOptions, layers: int) -> Recipe:
    """Distillation from the fp32 model: its soft targets and, layer by layer, its hidden states."""
    stages = [Stage("aware", recovery_terms(), epochs=options.recovery_epochs, lr=options.recovery_lr)]
    return Recipe(name, stages, LayerMap("explicit", tuple(range(1, layers + 1))))


def apply(model: Encoder, options: AwareOptions, context: Context, fmt: QuantMethod) -> Transformed:
    """``model`` trained with ``fmt``'s rounding in its forward pass, then quantized as ``fmt`` says; ``model`` itself
    is left as it was (it is the teacher of the training and the fp32 reference of the report)."""
    if context.data is None:
        raise CompressError(f"{fmt.name} trains on the task's data (Context.data).")
    if model.config.relaxed:
        raise CompressError(relaxed_refusal(fmt.name))
    device = resolve_device(context.device)
    reference = model.to(device).eval()
    student = copy.deepcopy(reference)
    fake = FakeQuantized(student, fmt.group_size if fmt.dtype == "int4" else None, backend=options.backend)
    recipe = aware_recipe(fmt.name, options, student.config.num_layers)
    seed_everything(context.seed)
    # fp32 steps: the rounding is modelled in fp32, as the runtimes compute their scales
    stage = distil_stage(recipe.stages[0], recipe, reference, student, context.data, model_digest(reference),
                         replace(context.train, precision="fp32"), device, context.log, context.show_progress,
                         answers=context.teacher_answers)
    # Sentence by sentence, as the exported graph is scored: each call quantizes its activations over its own range.
    ones = with_progress(context.data.dataloader("dev", batch_size=1), f"{fmt.name}: the trained model's dev answers",
                         context.show_progress)
    aware_dev = Predictions.of(*predict_batches(TorchPredictor(student.eval(), device=str(device)), ones))
    done = quantize(fake.remove().cpu(), options, context, fmt, reference=reference)
    exported = done.dev
    record = AwareTraining(
        epochs=options.recovery_epochs, lr=options.recovery_lr,
        agreement=None if exported.regression else float(np.mean(exported.outputs == aware_dev.outputs)),
        max_abs_logit_diff=float(np.abs(exported.logits - aware_dev.logits).max()))
    return replace(done, details=replace(done.details, aware=record), stages=[stage], recipe=recipe.to_dict())
