"""Speed and memory of one predictor on the task's own inputs: latency at batch 1, throughput at batch 32."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from compress.bench.inputs import speed_batch
from compress.bench.measurement import Speed
from compress.bench.memory import peak_memory_bytes
from compress.bench.timing import default_threads, fixed_threads, time_call
from compress.data.batching import TokenizedTask
from compress.errors import CompressError

if TYPE_CHECKING:  # a type only: the predictors are built above this package (compress.quantize)
    from compress.quantize.predictors import Predictor


@dataclass
class SpeedConfig:
    """How speed is measured (the sequence length is chosen from the data, see bench.inputs.speed_seq_len)."""

    threads: int = field(default_factory=default_threads)
    warmup: int = 5
    repeats: int = 30           # timed calls at batch 1
    batch_size: int = 32
    batch_repeats: int = 10     # timed calls at batch ``batch_size``

    def __post_init__(self) -> None:
        if self.threads < 1 or self.repeats < 1 or self.batch_repeats < 1 or self.batch_size < 1:
            raise CompressError("threads, repeats and batch sizes of speed measurement must be positive integers.")


def measure_speed(predictor: Predictor, data: TokenizedTask, seq_len: int, config: SpeedConfig) -> Speed:
    """Latency p50/p90 at batch 1, throughput at batch ``config.batch_size``, and the peak memory of one batch.

    Inputs are real test examples of exactly ``seq_len`` tokens. Torch runs with ``config.threads``
    threads; ONNX Runtime sessions are built with the same count. Peak memory is the growth of the
    process's resident memory during the first large batch (activations and runtime buffers, not the
    weights already loaded).
    """
    one = speed_batch(data, 1, seq_len)
    many = speed_batch(data, config.batch_size, seq_len)
    with fixed_threads(config.threads):
        peak = peak_memory_bytes(lambda: predictor(many))
        single = time_call(lambda: predictor(one), batch_size=1, warmup=config.warmup, repeats=config.repeats)
        batched = time_call(lambda: predictor(many), batch_size=config.batch_size, warmup=1,
                            repeats=config.batch_repeats)
    return Speed(seq_len=seq_len, threads=config.threads, backend=predictor.backend, dtype=predictor.dtype,
                 latency_ms_p50=single.p50_ms, latency_ms_p90=single.p90_ms, batch_ms_p50=batched.p50_ms,
                 throughput=batched.throughput, peak_memory_bytes=peak, config=asdict(config))


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


ROUNDS = 15   # rounds of batch-1 latency in a comparison, each timing every model once


def latency_rounds(predictors: dict[str, Predictor], data: TokenizedTask, seq_len: int, config: SpeedConfig,
                   rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Each predictor's batch-1 latency (the median of ``config.repeats // 3`` calls, at least 5) in each of
    ``rounds`` rounds, in milliseconds. A round times every model once, the order alternating forward and
    reverse, so a model's round ``r`` and the teacher's were measured a few seconds apart, under the same load:
    their ratio is one draw of the speed-up, and the rounds' spread is how much the machine moved it."""
    if rounds < 1:
        raise CompressError("speed is measured in at least one round.")
    one = speed_batch(data, 1, seq_len)
    calls = max(5, config.repeats // 3)
    measured: dict[str, list[float]] = {name: [] for name in predictors}
    with fixed_threads(config.threads):
        for number in range(rounds):
            order = list(predictors) if number % 2 == 0 else list(predictors)[::-1]
            for name in order:
                timing = time_call(partial(predictors[name], one), batch_size=1, warmup=1, repeats=calls)
                measured[name].append(timing.p50_ms)
    return measured

