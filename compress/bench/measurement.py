"""The shape of one speed measurement (:func:`compress.bench.speed.measure_speed`), importable without torch: run
records and comparisons keep measurements as JSON objects of this shape."""

from __future__ import annotations

from typing import TypedDict


class CpuInfo(TypedDict):
    model: str
    count: int | None
    features: dict[str, bool]
    torch_capability: str


class Manifest(TypedDict):
    """manifest.json, and a comparison's ``manifest``: what is needed to judge whether two measurements compare."""

    python: str
    platform: str
    cpu: CpuInfo
    threads: int
    seed: int | None
    packages: dict[str, str | None]
    git: dict[str, str | bool | None]
    split_fingerprint: str | None
    created: str


class Speed(TypedDict, total=False):
    """One model's speed as measured (and as run records and comparisons keep it, in JSON)."""

    seq_len: int
    threads: int
    device: str                # where it was timed: the CPU's model or the GPU's name (absent: the CPU, before GPUs)
    backend: str
    dtype: str
    latency_ms_p50: float      # batch 1
    latency_ms_p90: float
    batch_ms_p50: float        # batch config["batch_size"]
    throughput: float          # examples per second at that batch size
    peak_memory_bytes: int
    config: dict[str, int]     # the SpeedConfig it was measured with
    passes: int                # measure_all's passes (absent for one measure_speed)
