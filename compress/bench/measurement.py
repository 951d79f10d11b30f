"""The shape of one speed measurement (:func:`compress.bench.speed.measure_speed`), importable without torch: run
records and comparisons keep measurements as JSON objects of this shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypedDict

if TYPE_CHECKING:
    import numpy as np


class Predictor(Protocol):
    """What every backend returns and the speed measurement times: logits ``[batch, labels]`` (float32) from a batch
    of numpy ``int64`` token arrays (``input_ids``, ``attention_mask``, ``token_type_ids``, each ``[batch, length]``);
    :mod:`compress.quantize.predictors` has the backends' own."""

    backend: str   # "torch", "onnxruntime" or "openvino"
    dtype: str     # "fp32", "int8", "bf16", "fp16", ...

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray: ...


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
    batch_ms_p50: float        # batch config["batch_size"]: ms per that many examples
    throughput: float          # examples per second at that batch size
    batch_shape: str           # how the large batches were shaped (compress.bench.batch_shapes; absent: filled)
    padding: float             # padding's share of the positions the large batches computed
    batch_lengths: list[int]   # each large batch's padded length, in the order they ran
    peak_memory_bytes: int
    config: dict[str, int]     # the SpeedConfig it was measured with
    passes: int                # measure_all's passes (absent for one measure_speed)


def batch_phrase(shape: str, batch_size: float | None, seq_len: float | None, padding: float | None) -> str:
    """How the large batches were shaped (compress.bench.batch_shapes), in words."""
    at = f"batch {batch_size:g}" if isinstance(batch_size, int | float) else "the large batch"
    waste = f", {padding:.0%} of the positions padding" if padding else ""
    if shape == "filled":
        length = f" {seq_len:g}" if isinstance(seq_len, int | float) else ""
        return f"{at}, every row filled to{length or ' the sequence length'} real tokens"
    return {"real": f"{at}, test sentences padded to each batch's longest{waste}",
            "padded": f"{at}, test sentences padded to the split's longest{waste}",
            "bucketed": f"{at}, test sentences bucketed by length (bounds 16, 32, 64, ... and the longest), each "
                        f"padded to its bucket's bound{waste}"}.get(shape, f"{at}, {shape} batches")
