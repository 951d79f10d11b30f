"""One student trained under recipe variants on the same seed, judged on the training sentences held out, paired.

    python benchmarks/recipe_mechanisms.py --method 'distilbert[num_layers=2]' --seed 13 \\
        --variants fast,fast+divergence,fast+divergence+average --out runs/mechanisms

Each variant is a named recipe (:mod:`compress.distill.schedule`) with some of its mechanisms changed: ``+divergence``
keeps the weights closest to the teacher's dev answers, evaluated four times an epoch; ``+average`` offers the weights'
exponential moving average (decay 0.99) beside them; ``+copyN`` makes N augmented copies; ``+perepochK`` lets each epoch
learn from K copies in turn (one where K is left out); ``+patienceN`` and ``+epochsN`` set those; ``+nopatience`` trains
to the ceiling; ``+teacher`` teaches a pipeline's recoveries the fine-tuned teacher's soft targets instead of their
parent's. Every run holds out ``--hold-out`` training sentences (the search's 2,062 on MR) and is made once (the run
store keeps it: running the script again only prints). For each variant the script prints its accuracy and retention on
the held-out sentences, on dev and on test (each retention with its 95% interval over that split's sentences, paired
with the teacher), its optimizer steps and training seconds, and its held-out accuracy minus the first variant's, paired
on the same sentences, with its 95% interval. A pipeline's steps and seconds are those of every step that trains.
``--plot FILE.png`` draws each variant's held-out retention (with its interval) against its optimizer steps.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import replace
from pathlib import Path

import torch

from compress.bench.machine import cpu_model
from compress.data.splits import SELECT
from compress.distill.schedule import SCHEDULES, Schedule
from compress.distill.teacher_logits import teacher_logits
from compress.predictions import Predictions, load_predictions
from compress.registry.pipeline import Step, parse
from compress.reports.records import read_run_record
from compress.runs.config import RunConfig, run_task
from compress.runs.pipeline import run
from compress.stats import difference_interval, retention_interval
from compress.teachers.finetune import finetune_teacher, tokenized_for


def variant(text: str) -> Schedule:
    """The schedule a variant names: a recipe, then ``+mechanism`` changes."""
    base, *changes = text.split("+")
    schedule = SCHEDULES[base]
    for change in changes:
        number = re.fullmatch(r"([a-z]+)(\d*)", change)
        if number is None:
            raise SystemExit(f"unknown change {change!r} in {text!r}")
        what, value = number.group(1), int(number.group(2) or 0)
        schedule = {
            "divergence": lambda s: replace(s, select="divergence", evals_per_epoch=4),
            "average": lambda s: replace(s, average=0.99),
            "copy": lambda s: replace(s, copies=value),
            "perepoch": lambda s: replace(s, copies_per_epoch=value or 1),
            "patience": lambda s: replace(s, patience=value),
            "nopatience": lambda s: replace(s, patience=None),
            "epochs": lambda s: replace(s, epochs=value),
            "teacher": lambda s: replace(s, taught_by="teacher"),
        }[what](schedule)
    return replace(schedule, name=text.replace("+", "_"), summary=f"the variant {text}")


def made_steps(steps: list[Step], recipe: str, args: argparse.Namespace) -> Path:
    """The run of the pipeline ``steps`` under ``recipe``, step by step, each made once: the first in
    ``OUT/METHOD-RECIPE-SEED`` (the directory this method alone would have, so a chain reuses its student's run), each
    later step from the one before, in that directory's name plus its own method; the last step's directory."""
    directory = None
    for step in steps:
        config = RunConfig(method=str(step), seed=args.seed, hold_out=args.hold_out, recipe=recipe, overwrite=True)
        if directory is None:
            directory = Path(args.out) / f"{re.sub(r'[^A-Za-z0-9._-]+', '-', str(step))}-{recipe}-{args.seed}"
        else:
            config, directory = replace(config, target=str(directory)), Path(f"{directory}-{step.name}")
        if not (directory / "metrics.json").is_file():
            run(replace(config, out=str(directory)), show_progress=False)
    assert directory is not None
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="distilbert[num_layers=2]")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--variants", default="fast,fast+divergence,fast+divergence+average")
    parser.add_argument("--hold-out", type=int, default=2062)
    parser.add_argument("--out", default="runs/mechanisms")
    parser.add_argument("--plot", help="a PNG of held-out retention against optimizer steps, one point a variant")
    args = parser.parse_args()
    torch.set_num_threads(2)

    names = args.variants.split(",")
    made = {}
    for name in names:
        schedule = variant(name)
        SCHEDULES[schedule.name] = schedule
        made[name] = made_steps(parse(args.method).steps, schedule.name, args)
        print(f"made {name}: {made[name]}", flush=True)

    config = RunConfig(method=args.method, seed=args.seed, hold_out=args.hold_out)
    task = run_task(config)
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, show_progress=False)
    data = tokenized_for(finetuned, task)
    teacher = finetuned.load().model
    splits = {"held-out": SELECT, "dev": "dev", "test": "test"}
    answers = {split: Predictions.of(teacher_logits(teacher, data, split, finetuned.record["fingerprint"],
                                                    torch.device("cpu"), show_progress=False),
                                     data.splits[split]["labels"]) for split in splits.values()}
    print(f"\n{args.method}, seed {args.seed}, on {cpu_model()}; teacher accuracy "
          + ", ".join(f"{label} {answers[split].correct.mean():.4f}" for label, split in splits.items()))
    print("| variant | held-out acc | held-out retention | dev retention | test retention | steps | training s | "
          "held-out minus first (points) |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    first, points = None, []
    for name, out in made.items():
        record = read_run_record(out)
        kept = {SELECT: record.select_predictions, "dev": record.dev_predictions, "test": record.predictions}
        student = {split: load_predictions(out, kept[split], split) for split in splits.values()}
        cells = []
        for split in splits.values():
            r = retention_interval(student[split].correct, answers[split].correct)
            cells.append(f"{r.estimate:.1%} ({r.low:.1%}-{r.high:.1%})".replace("%-", "-"))
        held_out = student[SELECT].correct
        if first is None:
            first, difference = held_out, "-"
        else:
            d = difference_interval(held_out, first)
            difference = f"{d.estimate * 100:+.2f} ({d.low * 100:+.2f} to {d.high * 100:+.2f})"
        stages = [stage for step in record.chain for stage in read_run_record(Path(step.run_dir)).stages] \
            if len(record.chain) > 1 else record.stages
        steps = sum(stage.get("steps", 0) for stage in stages)
        seconds = sum(stage.get("seconds", 0.0) for stage in stages)
        print(f"| {name} | {held_out.mean():.4f} | {' | '.join(cells)} | {steps:,} | {seconds:.0f} | {difference} |")
        print("  stages: " + json.dumps([{k: stage.get(k) for k in ("stage", "epochs", "best_epoch", "kept_step",
                                                                     "kept_average", "selected_on", "stop_reason",
                                                                     "cooldown_steps")} for stage in stages]))
        points.append((name, steps, retention_interval(held_out, answers[SELECT].correct)))
    if args.plot:
        plot(points, f"{args.method}, seed {args.seed}", Path(args.plot))


def plot(points: list, title: str, target: Path) -> None:
    """Held-out retention (with its 95% interval) against optimizer steps, a labelled point a variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for name, steps, r in points:
        axes.errorbar(steps, 100 * r.estimate, yerr=[[100 * (r.estimate - r.low)], [100 * (r.high - r.estimate)]],
                      fmt="o", capsize=3)
        axes.annotate(name, (steps, 100 * r.estimate), textcoords="offset points", xytext=(6, 4), fontsize=8)
    axes.set_xlabel("optimizer steps (all stages)")
    axes.set_ylabel("held-out retention of the teacher (%)")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.margins(x=0.25)   # room for the labels
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=120)
    print(f"plot: {target}")


if __name__ == "__main__":
    main()
