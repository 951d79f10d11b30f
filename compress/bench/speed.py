"""Speed and memory of one predictor on the task's own inputs: latency at batch 1, throughput at batch 32 in the
batch shape asked (:mod:`compress.bench.batch_shapes`)."""

from __future__ import annotations

import gc
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from compress.bench.batch_shapes import BatchSet, batch_set, check_batch_shape, run_set
from compress.bench.inputs import speed_batch
from compress.bench.machine import device_name
from compress.bench.measurement import Speed
from compress.bench.memory import peak_memory_bytes
from compress.bench.timing import default_threads, fixed_threads, time_call, timed_calls
from compress.data.batching import TokenizedTask
from compress.device import check_speed_device
from compress.errors import CompressError

if TYPE_CHECKING:  # a type only: the predictors are built above this package (compress.quantize)
    from compress.bench.measurement import Predictor


@dataclass
class SpeedConfig:
    """How speed is measured (the sequence length is chosen from the data, see bench.inputs.speed_seq_len)."""

    threads: int = field(default_factory=default_threads)
    device: str = "cpu"         # where the predictors run: "cpu" or "cuda" (they are built for it)
    warmup: int = 5
    repeats: int = 30           # timed calls at batch 1
    batch_size: int = 32
    batch_repeats: int = 10     # timed calls at batch ``batch_size`` (each a set of batches, but for filled)
    batch_shape: str = "filled"   # how the large batches are shaped (compress.bench.batch_shapes)

    def __post_init__(self) -> None:
        if self.threads < 1 or self.repeats < 1 or self.batch_repeats < 1 or self.batch_size < 1:
            raise CompressError("threads, repeats and batch sizes of speed measurement must be positive integers.")
        check_speed_device(self.device)
        check_batch_shape(self.batch_shape)


def ms_per_batch(set_ms: float, batches: BatchSet, batch_size: int) -> float:
    """Milliseconds per ``batch_size`` examples of a set that took ``set_ms`` (a bucketed set's last batch of a
    bucket may be short), so ``batch_size / batch_ms`` is its throughput."""
    return set_ms * batch_size / batches.examples


def shape_fields(batches: BatchSet) -> Speed:
    """What a measurement records of the large batches' shape."""
    return Speed(batch_shape=batches.shape, padding=batches.padding, batch_lengths=batches.lengths)


def measure_speed(predictor: Predictor, data: TokenizedTask, seq_len: int, config: SpeedConfig) -> Speed:
    """Latency p50/p90 at batch 1, throughput at batch ``config.batch_size``, and the peak memory of one batch.

    Batch 1 is a real test example of exactly ``seq_len`` tokens; the large batches are shaped as
    ``config.batch_shape`` says (filled: every row ``seq_len`` real tokens). Torch runs with ``config.threads``
    threads; ONNX Runtime sessions are built with the same count. Peak memory is the growth of the
    process's resident memory during the largest of the large batches, first (activations and runtime buffers, not the
    weights already loaded); on a GPU (``config.device`` cuda, the predictor built for it), the most the batch
    held allocated there beyond what was allocated before it. A call on a GPU returns its logits to the host, so it
    ends when the GPU's work does: each timed call is the GPU's time, synchronised.
    """
    one = speed_batch(data, 1, seq_len)
    many = batch_set(data, config.batch_shape, config.batch_size, seq_len)
    with fixed_threads(config.threads):
        peak = peak_memory_bytes(partial(predictor, many.largest()), config.device)
        single = time_call(lambda: predictor(one), batch_size=1, warmup=config.warmup, repeats=config.repeats)
        # one untimed call first: every shape of the set seen once (a runtime that prepares per shape has)
        batched = ms_per_batch(float(np.median(timed_calls(partial(run_set, predictor, many), warmup=1,
                                                       repeats=config.batch_repeats))), many, config.batch_size)
    return Speed(seq_len=seq_len, threads=config.threads, device=device_name(config.device),
                 backend=predictor.backend, dtype=predictor.dtype,
                 latency_ms_p50=single.p50_ms, latency_ms_p90=single.p90_ms, batch_ms_p50=batched,
                 throughput=config.batch_size / (batched / 1000), peak_memory_bytes=peak, config=asdict(config),
                 **shape_fields(many))


# The fields of one measurement that belong to the large batch (the rest are batch 1's).
_BATCH_KEYS = ("batch_ms_p50", "throughput")


def measure_all(predictors: dict[str, Predictor], data: TokenizedTask, seq_len: int,
                config: SpeedConfig, passes: int = 2) -> dict[str, Speed]:
    """:func:`measure_speed` of every predictor in ``passes`` passes, alternating forward and reverse
    order, keeping each model's fastest batch-1 latency and, separately, its fastest large batch.

    A shared machine only ever adds time, so the fastest pass is the closest to what a model costs;
    alternating the order means no model is always measured first or last. Peak memory is the largest
    over the passes (a runtime's first batch allocates its buffers, later ones reuse them).
    """
    if passes < 1:
        raise CompressError("speed is measured in at least one pass.")
    runs: dict[str, list[Speed]] = {name: [] for name in predictors}
    for number in range(passes):
        order = list(predictors) if number % 2 == 0 else list(predictors)[::-1]
        for name in order:
            runs[name].append(measure_speed(predictors[name], data, seq_len, config))
    result: dict[str, Speed] = {}
    for name, measured in runs.items():
        single = min(measured, key=lambda m: m["latency_ms_p50"])
        batched = min(measured, key=lambda m: m["batch_ms_p50"])
        result[name] = single | {key: batched[key] for key in _BATCH_KEYS} | {
            "passes": passes, "peak_memory_bytes": max(m["peak_memory_bytes"] for m in measured)}
    return result


PASSES = 3    # independent passes of a comparison's timing: every model loaded afresh, a new order each pass
ROUNDS = 5    # rounds of batch-1 latency in each pass, each timing every model once
ROUND_WARMUP = 2   # untimed calls before a model's calls in a round: the runtime that ran before it has let go


@dataclass
class PassTimings:
    """One model's timings over a comparison's passes (:func:`timed_passes`)."""

    rounds_ms: list[list[float]] = field(default_factory=list)   # per pass, each round's median batch-1 latency
    calls_ms: list[float] = field(default_factory=list)          # every timed batch-1 call, all passes
    batch_ms: list[float] = field(default_factory=list)          # per pass, the median large-batch latency
    peak_memory_bytes: int = 0                                   # the largest over the passes
    shape: Speed = field(default_factory=Speed)                  # the large batches' shape (shape_fields)

    @property
    def latency_ms_p50(self) -> float:
        """The median of every round of every pass: the row's batch-1 latency."""
        return float(np.median([ms for rounds in self.rounds_ms for ms in rounds]))

    @property
    def pass_medians(self) -> list[float]:
        """Each pass's median round: one draw of the model's latency per pass."""
        return [float(np.median(rounds)) for rounds in self.rounds_ms]


def pass_orders(names: list[str], passes: int) -> list[list[str]]:
    """The order models are timed in, pass by pass: a shuffle per pass (seeded by its number, so a comparison can
    be timed again in the same orders), never the order of the pass before when there are two models or more."""
    orders: list[list[str]] = []
    for number in range(passes):
        rng = random.Random(number)
        order = rng.sample(names, len(names))
        while len(set(names)) > 1 and orders and order == orders[-1]:
            order = rng.sample(names, len(names))
        orders.append(order)
    return orders


def batch_calls(repeats: int) -> int:
    """Timed large-batch calls per model in one pass of a comparison: a third of the batch-1 calls asked for, at
    least 3 (``--repeats 30``, the default, times 10, each call a whole batch)."""
    return max(3, repeats // 3)


def round_calls(config: SpeedConfig) -> int:
    """Timed batch-1 calls per model in one round of a pass: a third of ``config.repeats``, at least 5."""
    return max(5, config.repeats // 3)


def timed_round(predictors: dict[str, Predictor], order: list[str], one: dict[str, np.ndarray],
                calls: int) -> dict[str, np.ndarray]:
    """One round of a pass: every model in ``order``, :data:`ROUND_WARMUP` untimed batch-1 calls, then ``calls``
    timed ones; each model's durations in milliseconds (threads are the caller's to fix)."""
    return {name: timed_calls(partial(predictors[name], one), warmup=ROUND_WARMUP, repeats=calls) for name in order}


def timed_passes(load: Callable[[], dict[str, Predictor]], data: TokenizedTask, seq_len: int, config: SpeedConfig,
                 passes: int = PASSES, rounds: int = ROUNDS) -> dict[str, PassTimings]:
    """Every model's speed in ``passes`` independent passes. Each pass loads every model afresh (``load``), then
    times ``rounds`` rounds of batch-1 latency (every model once a round, ``config.repeats // 3`` calls, at least
    5, after :data:`ROUND_WARMUP` untimed ones; the pass's order forward, then reversed, alternating), then each
    model's large batches in ``config.batch_shape`` (its peak memory on the largest batch, then
    ``config.batch_repeats`` timed calls, each the whole set of batches).

    Within a pass, a model's round and the teacher's were timed seconds apart under the same load, so latency and
    speed-up come from the same timings; across passes, what a fresh load and another order change (memory
    layout, which runtime ran before which) is counted, so the passes' spread is the speed-up's run-to-run spread.
    """
    if passes < 1 or rounds < 1:
        raise CompressError("speed is measured in at least one pass of at least one round.")
    one, many = speed_batch(data, 1, seq_len), batch_set(data, config.batch_shape, config.batch_size, seq_len)
    calls = round_calls(config)
    timings: dict[str, PassTimings] = {}
    for number in range(passes):
        predictors = load()
        order = pass_orders(list(predictors), passes)[number]
        for name in predictors:
            timings.setdefault(name, PassTimings(shape=shape_fields(many))).rounds_ms.append([])
        with fixed_threads(config.threads):
            for round_number in range(rounds):
                timed = timed_round(predictors, order if round_number % 2 == 0 else order[::-1], one, calls)
                for name, ms in timed.items():
                    timings[name].rounds_ms[-1].append(float(np.median(ms)))
                    timings[name].calls_ms.extend(ms.tolist())
            for name in order:
                timing = timings[name]
                timing.peak_memory_bytes = max(timing.peak_memory_bytes,
                                               peak_memory_bytes(partial(predictors[name], many.largest()),
                                                                 config.device))
                # a set of several shapes runs once untimed: each shape seen (the largest alone was, above)
                set_ms = timed_calls(partial(run_set, predictors[name], many), warmup=int(len(many.batches) > 1),
                                     repeats=config.batch_repeats)
                timing.batch_ms.append(ms_per_batch(float(np.median(set_ms)), many, config.batch_size))
        del predictors
        gc.collect()
    return timings
