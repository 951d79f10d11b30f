"""A quantization format as the method modules declare it, importable without torch (the registry, and so
``compress --help``, loads every method module); :mod:`compress.quantize.artefacts` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass

from compress.errors import CompressError

BACKENDS = ("torch", "onnxruntime", "openvino")
GROUP_SIZES = (16, 32, 64, 128, 256)   # a weight-only format's groups: powers of two, as ONNX Runtime's kernels take


def check_backend(name: str) -> None:
    """One sentence for a backend name compress does not know (``auto`` chooses among :data:`BACKENDS`)."""
    if name != "auto" and name not in BACKENDS:
        raise CompressError(f"unknown backend {name!r}; choose {', '.join(BACKENDS)} or auto.")


@dataclass(frozen=True)
class QuantMethod:
    """A quantization format (the method modules in compress.methods declare theirs)."""

    name: str
    dtype: str
    backends: tuple[str, ...]   # in order of preference when nothing was measured
    summary: str
    calibrated: bool = False    # activation ranges fixed in advance on calibration batches (static int8)
    group_size: int | None = None   # weight-only formats (int4): weights sharing one scale, along the input channels
    int4_share: float | None = None   # bits per matrix (mixed): the least share of the weights put in 4 bits


@dataclass(frozen=True)
class MatrixBits:
    """One matrix's expected loss at each width and the width it was given (:mod:`compress.quantize.bit_allocation`)."""

    name: str           # the parameter's name in the encoder
    weights: int
    loss_int8: float    # 1/2 sum F (w - q8(w))^2
    loss_int4: float
    bits: int

    @property
    def extra_per_weight(self) -> float:
        """What 4 bits add to the expected loss over 8, per weight moved: the allocation's order."""
        return (self.loss_int4 - self.loss_int8) / self.weights
