"""Speed and memory of one predictor on the task's own inputs: latency at batch 1, throughput at batch 32."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from compress.bench.inputs import speed_batch
from compress.bench.memory import peak_memory_bytes
from compress.bench.timing import default_threads, fixed_threads, time_call
from compress.data.batching import TokenizedTask
from compress.quantize.predictors import Predictor


@dataclass
class SpeedConfig:
    """How speed is measured. ``seq_len`` None: the 95th percentile of the test split's token lengths."""

    threads: int = field(default_factory=default_threads)
    seq_len: int | None = None
    warmup: int = 5
    repeats: int = 30           # timed calls at batch 1
    batch_size: int = 32
    batch_repeats: int = 10     # timed calls at batch ``batch_size``

    def __post_init__(self) -> None:
        if self.threads < 1 or self.repeats < 1 or self.batch_repeats < 1 or self.batch_size < 1:
            raise ValueError("threads, repeats, batch_repeats and batch_size must be positive")


def measure_speed(predictor: Predictor, data: TokenizedTask, seq_len: int, config: SpeedConfig) -> dict[str, Any]:
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
    return {
        "seq_len": seq_len, "threads": config.threads, "backend": predictor.backend, "dtype": predictor.dtype,
        "latency_ms_p50": single.p50_ms, "latency_ms_p90": single.p90_ms,
        "batch_ms_p50": batched.p50_ms, "throughput": batched.throughput, "peak_memory_bytes": peak,
        "config": asdict(config),
    }
