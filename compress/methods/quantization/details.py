"""What a quantization run records of its own (metrics.json's ``details``; schema 3's ``quantization`` block)."""

from __future__ import annotations

from dataclasses import dataclass, field

from compress.bench.measurement import Speed, batch_phrase
from compress.quantize.formats import MatrixBits
from compress.registry import Details


def keeping(backends: list[str], dev: dict[str, float], fp32_dev: float | None, min_retention: float) -> list[str]:
    """The backends whose dev accuracy is at least ``min_retention`` of fp32's (all where nothing was scored)."""
    return [b for b in backends if fp32_dev is None or b not in dev or dev[b] >= min_retention * fp32_dev]


@dataclass
class CpuRecord:
    model: str = ""
    features: dict[str, bool] = field(default_factory=dict)
    torch_capability: str = ""


@dataclass
class AwareTraining:
    """Quantization-aware training: the recovery that ran with the rounding in the forward pass, and how closely the
    exported int8 graph answers as the trained fake-quantized model did (dev sentences, one at a time).

    agreement       share of dev sentences on which the exported model answers as the fake-quantized one (None for
                    a regression, whose answers are values: see the difference)
    max_abs_logit_diff  the largest difference of their logits (or predicted values) over those sentences
    """

    epochs: int
    lr: float
    agreement: float | None
    max_abs_logit_diff: float


@dataclass
class QuantDetails(Details):
    """The backend kept and why, every backend measured, and how far the quantized model is from fp32.

    accuracy_drop_points  fp32 test accuracy minus the quantized one's, in points, one sentence at a time
    batched_accuracy      the quantized model's accuracy in padded batches of ``batched_size`` (None: recorded
                          before it was measured)
    note                  why this CPU runs the format badly (no bf16 units), or None
    dev_accuracy          with --backend auto and several backends: each one's dev accuracy, one sentence at a
                          time, against ``fp32_dev_accuracy``; those below ``min_retention`` of it were not kept
    inference_precision   the precision a runtime compiled for, by backend (OpenVINO says; others do not)
    bits                  bits per matrix: every matrix's expected loss at 8 and 4 bits and the width it got
    aware                 quantization-aware training: its recovery and the export's agreement with it
    """

    backend: str
    dtype: str
    chosen_by: str
    measured: dict[str, Speed]
    skipped: dict[str, str]
    fp32_speed: Speed
    cpu: CpuRecord
    max_abs_logit_diff: float
    prediction_agreement: float
    fp32_accuracy: float
    accuracy_drop_points: float
    batched_accuracy: float | None = None
    batched_size: int | None = None
    calibration_examples: int | None = None
    note: str | None = None
    dev_accuracy: dict[str, float] = field(default_factory=dict)
    fp32_dev_accuracy: float | None = None
    min_retention: float | None = None
    inference_precision: dict[str, str] = field(default_factory=dict)
    bits: list[MatrixBits] | None = None
    aware: AwareTraining | None = None

    @property
    def warning(self) -> str | None:
        return self.note

    @property
    def runtime_note(self) -> str | None:
        """Where, among the backends that kept the accuracy asked for, one was the fastest at batch 1 and another
        in large batches when the run was made: that every speed of the model is measured on the one kept, and
        what the other would have given."""
        kept = keeping(list(self.measured), self.dev_accuracy, self.fp32_dev_accuracy, self.min_retention or 0)
        if len(kept) < 2 or self.backend not in kept:
            return None
        by_latency = min(kept, key=lambda b: self.measured[b]["latency_ms_p50"])
        by_throughput = max(kept, key=lambda b: self.measured[b]["throughput"])
        if by_latency == by_throughput or self.backend not in (by_latency, by_throughput):
            return None
        chosen = self.measured[self.backend]
        at = batch_phrase(chosen.get("batch_shape", "filled"), chosen["config"]["batch_size"], chosen["seq_len"],
                          chosen.get("padding"))
        fastest = {"latency": "batch 1", "throughput": at}
        mine, objective = ("latency", "throughput") if self.backend == by_latency else ("throughput", "latency")
        other = by_throughput if objective == "throughput" else by_latency
        theirs = self.measured[other]
        return (f"timed on {self.backend}, the fastest at {fastest[mine]} when the run was made; {other} was the "
                f"fastest at {fastest[objective]} ({theirs['latency_ms_p50']:.2f} ms against "
                f"{chosen['latency_ms_p50']:.2f} at batch 1, {theirs['throughput']:.0f} examples/s against "
                f"{chosen['throughput']:.0f} at batch {chosen['config']['batch_size']}): choose_by={objective} "
                "runs on it")
