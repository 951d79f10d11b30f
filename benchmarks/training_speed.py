"""Every student's training step before and after round 5, split by phase: fp32 against bf16 autocast, with the
teacher run in every step against its outputs read from the cache.

    python benchmarks/training_speed.py                       # every student of minilm on MR, 2 threads
    python benchmarks/training_speed.py --students albert,distilbert --repeats 10

For each student (and each stage of its recipe; pruning's and low-rank's recovery too) this builds the model
as its run does, takes real MR training batches as a run draws them (length-grouped, batch 32), and times the step
``compress.training.train_stage`` takes, phase by phase: the teacher (its forward pass, or reading and padding its
stored outputs: :mod:`compress.distill.teacher_targets`), the student's forward pass with the loss, the backward pass,
and the optimizer (zero_grad, clipping, fused AdamW). A stage that reads only logits reads them from their cache
either way. The variants alternate step by step in one process, after warm-up steps; each phase is the median over
``--repeats`` steps. A relaxed ALBERT (``albert[rank=48]``) is also timed as the recipe before round 4 ran it: fp32
with each layer's delta applied as its two factors (``compress.models.encoder.merges``).

Prints the CPU: bf16 pays where the CPU computes it natively (AVX-512 BF16 or AMX), not always even there (pruned
and factorized matrices), and is emulated, slowly, elsewhere; which is why ``--precision auto`` trains in fp32 where
bf16 is emulated and elsewhere times each stage's own steps (``compress.step_precision``). Each stage ends with two
lines: "before" is round 4's default (bf16 wherever the CPU has bf16 units, fp32 elsewhere; the teacher in every
step), "after" today's (auto's pick by the rule of ``compress.step_precision`` applied to the steps timed here; the
teacher's outputs stored), with the speed-up of after over before.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from contextlib import contextmanager

import torch

from compress.bench.machine import cpu_features, cpu_model
from compress.bench.timing import fixed_threads
from compress.data.batching import length_grouped_batches
from compress.data.load import load_task
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import Recipe
from compress.distill.teacher_targets import StoredTargets, TargetSpec, stored_targets
from compress.models import encoder
from compress.models.encoder import Encoder
from compress.registry import Context, get_method
from compress.step_precision import pick
from compress.teachers.finetune import finetune_teacher, tokenized_for
from compress.training import PRECISIONS, TrainConfig, make_optimizer, run_precision

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


STORED = " stored"   # a variant's suffix: the teacher's outputs read from their cache, not computed


def time_stage(objective: DistillationObjective, student: Encoder, batches: list[tuple[dict[str, torch.Tensor],
               list[int]]], targets: StoredTargets, variants: tuple[str, ...], repeats: int
               ) -> dict[str, dict[str, float]]:
    """Median milliseconds of each phase of a step, per variant (a precision, or FACTORED; with the ``STORED``
    suffix the step reads the teacher's stored outputs; the variants alternate step by step). ``batches``: each
    batch with its examples' positions in the train split."""
    optimizer = make_optimizer(student, list(objective.projections.parameters()), TrainConfig())
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
    times: dict[str, dict[str, list[float]]] = {v: {phase: [] for phase in PHASES} for v in variants}
    for i in range(WARMUP + repeats):
        base, index = batches[i % len(batches)]
        logits = targets.batch(index, base["input_ids"].shape[1])["teacher_logits"]
        for variant in variants if i % 2 == 0 else variants[::-1]:
            precision = variant.removesuffix(STORED)
            dtype = PRECISIONS.get(precision)
            spent["teacher"] = 0.0
            start = time.perf_counter()
            if variant.endswith(STORED):   # what TargetsCollator adds to the batch
                batch = base | targets.batch(index, base["input_ids"].shape[1])
                spent["teacher"] = time.perf_counter() - start
            else:                          # the teacher runs, but logits come from their cache as they always have
                batch = base if objective.needs_teacher_forward else base | {"teacher_logits": logits}
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
                    times[variant][phase].append(seconds)
    objective.teacher_outputs = teacher_forward   # type: ignore[method-assign]
    return {v: {phase: statistics.median(t) * 1000 for phase, t in phases.items()} for v, phases in times.items()}


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
    examples = data.splits["train"]
    order = length_grouped_batches([len(ids) for ids in examples["input_ids"]], args.batch_size, seed=13)
    batches = [(data.collator([examples[i] for i in index]), index) for index in order[:WARMUP + args.repeats]]
    tokens = sum(b["input_ids"].numel() for b, _ in batches)
    real = sum(int(b["attention_mask"].sum()) for b, _ in batches)
    features = cpu_features()
    timed = run_precision("auto", "cpu") == "auto"
    before = "bf16" if timed else "fp32"   # round 4's auto: bf16 wherever the CPU has bf16 units
    print(f"CPU: {cpu_model()}; AVX-512 BF16: {bool(features.get('avx512_bf16'))}; AMX: "
          f"{bool(features.get('amx_bf16'))}; torch {torch.__version__}; {args.threads} threads; --precision auto "
          + ("times fp32 and bf16 for each stage here and trains in the faster (bf16 only where it saves 5%)"
             if timed else "trains in fp32 here (bf16 would be emulated)"))
    print(f"{len(batches)} MR batches of {args.batch_size}, {tokens / len(batches) / args.batch_size:.1f} tokens "
          f"a sentence as padded, {real / tokens:.1%} of them real (length-grouped batches); median of "
          f"{args.repeats} steps after {WARMUP} warm-up, the variants alternating")
    print(f"{'student / stage':34} {'variant':>20} {'teacher':>8} {'forward':>8} {'backward':>9} "
          f"{'optimizer':>9} {'step ms':>8} {'ex/s':>6} {'speed-up':>8}")
    with fixed_threads(args.threads):
        for name in args.students.split(","):
            student, recipe = build(name, teacher, data)
            for stage in recipe.stages:
                objective = DistillationObjective(stage, teacher, student, recipe.layer_map)
                spec = objective.targets if objective.targets is not None else TargetSpec()
                targets = stored_targets(teacher, data, "train", finetuned.record["fingerprint"], spec,
                                         torch.device("cpu"), show_progress=False)
                stored = targets is not None and not spec.logits_only
                variants = ("fp32", "bf16") + (("fp32" + STORED, "bf16" + STORED) if stored else ())
                if student.config.relaxed:
                    variants = (FACTORED, *variants)
                phases = time_stage(objective, student, batches, targets, variants, args.repeats)
                step = {v: sum(ms.values()) for v, ms in phases.items()}
                label = name + " / " + stage.name
                for variant, ms in phases.items():
                    print(f"{label:34} {variant:>20} {ms['teacher']:8.0f} {ms['forward']:8.0f} "
                          f"{ms['backward']:9.0f} {ms['optimizer']:9.0f} {step[variant]:8.0f} "
                          f"{args.batch_size * 1000 / step[variant]:6.0f} {step[variants[0]] / step[variant]:7.2f}x")
                suffix = STORED if stored else ""
                chosen = pick({"fp32": step["fp32" + suffix], "bf16": step["bf16" + suffix]}) if timed else "fp32"
                was = FACTORED if student.config.relaxed else before
                print(f"{label:34} {'before':>20} {was:>8}: {step[was]:.0f} ms (round 4's default; the teacher in "
                      f"every step)")
                print(f"{label:34} {'after':>20} {chosen + suffix:>8}: {step[chosen + suffix]:.0f} ms, "
                      f"{step[was] / step[chosen + suffix]:.2f}x (auto's pick"
                      f"{'; the teacher read from its cache' if stored else ''})")

if __name__ == "__main__":
    main()
