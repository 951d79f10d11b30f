"""``--precision auto`` decided by measurement: a training stage times a few steps of its own model in each
precision the device computes (fp32 and bf16 on a CPU; fp32, which is TF32 in the matrix products of a card that has
it, bf16 and fp16 on CUDA) and trains in the fastest.

A CPU flag says that bf16 units exist, not that they win at a model's shapes: on a 2-core AMX Xeon a step of
distilbert's distillation took 339 ms in fp32 and 278 ms in bf16, while low-rank's recovery, with its thin
factors, took 344 ms in fp32 and 558 ms in bf16, and pruning's 409 and 408 ms (``benchmarks/training_speed.py``). So the choice is made per
model shape and stage, once per machine: the times are cached under the cache root, keyed by the device, the torch
version, the threads, the stage's name and the shapes of everything it trains and runs, and every later stage of
the same shape (another seed, a resumed run) trains in the same precision without timing again.

A half precision must save at least :data:`BF16_MUST_SAVE` of fp32's step to be chosen: where the two are that
close, fp32's exact arithmetic is worth more than the time; and fp16 must save as much again of bf16's, since it
trains with loss scaling and overflows where bf16 does not.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from compress.bench.machine import device_name
from compress.distributed import all_sum, broadcast, world
from compress.paths import atomic_write_text, cache_dir

BF16_MUST_SAVE = 0.05   # a half precision is chosen only when its median step is at least 5% shorter than fp32's
TIMED_STEPS = 3         # timed steps per precision, after one untimed warm-up step each
SCHEMA = 1


@dataclass(frozen=True)
class Choice:
    """The precision a stage trains in and the median step (ms) it measured in each it weighed."""

    precision: str
    step_ms: dict[str, float]


def weighed(device: torch.device) -> tuple[str, ...]:
    """The precisions ``auto`` times on ``device``: fp32 and bf16 on a CPU; on CUDA fp32, bf16 where the card
    computes it, and fp16."""
    if device.type != "cuda":
        return ("fp32", "bf16")
    return ("fp32", "bf16", "fp16") if torch.cuda.is_bf16_supported() else ("fp32", "fp16")


def pick(step_ms: dict[str, float]) -> str:
    """The precision to train in from each weighed one's median step: fp32, unless a half precision's step is at
    least :data:`BF16_MUST_SAVE` shorter; bf16 before fp16 unless fp16's is that much shorter than bf16's too."""
    keep = 1 - BF16_MUST_SAVE
    chosen = "fp32"
    for half in ("bf16", "fp16"):
        if half in step_ms and step_ms[half] <= keep * step_ms[chosen]:
            chosen = half
    return chosen


def shape_key(*modules: Any) -> str:
    """A digest of the names and shapes of every parameter and buffer of ``modules`` (the ones that are
    ``nn.Module``; a loss function that holds the teacher is one): what a step's time depends on."""
    digest = hashlib.sha256()
    for number, module in enumerate(m for m in modules if isinstance(m, nn.Module)):
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            digest.update(f"{number}:{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
    return digest.hexdigest()[:16]


def time_steps(step: Callable[[str, Any], None], batches: Sequence[Any], device: torch.device) -> dict[str, float]:
    """The median milliseconds of ``step(precision, batch)`` in each precision :func:`weighed` names for ``device``:
    one untimed step each (on a GPU, one on every batch it times: a GPU sets up kernels per shape and precision the
    first time it meets them, once per training, where a CPU does not), then :data:`TIMED_STEPS` rounds that take
    the precisions in turn on the same batch, so a machine that slows down during the measurement slows all
    alike."""
    def timed(precision: str, batch: Any) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step(precision, batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (time.perf_counter() - start) * 1000

    precisions = weighed(device)
    timed_batches = [batches[(round_ + 1) % len(batches)] for round_ in range(TIMED_STEPS)]
    for precision in precisions:
        for batch in [batches[0], *(timed_batches if device.type == "cuda" else [])]:
            timed(precision, batch)
    times: dict[str, list[float]] = {p: [] for p in precisions}
    for batch in timed_batches:
        for precision in precisions:
            times[precision].append(timed(precision, batch))
    return {p: statistics.median(t) for p, t in times.items()}


def _entry(key: dict[str, str | int]) -> Path:
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir() / "step-precision" / f"{name}.json"


def _load(path: Path, key: dict[str, str | int], precisions: tuple[str, ...]) -> Choice | None:
    """The choice stored for ``key``, or None when there is none or it is not one we wrote for this key (timed in
    ``precisions``)."""
    try:
        stored = json.loads(path.read_text())
        choice = Choice(precision=stored["precision"],
                        step_ms={p: float(stored["step_ms"][p]) for p in precisions})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if stored.get("schema") != SCHEMA or stored.get("key") != key or choice.precision != pick(choice.step_ms):
        return None
    return choice


def choose_precision(step: Callable[[str, Any], None], batches: Sequence[Any], device: torch.device,
                     key: dict[str, str | int]) -> Choice:
    """The precision a stage trains in under ``auto``: read from the cache for ``key`` (what the stage's step
    time depends on; the device, torch and threads are added here), else timed with :func:`time_steps` and
    stored. Every rank of a data-parallel run takes the same choice: rank 0 reads the cache, and
    a measurement sums every rank's times."""
    precisions = weighed(device)
    key = {**key, "device": device_name(device), "torch": torch.__version__, "threads": torch.get_num_threads()}
    path = _entry(key)
    w = world()
    choice = broadcast(_load(path, key, precisions) if w.is_main else None)
    if choice is not None:
        return choice
    measured = time_steps(step, batches, device)
    summed = all_sum(torch.tensor([measured[p] for p in precisions], dtype=torch.float64)) / w.size
    step_ms = {p: round(float(ms), 3) for p, ms in zip(precisions, summed)}
    choice = Choice(precision=pick(step_ms), step_ms=step_ms)
    if w.is_main:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"schema": SCHEMA, "key": key, **asdict(choice)}, indent=1))
    return choice
