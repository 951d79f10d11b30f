"""OpenVINO: our ONNX export read into OpenVINO's IR and compiled for this CPU; int8 by NNCF.

* fp32: the fp32 ONNX graph saved as IR (``model.xml`` + ``model.bin``, weights fp32) and compiled with inference
  precision f32 (left alone, OpenVINO computes in bf16 on CPUs with bf16 units).
* bf16: the same graph with its weights stored in fp16 (2 bytes each; OpenVINO converts them when it compiles)
  compiled with inference precision bf16 where the CPU has bf16 units (elsewhere OpenVINO picks, and says).
* int8: NNCF post-training quantization (its transformer preset, SmoothQuant included: int8 weights with a
  scale per output channel, embedding tables included; activation ranges fixed in advance) calibrated on
  training sentences, one at a time and unpadded. Its overflow fix is on: linear weights use 7 of the 8 bits,
  so CPUs without VNNI, which add pairs of u8 x s8 products in int16, do not saturate. On a random tiny
  encoder run as if without VNNI (ONEDNN_MAX_CPU_ISA=AVX512_CORE) the logits' rms error fell from 0.11 to
  0.069 with it (0.068 with VNNI, with or without), and one initialisation's from 0.69 to 0.20; the
  fine-tuned minilm's MR accuracy did not move. What stays in floating point runs at OpenVINO's default
  precision for the CPU (bf16 where it has bf16 units).

The precision OpenVINO compiled for is read back from the compiled model and recorded. Both packages start their
usage telemetry when imported (a client id and counts under ``~/intel``, events sent on some calls) unless they
find themselves in CI; compress imports them with ``CI`` and ``NNCF_CI`` set for the import only, so they decline,
and nothing is written or sent.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compress.errors import CompressError
from compress.models.config import INPUT_NAMES

INSTALL = "pip install 'compress[openvino]'"
# What OpenVINO's and NNCF's telemetry read when they are imported, to decline.
_DECLINE = {"CI": "true", "NNCF_CI": "1"}


def _import(nncf: bool = True) -> tuple[Any, Any]:
    """The openvino and nncf modules (nncf None unless ``nncf``: running a model needs openvino alone, and nncf
    imports torch where it is installed), imported with their telemetry declined (the variables are set for the
    import only, then restored)."""
    saved = {name: os.environ.get(name) for name in _DECLINE}
    os.environ.update(_DECLINE)
    try:
        import openvino

        nncf_module = importlib.import_module("nncf") if nncf else None
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return openvino, nncf_module


def openvino_available(nncf: bool = True) -> str | None:
    """None when openvino and (``nncf``) nncf import, else why not (one sentence)."""
    try:
        _import(nncf)
    except ImportError as e:
        return f"OpenVINO is not installed ({e.name}); install it with `{INSTALL}`."
    return None


def _modules(nncf: bool = True) -> tuple[Any, Any]:
    """The openvino and nncf modules (:func:`_import`), or a CompressError saying how to install them."""
    reason = openvino_available(nncf)
    if reason:
        raise CompressError(reason)
    return _import(nncf)


def write_ir(onnx_path: Path, xml: Path, *, weights_fp16: bool = False) -> None:
    """The ONNX graph at ``onnx_path`` saved as IR at ``xml`` (and its ``.bin``), weights fp32 or fp16."""
    ov, _ = _modules()
    ov.save_model(ov.Core().read_model(str(onnx_path)), str(xml), compress_to_fp16=weights_fp16)


def sentences(batches: Iterable[Mapping[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Padded batches split into single sentences without their padding (as a service receives them)."""
    out = []
    for batch in batches:
        for row in range(len(batch["input_ids"])):
            length = int(np.asarray(batch["attention_mask"][row]).sum())
            out.append({k: np.asarray(batch[k][row:row + 1, :length], dtype=np.int64) for k in INPUT_NAMES})
    return out


def quantize_int8(onnx_path: Path, xml: Path, calibration: Iterable[Mapping[str, np.ndarray]]) -> None:
    """NNCF post-training int8 of the fp32 ONNX graph at ``onnx_path``, calibrated on the sentences of
    ``calibration`` (padded batches), saved as IR at ``xml``."""
    ov, nncf = _modules()
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

    items = sentences(calibration)
    if not items:
        raise ValueError("NNCF int8 needs calibration sentences")
    model = ov.Core().read_model(str(onnx_path))
    names = [port.get_any_name() for port in model.inputs]
    dataset = nncf.Dataset(items, lambda item: {k: item[k] for k in names})
    with contextlib.redirect_stdout(io.StringIO()):  # NNCF draws its own progress bars on stdout
        quantized = nncf.quantize(model, dataset, model_type=nncf.ModelType.TRANSFORMER,
                                  preset=nncf.QuantizationPreset.MIXED, subset_size=len(items),
                                  advanced_parameters=AdvancedQuantizationParameters(overflow_fix=OverflowFix.ENABLE))
    ov.save_model(quantized, str(xml), compress_to_fp16=False)


def compress_weights_int4(onnx_path: Path, xml: Path, group_size: int) -> None:
    """NNCF's weight compression of the fp32 ONNX graph at ``onnx_path``: every weight matrix and embedding table
    (the heads too) in signed 4 bits, symmetric, one fp16 scale per ``group_size`` input channels of each output
    channel (per group of columns of a table's row); saved as IR at ``xml``."""
    ov, nncf = _modules()
    from nncf.common.logging import nncf_logger

    model = ov.Core().read_model(str(onnx_path))
    level = nncf_logger.level
    nncf_logger.setLevel(logging.WARNING)   # its table of bit widths, logged to the stdout it found at import
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # and its progress bar
            compressed = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT4_SYM, group_size=group_size,
                                               ratio=1.0, all_layers=True)
    finally:
        nncf_logger.setLevel(level)
    ov.save_model(compressed, str(xml), compress_to_fp16=False)


def precision_hint(dtype: str) -> str | None:
    """The inference precision ``dtype`` is compiled with; None leaves OpenVINO's default for the CPU."""
    from compress.bench.machine import cpu_features, half_available

    if dtype in ("fp32", "int4"):   # int4 is weight-only: its activations stay fp32, as on ONNX Runtime
        return "f32"
    return "bf16" if dtype == "bf16" and half_available("bf16", cpu_features()) is None else None


@dataclass
class OvPredictor:
    """An OpenVINO IR compiled for the CPU: latency mode, one stream, a fixed number of threads."""

    path: Path
    threads: int
    dtype: str = "fp32"
    backend: str = "openvino"
    inference_precision: str = field(init=False)
    request: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ov, _ = _modules(nncf=False)
        import openvino.properties as props
        import openvino.properties.hint as hints

        config: dict[str, Any] = {props.inference_num_threads: self.threads, props.num_streams: 1,
                                  hints.performance_mode: hints.PerformanceMode.LATENCY}
        hint = precision_hint(self.dtype)
        if hint:
            config[hints.inference_precision] = getattr(ov.Type, hint)
        compiled = ov.Core().compile_model(str(self.path), "CPU", config)
        self.inference_precision = compiled.get_property(hints.inference_precision).get_type_name()
        self._inputs = [port.get_any_name() for port in compiled.inputs]
        self.request = compiled.create_infer_request()

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        feeds = {k: np.ascontiguousarray(inputs[k], dtype=np.int64) for k in self._inputs}
        return np.array(self.request.infer(feeds)["logits"], dtype=np.float32)
