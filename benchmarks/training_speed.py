"""Examples per second of every student's training step: today's fp32 against bf16 autocast, split by phase.

    python benchmarks/training_speed.py                       # every student of minilm on MR, 2 threads
    python benchmarks/training_speed.py --students albert,distilbert --repeats 10

For each student (and each stage of its recipe; pruning's and low-rank's recovery too) this builds the model
as its run does, takes real MR training batches as a run draws them (length-grouped, batch 32, the teacher's
logits attached where the stage reads only those, as their cache does), and times the step
``compress.training.train_stage`` takes, phase by phase: the teacher's forward pass (stages that read its
hidden states or attention), the student's forward pass with the loss, the backward pass, and the optimizer
(zero_grad, clipping, fused AdamW). fp32 and bf16 alternate step by step in one process, after warm-up steps;
each phase is the median over ``--repeats`` steps. A relaxed ALBERT (``albert[rank=48]``) is timed a third way, as
the recipe before this one ran it: fp32 with each layer's delta applied as its two factors, not merged into the
shared matrix (``compress.models.encoder.merges``); its speed-ups are against that. Prints the CPU: bf16 pays
where the CPU computes it natively (AVX-512 BF16 or AMX), not always even there (pruned matrices), and is emulated,
slowly, elsewhere; which is why ``--precision auto`` trains in fp32 where bf16 is emulated and elsewhere times each
stage's own steps (``compress.step_precision``): the "auto picks" line applies its rule to the steps timed here.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from contextlib import contextmanager

import torch

import compress.models.encoder as encoder
from compress.bench.machine import cpu_features, cpu_model
from compress.bench.timing import fixed_threads
from compress.data.load import load_task
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import Recipe
from compress.models.encoder import Encoder
from compress.registry import Context, get_method
from compress.step_precision import pick
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.training import PRECISIONS, TrainConfig, _optimizer, model_inputs, run_precision

STUDENTS = ("albert", "albert[rank=48]", "distilbert", "tinybert", "prune", "lowrank")
PHASES = ("teacher", "forward", "backward", "optimizer")
WARMUP = 3


def build(name: str, teacher: Encoder, data) -> tuple[Encoder, Recipe]:
    """The student ``name`` and the recipe it trains with, made as its run makes them (a transform's model is
    cut or factorized by its own verb, without recovery; the recovery recipe is then timed)."""
    method_name, _, option_text = name.partition("[")
    method = get_method(method_name)
    values = dict(item.split("=") for item in option_text.rstrip("]").split(",")) if option_text else {}
    if method.kind == "student":
        options = method.make_options(values)
        return method.build(teacher, options), method.recipe(options)
    options = method.make_options(values)
    unrecovered = method.make_options(values | {"recovery_epochs": 0})
    made = method.apply(copy.deepcopy(teacher).requires_grad_(True), unrecovered, Context(data=data))
    if method_name == "prune":
        from compress.methods.prune.verb import recovery_recipe
        return made.model, recovery_recipe(options, tuple(made.details.layers_kept))
    from compress.methods.lowrank.verb import recovery_recipe
    return made.model, recovery_recipe(options, made.model.config.num_layers)


FACTORED = "fp32, factored"   # the recipe before: fp32, a relaxed ALBERT's deltas as two factors each


@contextmanager
def deltas_as_factors(variant: str):
    """Inside, a relaxed ALBERT runs its deltas as the recipe before did (never merged) when ``variant`` asks."""
    merges = encoder.merges
    if variant == FACTORED:
        encoder.merges = lambda tokens, inp, out: False
    try:
        yield
    finally:
        encoder.merges = merges


def time_stage(objective: DistillationObjective, student: Encoder, batches: list[dict[str, torch.Tensor]],
               precisions: tuple[str, ...], repeats: int) -> dict[str, dict[str, float]]:
    """Median milliseconds of each phase of a step, per variant (a precision, or FACTORED; the variants alternate
    step by step)."""
    optimizer = _optimizer(student, list(objective.projections.parameters()), TrainConfig())
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    teacher_forward = objective.teacher_outputs
    spent = {"teacher": 0.0}

    def timed_teacher(batch):
        start = time.perf_counter()
        out = teacher_forward(batch)
        spent["teacher"] += time.perf_counter() - start
        return out

    objective.teacher_outputs = timed_teacher   # type: ignore[method-assign]
    student.train()
    times: dict[str, dict[str, list[float]]] = {p: {phase: [] for phase in PHASES} for p in precisions}
    for i in range(WARMUP + repeats):
        batch = batches[i % len(batches)]
        for precision in precisions if i % 2 == 0 else precisions[::-1]:
            dtype = PRECISIONS.get(precision)
            spent["teacher"] = 0.0
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None), deltas_as_factors(precision):
                loss, _ = objective(student, batch)
            forward = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            backward = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            end = time.perf_counter()
            if i >= WARMUP:
                for phase, seconds in zip(PHASES, (spent["teacher"], forward - start - spent["teacher"],
                                                   backward - forward, end - backward), strict=True):
                    times[precision][phase].append(seconds)
    objective.teacher_outputs = teacher_forward   # type: ignore[method-assign]
    return {p: {phase: statistics.median(v) * 1000 for phase, v in phases.items()} for p, phases in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm")
    parser.add_argument("--students", default=",".join(STUDENTS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    task = load_task("mr")
    finetuned = finetune_teacher(args.teacher, task, show_progress=False)
    data = tokenized_for(finetuned, task)
    teacher = finetuned.load().model.eval()
    batches = list(data.dataloader("train", batch_size=args.batch_size, seed=13))[:WARMUP + args.repeats]
    with torch.no_grad():
        logits = [teacher(**model_inputs(b)).logits for b in batches]
    tokens = sum(b["input_ids"].numel() for b in batches)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    features = cpu_features()
    timed = run_precision("auto", "cpu") == "auto"
    print(f"CPU: {cpu_model()}; AVX-512 BF16: {bool(features.get('avx512_bf16'))}; AMX: "
          f"{bool(features.get('amx_bf16'))}; torch {torch.__version__}; {args.threads} threads; --precision auto "
          + ("times fp32 and bf16 for each stage here and trains in the faster (bf16 only where it saves 5%)"
             if timed else "trains in fp32 here (bf16 would be emulated)"))
    print(f"{len(batches)} MR batches of {args.batch_size}, {tokens / len(batches) / args.batch_size:.1f} tokens "
          f"a sentence as padded, {real / tokens:.1%} of them real (length-grouped batches); median of "
          f"{args.repeats} steps after {WARMUP} warm-up, fp32 and bf16 alternating")
    print(f"{'student / stage':34} {'precision':>15} {'teacher':>8} {'forward':>8} {'backward':>9} "
          f"{'optimizer':>9} {'step ms':>8} {'ex/s':>6} {'speed-up':>8}")
    with fixed_threads(args.threads):
        for name in args.students.split(","):
            student, recipe = build(name, teacher, data)
            for stage in recipe.stages:
                objective = DistillationObjective(stage, teacher, student, recipe.layer_map)
                stage_batches = [b if objective.needs_teacher_forward else b | {"teacher_logits": t}
                                 for b, t in zip(batches, logits, strict=True)]
                variants = (FACTORED, "fp32", "bf16") if student.config.relaxed else ("fp32", "bf16")
                phases = time_stage(objective, student, stage_batches, variants, args.repeats)
                step = {p: sum(ms.values()) for p, ms in phases.items()}
                before = step[variants[0]]
                for precision, ms in phases.items():
                    print(f"{name + ' / ' + stage.name:34} {precision:>15} {ms['teacher']:8.0f} {ms['forward']:8.0f} "
                          f"{ms['backward']:9.0f} {ms['optimizer']:9.0f} {step[precision]:8.0f} "
                          f"{args.batch_size * 1000 / step[precision]:6.0f} {before / step[precision]:7.2f}x")
                chosen = pick({"fp32": step["fp32"], "bf16": step["bf16"]}) if timed else "fp32"
                print(f"{name + ' / ' + stage.name:34} {'auto picks':>15} {chosen:>8}")


if __name__ == "__main__":
    main()
