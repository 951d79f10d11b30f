"""`compress run prune`: score the heads, FFN neurons and layers of the fine-tuned teacher (or an earlier
run's student), remove the least important, recover by distillation from the unpruned model, write a run.

Run directory (written atomically, like every run)::

    config.json      the RunConfig, the prune options and the parent run (if any)
    student/         the pruned encoder (compress format: its blocks have their own shapes) + tokenizer
    importance.json  the scores of every step (heads, neurons, layers) and what each step kept
    head_curve.png   accuracy with 0-90% of the source's heads removed, importance against random order
    metrics.json     the run record with a ``pruning`` block; log.jsonl the recovery losses; report.md

One step (``steps=1``) scores once and cuts to the asked amount; ``steps=k`` cuts an equal share of
what goes k times, scoring again and recovering after each cut (iterative pruning).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compress.bench.inputs import speed_seq_len
from compress.data.batching import TokenizedTask
from compress.device import resolve_device
from compress.distill.layer_maps import LayerMap
from compress.distill.recipe import LossTerm, Recipe, Stage
from compress.errors import CompressError
from compress.methods.pipeline import Step
from compress.models.accounting import count_parameters
from compress.models.checkpoints import read_config, save_encoder
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.prune.curve import SHARES, head_curve, plot_head_curve
from compress.prune.importance import TARGETS, score
from compress.prune.options import PruneOptions
from compress.prune.select import LAYER_ORDERS, RANKINGS, Amount, choose
from compress.prune.structure import Keep, prune_model
from compress.reports.records import ChainStep, RunRecord, SourceRecord
from compress.reports.run_record import dataset_record, model_record, ratios, retention, weights_bytes, write_run_record
from compress.runs.config import RunConfig, RunResult, run_directory
from compress.runs.distillation import distil_stage, measure_models
from compress.runs.source import Source, claimed_source
from compress.teachers.registry import load_tokenizer, teacher_config
from compress.training import evaluate, seed_everything

KD_TEMPERATURE = 2.0


def check_pruning(config: RunConfig, options: PruneOptions) -> None:
    """Every check of a pruning run that needs no data, so a pipeline fails before its first step trains."""
    if config.epochs or config.lr or config.layer_map or config.patience:
        raise CompressError("prune recovers with --recovery-epochs and --recovery-lr; --epochs, --lr, --layer-map "
                            "and --patience do not apply.")
    for flag, value in (("--keep-heads", options.keep_heads), ("--keep-ffn", options.keep_ffn)):
        if not 0 < value <= 1:
            raise CompressError(f"{flag} is the share to keep and must be in (0, 1], got {value}.")
    for flag, value, least in (("--drop-layers", options.drop_layers, 0), ("--steps", options.steps, 1),
                               ("--recovery-epochs", options.recovery_epochs, 0),
                               ("--scoring-examples", options.scoring_examples, 1)):
        if value < least:
            raise CompressError(f"{flag} must be an integer >= {least}, got {value}.")
    if not options.recovery_lr > 0:
        raise CompressError(f"--recovery-lr must be positive, got {options.recovery_lr}.")
    for flag, value, allowed in (("--layer-order", options.layer_order, LAYER_ORDERS),
                                 ("--ranking", options.ranking, RANKINGS),
                                 ("--score-against", options.score_against, TARGETS)):
        if value not in allowed:
            raise CompressError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}.")
    if config.target != "teacher" and not Path(config.target).is_dir():
        raise CompressError(f"--target must be 'teacher' or a run directory; {config.target!r} is neither.")
    check_layers(options, teacher_config(config.teacher) if config.target == "teacher" else
                 read_config(Path(config.target) / "student")[0])


def check_layers(options: PruneOptions, shape: EncoderConfig) -> None:
    """The checks of ``--drop-layers`` against the model that will be pruned."""
    if options.drop_layers >= shape.num_layers:
        raise CompressError(f"--drop-layers {options.drop_layers} would remove every layer: the model has "
                            f"{shape.num_layers}.")
    if options.drop_layers and shape.sharing != "none" and shape.groups > 1:
        raise CompressError("--drop-layers cannot remove layers of a model that shares blocks in several groups.")


def step_amounts(options: PruneOptions) -> list[Amount]:
    """The cuts of each step as shares of the model that step cuts, so that after every step the whole
    cut so far is (step / steps) of the asked one; layers are all dropped by the first step."""
    amounts = []
    for step in range(1, options.steps + 1):
        def share(keep: float) -> float:
            before, after = (1 - (1 - keep) * (step - 1) / options.steps), (1 - (1 - keep) * step / options.steps)
            return after / before
        amounts.append(Amount(heads=share(options.keep_heads), neurons=share(options.keep_ffn),
                              drop_layers=options.drop_layers if step == 1 else 0, ranking=options.ranking,
                              layer_order=options.layer_order))
    return amounts


def recovery_recipe(options: PruneOptions, kept_layers: tuple[int, ...]) -> Recipe:
    """Distillation from the unpruned model after each pruning step (none with ``--recovery-epochs 0``): its
    soft targets and, layer by layer, its hidden states (same width, so no projection: kept layer i faces
    the unpruned model's layer i). One stage per step, so the recipe lists exactly the stages a run trains."""
    terms = [LossTerm("kd_kl", 1.0, {"temperature": KD_TEMPERATURE, "scale_by_t2": True}),
             LossTerm("hidden_mse", 1.0)]
    stages = [Stage(f"recover {number}/{options.steps}", terms, epochs=options.recovery_epochs, lr=options.recovery_lr)
              for number in range(1, options.steps + 1)] if options.recovery_epochs else []
    return Recipe("prune", stages, LayerMap("explicit", tuple(i + 1 for i in kept_layers)))


def scoring_batches(data: TokenizedTask, examples: int, seed: int) -> list[dict[str, torch.Tensor]]:
    """The first ``examples`` training examples of a seeded shuffle, in batches of 32."""
    batches = []
    for batch in data.dataloader("train", batch_size=32, shuffle=True, seed=seed):
        batches.append(batch)
        if sum(len(b["input_ids"]) for b in batches) >= examples:
            break
    return batches


def prune_run(config: RunConfig, options: PruneOptions, show_progress: bool = True,
              pipeline: str | None = None) -> RunResult:
    """Prune ``config.target`` (the teacher or a run directory) as ``options`` say and write a run directory."""
    check_pruning(config, options)
    with claimed_source(config, show_progress) as (config, source, out):
        return _prune(config, options, source, out, show_progress, pipeline)


def _prune(config: RunConfig, options: PruneOptions, source: Source, out: Path, show_progress: bool,
           pipeline: str | None) -> RunResult:
    device = resolve_device(config.device)
    data = source.data
    reference = source.model.to(device).eval()
    start = time.perf_counter()
    with run_directory(out) as tmp, open(tmp / "log.jsonl", "w") as log:
        batches = scoring_batches(data, options.scoring_examples, config.seed)
        model: Encoder = reference
        first: Keep | None = None
        steps, stages = [], []
        for number, amount in enumerate(step_amounts(options), 1):
            passes = len(batches) * (1 + model.config.num_layers)
            with _bar(show_progress, f"prune: importance {number}/{options.steps}", passes) as tick:
                importance = score(model, batches, device, options.score_against, tick)
            if number == 1 and options.head_curve:
                with _bar(show_progress, "prune: head-importance curve", 2 * len(SHARES)) as tick:
                    curve = head_curve(reference, importance, lambda m: _accuracy(m, data, device, tick), config.seed)
                plot_head_curve(curve, tmp / "head_curve.png", _name(source))
            keep = choose(model.config, importance, amount)
            model = prune_model(model, keep)
            first = first or keep
            steps.append({"step": number, "importance": importance.to_dict(), "kept": asdict(keep),
                          "params": count_parameters(model).total})
            if options.recovery_epochs:
                seed_everything(config.seed + number)
                recipe = recovery_recipe(options, first.layers)
                # The recipe reads hidden states, so the unpruned model runs on every batch and no cache of
                # its logits (keyed by a teacher fingerprint, which a run's student has not) is made.
                stages.append(distil_stage(recipe.stages[number - 1], recipe, reference, model, data, "", config,
                                           device, log, show_progress))
        # metrics.json says what each step kept; the scores themselves (a number per head, neuron and
        # layer) are in importance.json only.
        summary = [{k: v for k, v in step.items() if k != "importance"} | {"examples": step["importance"]["examples"]}
                   for step in steps]
        pruning = {"options": asdict(options), "steps": summary, "source_config": reference.config.to_dict(),
                   "layers_kept": list(first.layers)}
        if options.head_curve:
            pruning["head_curve"] = curve
        (tmp / "importance.json").write_text(json.dumps(steps, indent=1))
        extra = {"options": asdict(options), "recipe": recovery_recipe(options, first.layers).to_dict()}
        record = write_pruned_run(tmp, out, config, source, model, data, load_tokenizer(str(source.directory)),
                                  method="prune", stages=stages, pruning=pruning, extra_config=extra,
                                  seconds=time.perf_counter() - start, pipeline=pipeline)
    return RunResult(out, record)


def write_pruned_run(tmp: Path, out: Path, config: RunConfig, source: Source, model: Encoder, data: TokenizedTask,
                     tokenizer: Any, *, method: str, stages: list[dict[str, Any]], pruning: dict[str, Any],
                     extra_config: dict[str, Any], seconds: float, pipeline: str | None) -> RunRecord:
    """Evaluate a pruned model on the test split of ``data``, time it against its source in this process,
    and write student/, metrics.json, config.json and report.md into ``tmp`` (the run ``out``'s temporary)."""
    device = next(model.parameters()).device
    test = evaluate(model, data.dataloader("test", batch_size=128), device)
    model.cpu()
    # Each on its own inputs (a pruned vocabulary numbers the tokens differently) of the same length.
    seq_len = speed_seq_len(source.data)
    speed = measure_models(config, source.data, seq_len, source=source.model.cpu()) | \
        measure_models(config, data, seq_len, student=model)
    layout = save_encoder(model, tmp / "student", tokenizer=tokenizer, label_names=source.task.label_names)
    student = model_record(model, test, data.max_length, weights_bytes(tmp / "student"), layout=layout,
                           config=model.config.to_dict())
    entry, teacher = source.entry, source.teacher
    record = RunRecord(
        method=method, kind="pruning", seconds=round(seconds, 1), seq_len=data.max_length,
        dataset=dataset_record(source.task), teacher=teacher, student=student,
        source=SourceRecord(source.kind, str(source.directory), source.parent, entry.params, entry.size_bytes,
                            entry.accuracy, entry.macro_f1),
        retention=retention(teacher, student), ratios=ratios(teacher, student), stages=stages,
        chain=[*source.chain, ChainStep.of(str(Step(method, config.options)), out, student, speed["student"])],
        speed=speed | ({"teacher": speed["source"]} if source.kind == "teacher" else {}), pruning=pruning,
    )
    full_config = {"run": asdict(config), **extra_config, "source": asdict(record.source), "parent": source.parent,
                   "teacher": source.teacher_name, "max_length": data.max_length}
    if pipeline:
        full_config["pipeline"] = pipeline
    write_run_record(tmp, record, full_config, seed=config.seed)
    return record


def _name(source: Source) -> str:
    return source.teacher_name if source.kind == "teacher" else Path(source.parent or "").name


def _accuracy(model: Encoder, data: TokenizedTask, device: torch.device, tick: Callable[[], None]) -> float:
    accuracy = evaluate(model, data.dataloader("test", batch_size=128), device).accuracy
    tick()
    return accuracy


@contextmanager
def _bar(show: bool, description: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr (stdout stays clean for --json); yields the function that advances it."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=not show, console=Console(stderr=True)) as progress:
        task = progress.add_task(escape(description), total=total)
        yield lambda: progress.advance(task)

