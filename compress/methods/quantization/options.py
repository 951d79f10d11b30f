"""The quantization methods' options (their fields become ``compress run`` flags) and the format they set, importable
without torch: every format module of ``formats/`` takes one of these classes, and the face, the verb and
quantization-aware training read them (:mod:`~compress.methods.quantization.face`,
:mod:`~compress.methods.quantization.verb`, :mod:`~compress.methods.quantization.aware`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from compress.errors import CompressError
from compress.quantize.formats import GROUP_SIZES, QuantMethod, check_backend


@dataclass
class QuantOptions:
    backend: str = field(default="auto", metadata={
        "help": "torch, onnxruntime, openvino, or auto (build each the method runs on and is installed, measure "
                "each, keep the fastest (--choose-by) of those that keep --min-retention)."})
    min_retention: float = field(default=0.99, metadata={
        "help": "With --backend auto, a backend is kept only if its dev accuracy, one sentence at a time, is at "
                "least this share of the fp32 model's (0 to 1)."})
    choose_by: str = field(default="latency", metadata={
        "help": "With --backend auto, what fastest means: latency (batch 1, a service answering one request at a "
                "time) or throughput (batch 32, scoring many sentences at once, shaped as --batch-shape says)."})
    batch_shape: str = field(default="filled", metadata={
        "help": "With --choose-by throughput, how the batches of 32 are shaped: filled (every row the timing "
                "length), real (test sentences at their own lengths), padded (to the longest) or bucketed (by "
                "length): the shape a server batches in.", "added_later": True})

    def __post_init__(self) -> None:
        """The checks the values alone allow (whether this format runs on the backend is its method's check)."""
        check_backend(self.backend)
        if self.choose_by not in ("latency", "throughput"):
            raise CompressError(f"--choose-by must be latency or throughput, got {self.choose_by!r}.")
        if self.batch_shape != "filled" and self.choose_by != "throughput":
            raise CompressError(f"--batch-shape {self.batch_shape} shapes the batches --choose-by throughput "
                                "times; with --choose-by latency a backend is chosen at batch 1.")
        if not 0 < self.min_retention <= 1:
            raise CompressError(f"--min-retention is a share of the fp32 model's accuracy, above 0 and at most 1; "
                                f"got {self.min_retention}.")


@dataclass
class GroupedOptions(QuantOptions):
    """A weight-only format's options: how many weights share one scale."""

    group_size: int = field(default=32, metadata={
        "help": "Weights that share one scale, along the input channels: 16, 32, 64, 128 or 256 (fewer: closer to "
                "fp32, more bytes of scales: 32 adds one bit per weight, 128 a quarter).", "search": (32, 128)})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.group_size not in GROUP_SIZES:
            raise CompressError(f"group_size must be one of {', '.join(map(str, GROUP_SIZES))}, got "
                                f"{self.group_size}.")



@dataclass
class MixedOptions(GroupedOptions):
    """Bits per matrix: how many of the weights may go to 4 bits (the size budget) and their group size."""

    int4_share: float = field(default=0.5, metadata={
        "help": "The least share of the quantized weights stored in 4 bits, the least sensitive matrices first (0 "
                "to 1; the rest in int8): the size budget, between int8's bytes (0) and int4's (1).",
        "search": (0.5, 0.8)})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.int4_share < 1:
            raise CompressError(f"int4_share is a share of the weights above 0 and below 1 (0 is int8, 1 is int4), "
                                f"got {self.int4_share}.")


@dataclass
class AwareOptions(QuantOptions):
    """Quantization-aware training: how long the model recovers with the rounding in its forward pass."""

    recovery_epochs: int = field(default=2, metadata={
        "help": "epochs of distillation from the fp32 model with the format's rounding in the forward pass (at least "
                "1)."})
    recovery_lr: float = field(default=5e-5, metadata={"help": "learning rate of that training (default 5e-5)."})

    def __post_init__(self) -> None:
        super().__post_init__()   # a weight-only format's group size too (AwareGroupedOptions)
        if self.recovery_epochs < 1:
            raise CompressError(f"recovery_epochs must be at least 1 (0 epochs is post-training quantization), got "
                                f"{self.recovery_epochs}.")
        if not self.recovery_lr > 0:
            raise CompressError(f"recovery_lr must be positive, got {self.recovery_lr}.")


def relaxed_refusal(name: str) -> str:
    return (f"{name} cannot train a relaxed ALBERT: its layers form their matrices as they run, and ONNX Runtime "
            "leaves such products in fp32; quantize it after training instead (int8, int4).")


@dataclass
class AwareGroupedOptions(AwareOptions, GroupedOptions):
    """Quantization-aware training of a weight-only format: its group size and its training."""


def with_options(fmt: QuantMethod, options: Any) -> QuantMethod:
    """``fmt`` as ``options`` set it (a weight-only format's group size, bits per matrix's share in 4 bits)."""
    changes = {k: getattr(options, k) for k in ("group_size", "int4_share") if getattr(options, k, None) is not None}
    return replace(fmt, **changes) if changes else fmt
