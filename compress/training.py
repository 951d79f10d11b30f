"""The one training loop, for fine-tuning and for distillation.

A stage trains one model on the train split with a loss function of (model, batch); the loop does
the rest: AdamW with linear warm-up and decay, gradient clipping, evaluation on dev after each
epoch, early stopping, keeping the best checkpoint, seeded shuffling and dropout, a rich progress
bar, and a JSON-lines log with the losses of every step. Distillation stages pass a loss function
that calls the teacher; fine-tuning (:mod:`compress.teachers.finetune`) passes cross-entropy with the
gold labels. The loop knows no loss of its own, so :mod:`compress.distill` builds on it, not around it.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import IO

import numpy as np
import torch
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import nn

from compress.distributed import World, all_gather, all_sum, average_gradients, local_slice, same_start, world
from compress.errors import CompressError
from compress.kept_weights import KeptWeights, WeightAverage
from compress.metrics import Metrics, metrics_of
from compress.models.config import INPUT_NAMES
from compress.models.encoder import Encoder
from compress.resume import StageCheckpoints, TrainState, rng_state, set_rng_state
from compress.step_precision import TIMED_STEPS, choose_precision, shape_key
from compress.task_metrics import default_metric
from compress.train_config import FP16_OFF_CUDA, PRECISION_NAMES, TrainConfig

Batch = dict[str, torch.Tensor]
# A loss function returns the loss to minimise and its named parts (floats, for the log).
LossFn = Callable[[nn.Module, Batch], tuple[torch.Tensor, dict[str, float]]]


# Training precision: the forward pass under torch.autocast in this dtype; weights, optimizer state and
# gradients stay fp32. fp16 needs loss scaling (torch.amp.GradScaler), which compress does on CUDA only.
PRECISIONS = dict(zip(PRECISION_NAMES, (None, torch.bfloat16, torch.float16), strict=True))


def slow_bf16_warning(precision: str, device: torch.device) -> str | None:
    """A sentence for bf16 training on a CPU without bf16 arithmetic (AVX-512 BF16 or AMX), else None."""
    if precision != "bf16" or device.type != "cpu" or native_bf16("cpu"):
        return None
    return ("this CPU has no bf16 arithmetic (no AVX-512 BF16 or AMX), so bf16 autocast is emulated: a training "
            "step measured 16x slower than fp32 on an AVX2 EPYC (benchmarks/training_speed.py times yours).")


def autocast(precision: str, device: torch.device) -> torch.autocast:
    """The forward passes of a run in its precision: torch.autocast in bf16 / fp16, or nothing for fp32."""
    dtype = PRECISIONS[precision]
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def native_bf16(device: str) -> bool:
    """Whether ``device`` (``auto``, ``cpu`` or ``cuda``) computes bf16 natively: a CUDA GPU that supports it, or
    a CPU with AVX-512 BF16 or AMX."""
    if _on_cuda(device):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    from compress.bench.machine import cpu_features

    features = cpu_features()
    return bool(features.get("avx512_bf16") or features.get("amx_bf16"))


def resolve_precision(precision: str, device: str) -> str:
    """The precision of forward passes that are not timed first (a teacher's fine-tuning, pruning's scoring):
    ``auto`` is bf16 autocast where ``device`` computes bf16 natively, else fp32; any other name is itself."""
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device) else "fp32"


def run_precision(precision: str, device: str) -> str:
    """What a run records it asked for: ``auto`` stays ``auto`` on CUDA and where the CPU computes bf16 natively
    (each training stage then times the precisions the device computes and trains in the fastest:
    :mod:`compress.step_precision`) and is fp32 on a CPU where bf16 would be emulated (16x slower); any other name
    is itself."""
    if precision != "auto":
        return precision
    return "auto" if _on_cuda(device) or native_bf16(device) else "fp32"


def _on_cuda(device: str) -> bool:
    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


def check_precision(precision: str, device: torch.device) -> None:
    """One sentence, before any training, when ``precision`` (a known one) cannot train on ``device``."""
    if precision == "fp16" and device.type != "cuda":
        raise CompressError(FP16_OFF_CUDA)
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise CompressError(f"--precision bf16 was asked for but {torch.cuda.get_device_name(device)} does not "
                            "compute bf16; use --precision fp16 or auto.")


@dataclass
class StageResult:
    """What a stage produced: the dev metrics per epoch and which epoch was kept."""

    history: list[dict[str, str | int | float]] = field(default_factory=list)
    best_epoch: int = 0
    best_dev: dict[str, float] | None = None
    seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str | None = None     # "patience" or "bar" (see TrainConfig.stop_below) when it stopped early
    precision: str = "fp32"            # what it trained in (auto resolved)
    step_ms: dict[str, float] | None = None   # under auto: the median step it timed in each precision
    warnings: list[str] = field(default_factory=list)
    examples: int = 0                  # examples trained on (every epoch's)
    steps: int = 0                     # optimizer steps taken
    step_seconds: float = 0.0          # seconds spent in training steps (not evaluating, not checkpointing)
    examples_per_second: float | None = None  # examples / step_seconds
    peak_memory_bytes: int | None = None       # on CUDA: the most the stage held allocated on the GPU
    cooldown_steps: int | None = None  # stopped by patience: the steps its learning rate took to decay to zero
    kept_step: int = 0                 # the optimizer step the kept weights were taken at
    kept_average: bool = False         # the kept weights are the running average's


def seed_everything(seed: int) -> None:
    """Seed torch and numpy so the same seed gives the same run."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def to_device(batch: Batch, device: torch.device) -> Batch:
    """The batch's tensors on ``device``; to a GPU without waiting for the copies (from pinned memory they overlap
    the work already queued there)."""
    device = torch.device(device)
    return {k: v.to(device, non_blocking=device.type == "cuda") for k, v in batch.items()}


def model_inputs(batch: Batch) -> dict[str, torch.Tensor]:
    """The encoder's inputs out of a collated batch."""
    return {k: batch[k] for k in INPUT_NAMES}


@torch.inference_mode()
def predict(model: Encoder, batches: Iterable[Batch], device: torch.device,
            collective: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and gold labels over ``batches`` (the model is put in eval mode), in the order of the batches' ``index``
    (their examples' positions in the split: :meth:`compress.data.batching.TokenizedTask.eval_batches`) where they
    carry one, else in the order they come.

    ``collective``: every rank of a data-parallel run passes the same batches and computes its slice of
    each; the slices are gathered back in order, so every rank gets every example's logits once.
    """
    model.eval()
    ranks = world() if collective else World()
    parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None] = []
    for batch in batches:
        batch = local_slice(batch, ranks)
        index = batch.get("index")
        batch = to_device(batch, device)
        parts.append((model(**model_inputs(batch)).logits.float().cpu(), batch["labels"].cpu(), index)
                     if len(batch["labels"]) else None)
    ordered = [part for batch in zip(*all_gather(parts)) for part in batch if part is not None] \
        if ranks.size > 1 else [part for part in parts if part is not None]
    logits, labels = torch.cat([p[0] for p in ordered]), torch.cat([p[1] for p in ordered])
    if ordered and ordered[0][2] is not None:
        order = torch.cat([p[2] for p in ordered]).argsort()   # type: ignore[misc]
        logits, labels = logits[order], labels[order]
    return logits, labels


def _measured_precision(model: Encoder, loss_fn: LossFn, train_batches: Callable[[int], Iterable[Batch]],
                        extra: list[nn.Parameter], name: str,
                        device: torch.device) -> tuple[str, dict[str, float] | None]:
    """The precision ``auto`` trains this stage in, timed on its first training batches (or read from the
    cache: :func:`compress.step_precision.choose_precision`). The model, its gradients and the random
    generators are left as they were, so a run trains the same whether it timed or read the choice."""
    state = rng_state()
    w = world()
    batches = [to_device(local_slice(batch, w), device)
               for batch in itertools.islice(train_batches(0), 1 + TIMED_STEPS)]
    trained = [p for p in [*model.parameters(), *extra] if p.requires_grad]

    def step(precision: str, batch: Batch) -> None:
        with autocast(precision, device):
            loss, _ = loss_fn(model, batch)
        loss.backward()
        for p in trained:
            p.grad = None

    if not batches:
        return "fp32", None
    model.train()
    try:
        key = {"stage": name, "shapes": shape_key(model, loss_fn), "batch_size": len(batches[0]["input_ids"])}
        choice = choose_precision(step, batches, device, key)
    finally:
        set_rng_state(state)
    return choice.precision, choice.step_ms


def out_of_reach(config: TrainConfig, scores: list[float], epochs_done: int) -> str | None:
    """Why a stage cannot reach ``config.stop_below`` any more, or None: after ``epochs_done`` of ``config.epochs``
    epochs with dev ``scores`` (one per epoch), the best so far plus, for every epoch left, the larger of
    ``config.gain_per_epoch`` and the largest gain one epoch has made in this stage, is still below the bar.
    A stage that selects on its loss (no accuracy to compare) is never stopped this way."""
    left = config.epochs - epochs_done
    if config.stop_below is None or config.metric == "loss" or not scores or left < 1:
        return None
    gain = max([config.gain_per_epoch, *(b - a for a, b in zip(scores, scores[1:]))])
    reachable = max(scores) + left * gain
    if reachable >= config.stop_below:
        return None
    return (f"dev {config.metric} {max(scores):.4f} after {epochs_done} of {config.epochs} epochs cannot reach "
            f"{config.stop_below:.4f} (at most {reachable:.4f} with {gain:.4f} an epoch)")


def no_better_than_majority(accuracy: float, labels: torch.Tensor) -> float | None:
    """The majority class's share of ``labels`` when ``accuracy`` is not above it by more than one
    standard error (a model that learned nothing, answering one class), else None."""
    n = len(labels)
    if n == 0:
        return None
    majority = float(torch.bincount(labels).max()) / n
    return majority if accuracy <= majority + math.sqrt(majority * (1 - majority) / n) else None


def stage_metric(metric: str, dev: dict[str, float]) -> str:
    """The dev metric that picks a stage's best epoch: ``metric``, or where it does not score the task (a
    classification metric of a regression stage: the default of every TrainConfig) the task's default metric."""
    if metric in dev:
        return metric
    return default_metric(regression="pearson" in dev).name


def not_learning(dev: dict[str, float], labels: torch.Tensor) -> str | None:
    """What says a model has learned nothing, or None: a classifier's dev accuracy no better than the majority class
    (:func:`no_better_than_majority`), unless on two classes its Matthews correlation is more than two standard errors
    above 0 (on unbalanced classes a model that learned can still be near the majority's accuracy); a regression's dev
    Pearson correlation within two standard errors of 0 (|r| <= 2 / sqrt(n), as a constant or random output gives)."""
    bound = 2 / math.sqrt(max(len(labels), 1))
    if "pearson" in dev:
        return (f"dev Pearson correlation is {dev['pearson']:.4f}, no further from 0 than {bound:.4f} (two standard "
                "errors)") if abs(dev["pearson"]) <= bound else None
    if dev.get("mcc", 0.0) > bound:
        return None
    majority = no_better_than_majority(dev["accuracy"], labels)
    return (f"dev accuracy is {dev['accuracy']:.4f}, no better than always answering the most frequent class "
            f"({majority:.4f})") if majority is not None else None


def evaluate(model: Encoder, batches: Iterable[Batch], device: torch.device, collective: bool = False) -> Metrics:
    """Metrics of ``model`` on ``batches`` (shared out over the ranks of a data-parallel run if ``collective``)."""
    return metrics_of(*predict(model, batches, device, collective))


def make_optimizer(model: nn.Module, extra: list[nn.Parameter], config: TrainConfig) -> torch.optim.AdamW:
    """AdamW without weight decay on biases and LayerNorms, and with layer-wise lr decay when asked."""
    groups: dict[tuple[float, float], list[nn.Parameter]] = {}
    scales = _layer_lr_scales(model, config.layer_decay)
    for name, p in model.named_parameters():
        if p.requires_grad:
            decay = 0.0 if p.ndim < 2 or "layer_norm" in name else config.weight_decay
            groups.setdefault((scales(name), decay), []).append(p)
    if extra:
        groups.setdefault((1.0, config.weight_decay), []).extend(extra)
    # fused: one kernel for all parameters; the per-tensor loop is ~30x slower on CPU here.
    return torch.optim.AdamW([{"params": params, "lr": config.lr * scale, "weight_decay": decay}
                              for (scale, decay), params in groups.items()], lr=config.lr, fused=True)


_LAYER = re.compile(r"^(?:attention|ffn)\.(\d+)\.")


def _layer_lr_scales(model: nn.Module, decay: float) -> Callable[[str], float]:
    """The lr multiplier of each parameter name under layer-wise decay (Howard & Ruder 2018; ELECTRA):
    the classifier and pooler learn at the full rate, layer ``l`` (1-based) of ``L`` at
    ``decay ** (L + 1 - l)`` and the embeddings at ``decay ** (L + 1)``, so the layers nearest the
    input, which hold the most general features, move least."""
    if decay == 1.0:
        return lambda name: 1.0
    config = getattr(model, "config", None)
    if not isinstance(model, Encoder) or config.sharing != "none":
        raise CompressError("layer-wise lr decay needs an encoder with its own weights in every layer, and this "
                            "one shares them across layers; pass --layer-decay 1.")
    top = config.num_layers + 1

    def scale(name: str) -> float:
        if name.startswith("embeddings."):
            return decay ** top
        layer = _LAYER.match(name)
        return decay ** (top - 1 - int(layer.group(1))) if layer else 1.0

    return scale


def _schedule(optimizer: torch.optim.Optimizer, total: int, warmup_ratio: float,
              decay: str = "linear") -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``warmup_ratio`` of the ``total`` steps, then ``decay``: linear or cosine to zero at the
    last step, or constant. A stage that stops early (patience) stops on the way down."""
    warmup = int(total * warmup_ratio)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        left = max(0.0, (total - step) / max(1, total - warmup))
        if decay == "constant":
            return 1.0
        if decay == "cosine":
            return 0.5 * (1 - math.cos(math.pi * left))
        return left

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _progress(show: bool, *fields: TextColumn) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), *fields,
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), disable=not show,
        console=Console(stderr=True),  # stdout stays clean for --json
    )


@contextmanager
def ticking(show: bool, description: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr (stdout stays clean for --json) for ``total`` pieces of work that trains nothing,
    shown by the main process only; yields the function that advances it by one."""
    with _progress(show and world().is_main) as progress:
        task = progress.add_task(escape(description), total=total)
        yield lambda: progress.advance(task)


def with_progress(batches: Iterable[Batch], description: str, show: bool = True) -> Iterator[Batch]:
    """The batches of a sized iterable, under a progress bar on stderr (without a terminal: a line every
    tenth), shown by the main process only: for long passes that train nothing, such as the teacher's logits."""
    total = len(batches)  # type: ignore[arg-type]  # a DataLoader knows its length
    with _progress(show and world().is_main) as progress:
        bar = progress.add_task(escape(description), total=total)
        plain_every = max(1, total // 10) if not progress.disable and not progress.console.is_terminal else 0
        for done, batch in enumerate(batches, 1):
            yield batch
            progress.update(bar, advance=1)
            if plain_every and done % plain_every == 0:
                progress.console.print(f"{escape(description)}: {done}/{total} batches")


def train_stage(
    model: Encoder,
    loss_fn: LossFn,
    train_batches: Callable[[int], Iterable[Batch]],
    dev_batches: Callable[[], Iterable[Batch]],
    config: TrainConfig,
    *,
    device: torch.device,
    name: str = "train",
    log: IO[str] | None = None,
    extra_parameters: list[nn.Parameter] | None = None,
    evaluate_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    divergence_fn: Callable[[torch.Tensor], float] | None = None,
    show_progress: bool = True,
    checkpoints: StageCheckpoints | None = None,
) -> StageResult:
    """Train ``model`` for one stage and leave it holding the weights the stage keeps.

    ``train_batches(epoch)`` yields the shuffled training batches of an epoch (so shuffling is seeded per epoch);
    ``dev_batches()`` the dev batches. ``extra_parameters`` are trained too (distillation projections).
    ``evaluate_fn(model)`` replaces the dev classification metrics when a stage has no classifier to improve (an
    intermediate-layer stage returns its dev ``loss``). ``divergence_fn(dev_logits)`` measures the dev answers
    against the teacher's (lower is closer): with ``config.select == "divergence"`` it chooses the kept weights, the
    gold-label metrics staying in the log. The stage is evaluated at every epoch's end and every ``config.eval_every``
    steps (or ``config.evals_per_epoch`` times an epoch); with ``config.average`` its running average is evaluated
    beside it (:mod:`compress.kept_weights`). A stage stopped by patience first cools down: its learning rate decays to
    zero over ``config.cooldown`` of an epoch, and the weights it reaches are judged too. ``checkpoints`` saves the
    training state every so many steps and at every epoch end, and continues from a saved one; under a launcher,
    every rank trains on its slice of each batch.
    """
    seed_everything(config.seed)
    check_precision(config.precision, device)
    if config.select == "divergence" and divergence_fn is None:
        raise ValueError("selecting on the divergence from the teacher needs a divergence_fn.")
    model.to(device)
    extra = extra_parameters or []
    w = world()
    restored = checkpoints.restored if checkpoints else None
    if restored is not None and "precision" in restored["result"]:   # what it began in, timed or not
        precision, step_ms = restored["result"]["precision"], restored["result"]["step_ms"]
    elif config.precision == "auto":
        precision, step_ms = _measured_precision(model, loss_fn, train_batches, extra, name, device)
    else:
        precision, step_ms = config.precision, None
    steps_per_epoch = len(train_batches(0))  # type: ignore[arg-type]
    total = steps_per_epoch * config.epochs
    eval_every = config.eval_every or math.ceil(steps_per_epoch / config.evals_per_epoch)
    stepper = _Stepper(model, loss_fn, extra, config, precision, device, total)
    average = WeightAverage(model, config.average) if config.average else None
    kept = KeptWeights()
    result = StageResult(precision=precision, step_ms=step_ms)
    bad_epochs, first_epoch, skip, before = 0, 0, 0, 0.0
    if restored is not None:
        first_epoch, skip = restored["epoch"], restored["batches"]
        stepper.restore(restored)
        if average is not None:
            average.load_state_dict(restored["average"])  # type: ignore[arg-type]
        # Making a DataLoader's iterator draws from torch's generator. A checkpoint taken inside an epoch
        # (skip > 0) was saved after its iterator was made: make it first, then restore, as the run did.
        if not skip:
            set_rng_state(restored["rng"])
        kept, bad_epochs = KeptWeights.of(restored["kept"]), restored["bad_epochs"]
        result = StageResult(**restored["result"])
        before = result.seconds

    def save(epoch: int, batches: int, evaluating: bool = False) -> None:
        if log is not None:
            log.flush()
        result.seconds = before + time.perf_counter() - start
        checkpoints.save(_train_state(stepper, average, kept, bad_epochs, result,  # type: ignore[union-attr]
                                      epoch=epoch, batches=batches, evaluating=evaluating))

    def log_step(epoch: int, loss_value: float, parts: dict[str, float]) -> None:
        if log is not None:
            log.write(json.dumps({"stage": name, "epoch": epoch + 1, "step": stepper.step, "loss": loss_value,
                                  **parts, "lr": stepper.scheduler.get_last_lr()[0]}) + "\n")

    def judge(epoch: int, at_end: bool) -> dict[str, float]:
        """Evaluate the trained weights (and their average) on dev, offer them to ``kept`` and log them; the trained
        weights' scores. ``at_end``: the epoch's own evaluation, which its history keeps."""
        offered = [(model, False)] + ([(average.model, True)] if average is not None else [])
        dev: dict[str, float] = {}
        for candidate, averaged in offered:
            scores = _dev_scores(candidate, evaluate_fn, divergence_fn, dev_batches, device)
            better = kept.offer(_selection_score(config, scores), candidate, epoch=epoch + 1, step=stepper.step,
                                averaged=averaged)
            if better:
                result.best_epoch, result.best_dev = epoch + 1, scores
            record = {"stage": name, "event": "dev", "epoch": epoch + 1, "after_step": stepper.step, **scores}
            if not averaged:
                dev = scores
                if at_end:
                    result.history.append(record)
            if log is not None:
                log.write(json.dumps(record | ({"averaged": True} if averaged else {}) |
                                     ({"kept": True} if better else {})) + "\n")
                log.flush()
        return dev

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    with _progress(show_progress and w.is_main, TextColumn("loss {task.fields[loss]:.4f}"),
                   TextColumn("{task.fields[rate]:.0f} ex/s")) as progress:
        bar = progress.add_task(escape(name), total=total, completed=stepper.step, loss=0.0, rate=0.0)
        say = progress.console.print if w.is_main else (lambda *args: None)  # rank 0 speaks for all
        # Without a terminal (CI logs, nohup) rich draws no bar: print a line every tenth instead.
        plain_every = max(1, total // 10) if show_progress and w.is_main and not progress.console.is_terminal else 0
        for epoch in range(first_epoch, config.epochs):
            if result.stopped_early:
                break
            model.train()
            seen, epoch_start, index = 0, time.perf_counter(), -1
            batches = iter(train_batches(epoch))
            if skip:
                set_rng_state(restored["rng"])  # type: ignore[index]
            for index, batch in enumerate(batches):
                if index < skip:   # resumed mid-epoch: these batches were trained on before the checkpoint
                    continue
                trained = stepper.train(batch)
                if trained is None:
                    continue
                size, loss_value, parts = trained
                if average is not None:
                    average.update(model)
                seen += size
                rate = seen / max(1e-9, time.perf_counter() - epoch_start)
                progress.update(bar, advance=1, loss=loss_value, rate=rate)
                if plain_every and stepper.step % plain_every == 0:
                    say(f"{escape(name)}: step {stepper.step}/{total}, loss {loss_value:.4f}, {rate:.0f} ex/s")
                log_step(epoch, loss_value, parts)
                if index + 1 < steps_per_epoch:   # inside the epoch: its end has an evaluation and a checkpoint
                    paused = time.perf_counter()
                    if (index + 1) % eval_every == 0:
                        judge(epoch, at_end=False)
                        model.train()
                    if checkpoints and checkpoints.every and stepper.step % checkpoints.every == 0:
                        save(epoch, index + 1)
                    epoch_start += time.perf_counter() - paused   # the epoch's rate counts training steps only
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            result.examples += seen
            result.step_seconds += time.perf_counter() - epoch_start
            if checkpoints and index >= skip:   # trained this epoch: keep its steps before evaluating, so a
                save(epoch, index + 1, evaluating=True)   # stop during a long evaluation does not cost the epoch
            skip = 0
            dev = judge(epoch, at_end=True)
            if epoch == 0 and evaluate_fn is None:
                _warn_if_not_learning(dev, dev_batches, name, result, say, log)
            shown = ", ".join(f"{k} {v:.4f}" for k, v in dev.items() if k != "examples")
            say(f"{escape(name)} epoch {epoch + 1}/{config.epochs}: dev {shown}")
            bad_epochs = 0 if kept.epoch_ended() else bad_epochs + 1
            reason = None
            if config.patience is not None and bad_epochs >= config.patience and epoch + 1 < config.epochs:
                reason = "patience"
            elif (below := out_of_reach(config, [float(r[stage_metric(config.metric, r)]) for r in result.history],
                                        epoch + 1)):
                reason = "bar"
                say(f"{escape(name)}: {escape(below)}; stopping")
            if reason is not None:
                result.stopped_early, result.stop_reason = True, reason
                if reason == "bar":
                    result.warnings.append(f"{name}: {below}")
                else:   # not judged unannealed: the learning rate decays to zero first, and those weights are judged
                    result.cooldown_steps = _cool_down(stepper, average, train_batches(epoch + 1),
                                                       max(1, round(config.cooldown * steps_per_epoch)),
                                                       partial(log_step, epoch + 1))
                    judge(epoch + 1, at_end=False)
                progress.update(bar, total=stepper.step)
            if checkpoints:
                save(epoch + 1, 0)
    if kept.weights is not None:
        model.load_state_dict(kept.weights)
    model.eval()
    result.steps = stepper.step
    result.kept_step, result.kept_average = kept.step, kept.averaged
    result.seconds = before + time.perf_counter() - start
    if result.step_seconds > 0:
        result.examples_per_second = round(result.examples / result.step_seconds, 1)
    if device.type == "cuda":
        result.peak_memory_bytes = torch.cuda.max_memory_allocated(device)
    return result


class _Stepper:
    """One optimizer step of a stage at a time: the optimizer, its learning-rate schedule, the gradient scaler, and the
    data-parallel averaging of gradients."""

    def __init__(self, model: Encoder, loss_fn: LossFn, extra: list[nn.Parameter], config: TrainConfig,
                 precision: str, device: torch.device, total: int) -> None:
        self.model, self.loss_fn, self.extra, self.config = model, loss_fn, extra, config
        self.precision, self.device, self.world = precision, device, world()
        self.optimizer = make_optimizer(model, extra, config)
        self.parameters = [p for g in self.optimizer.param_groups for p in g["params"]]
        same_start(self.parameters)
        self.scheduler = _schedule(self.optimizer, total, config.warmup_ratio, config.decay)
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self.step = 0

    def train(self, batch: Batch) -> tuple[int, float, dict[str, float]] | None:
        """One step on ``batch``: its size, its loss and the loss's parts (None: too small to give every rank an
        example, skipped by all ranks alike)."""
        w = self.world
        size = len(batch["input_ids"])
        if size < w.size:
            return None
        batch = to_device(local_slice(batch, w), self.device)
        with autocast(self.precision, self.device):
            loss, parts = self.loss_fn(self.model, batch)
        self.optimizer.zero_grad(set_to_none=True)
        # Each rank's loss is a mean over its slice; weighted by the slice's share of the global
        # batch, the gradients averaged over ranks are those of the mean over the global batch.
        share = len(batch["input_ids"]) / size
        self.scaler.scale(loss * share * w.size).backward()
        average_gradients(self.parameters)
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.parameters, self.config.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.step += 1
        loss_value = loss.item()
        if w.size > 1:  # log the global batch's loss: the ranks' shares of it, summed
            summed = all_sum(torch.tensor([loss_value, *parts.values()], dtype=torch.float64) * share)
            loss_value, parts = summed[0].item(), dict(zip(parts, summed[1:].tolist()))
        return size, loss_value, parts

    def cool_down(self, steps: int) -> None:
        """From the next step on, the learning rate decays linearly from where it is to zero over ``steps``."""
        start = self.scheduler.get_last_lr()
        bases = [group["initial_lr"] for group in self.optimizer.param_groups]
        first = self.step
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, [lambda step, now=now, base=base: now / base * max(0.0, 1 - (step - first) / steps)
                             for now, base in zip(start, bases, strict=True)], last_epoch=first - 1)

    def restore(self, state: TrainState) -> None:
        self.model.load_state_dict(state["model"])
        for p, saved in zip(self.extra, state["extra"]):
            p.data.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]


def _cool_down(stepper: _Stepper, average: WeightAverage | None, batches: Iterable[Batch], steps: int,
               log_step: Callable[[float, dict[str, float]], None]) -> int:
    """Train ``steps`` more steps on ``batches`` (the next epoch's, from its start) while the learning rate decays to
    zero, each logged by ``log_step(loss, parts)``; the steps taken."""
    stepper.cool_down(steps)
    stepper.model.train()
    taken = 0
    for batch in itertools.islice(batches, steps):
        trained = stepper.train(batch)
        if trained is not None:
            taken += 1
            log_step(*trained[1:])
            if average is not None:
                average.update(stepper.model)
    return taken


def _train_state(stepper: _Stepper, average: WeightAverage | None, kept: KeptWeights, bad_epochs: int,
                 result: StageResult, *, epoch: int, batches: int, evaluating: bool) -> TrainState:
    """What a checkpoint holds of a stage: enough to continue it exactly where it was."""
    return TrainState(
        epoch=epoch, batches=batches, evaluating=evaluating, step=stepper.step, model=stepper.model.state_dict(),
        extra=[p.detach() for p in stepper.extra], optimizer=stepper.optimizer.state_dict(),
        scheduler=stepper.scheduler.state_dict(), scaler=stepper.scaler.state_dict(), rng=rng_state(),
        kept=kept.state(), average=average.state_dict() if average is not None else None, bad_epochs=bad_epochs,
        result=asdict(result))  # type: ignore[typeddict-item]


def _dev_scores(model: nn.Module, evaluate_fn: Callable[[nn.Module], dict[str, float]] | None,
                divergence_fn: Callable[[torch.Tensor], float] | None, dev_batches: Callable[[], Iterable[Batch]],
                device: torch.device) -> dict[str, float]:
    """``model``'s dev scores: ``evaluate_fn``'s, or the task's metrics and, with ``divergence_fn``, the divergence of
    its answers from the teacher's."""
    if evaluate_fn:
        return evaluate_fn(model)
    logits, labels = predict(model, dev_batches(), device, collective=True)   # type: ignore[arg-type]
    scores = metrics_of(logits, labels).present()
    if divergence_fn is not None:
        scores["divergence"] = divergence_fn(logits)
    return scores


def _selection_score(config: TrainConfig, dev: dict[str, float]) -> float:
    """What the stage keeps the highest of: minus the divergence from the teacher, minus the loss, or the metric."""
    if config.select == "divergence":
        return -dev["divergence"]
    return -dev["loss"] if config.metric == "loss" else dev[stage_metric(config.metric, dev)]


def _warn_if_not_learning(dev: dict[str, float], dev_batches: Callable[[], Iterable[Batch]], name: str,
                          result: StageResult, say: Callable[[str], None], log: IO[str] | None) -> None:
    """After the first epoch: a warning in the record, on screen and in the log when the dev answers say the model
    has learned nothing (:func:`not_learning`)."""
    labels = torch.cat([batch["labels"] for batch in dev_batches()])
    unlearned = not_learning(dev, labels)
    if unlearned is None:
        return
    result.warnings.append(f"{name}: {unlearned} after the first epoch: the model has not started to learn; read the "
                           "log, and give it more epochs or another learning rate.")
    say(f"[yellow]warning:[/] {escape(result.warnings[-1])}")
    if log is not None:
        log.write(json.dumps({"stage": name, "event": "warning", "epoch": 1, "message": result.warnings[-1]}) + "\n")
