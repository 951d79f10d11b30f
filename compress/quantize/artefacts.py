"""Quantization methods, their backends, and the artefact each writes: one directory, loadable as a predictor.

Artefact directory::

    quantized.json      method, backend, dtype, the encoder config, label names, the weights file
    model.onnx          (onnxruntime), model.safetensors (torch), or model.xml and model.bin (openvino)
    tokenizer files     so the directory serves requests on its own

Its size on disk is the size of the model's files, measured after writing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np

from compress.bench.measurement import Predictor
from compress.device import fp8_unavailable
from compress.errors import CompressError
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.paths import as_ordinary_file
from compress.quantize import onnx_backend, openvino_backend, torch_backend
from compress.quantize.formats import QuantMethod, check_backend
from compress.quantize.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    RUNTIME_BACKENDS,
    ArtefactManifest,
    read_manifest,
    runtime_predictor,
)
from compress.quantize.predictors import TorchPredictor, ort_gpu_unavailable
from compress.quantize.rounding import int8_weight_levels

# The manifest and the runtimes' predictors need no torch and live apart (what `compress predict` imports).
__all__ = ["FORMAT_VERSION", "MANIFEST", "ArtefactManifest", "artefact_bytes", "candidate_backends", "gpu_unavailable",
           "load_artefact", "needs_calibration", "read_manifest", "shape_misfit", "unavailable", "weights_file",
           "write_artefact"]


def candidate_backends(method: QuantMethod, backend: str) -> list[str]:
    """The backends to build: all the method supports for ``auto``, else the one asked for (if supported)."""
    if backend == "auto":
        return list(method.backends)
    check_backend(backend)
    if backend not in method.backends:
        raise CompressError(f"{method.name} runs on {' or '.join(method.backends)}, not {backend}.")
    return [backend]


def unavailable(method: QuantMethod, backend: str, device: str = "cpu") -> str | None:
    """None when ``method`` can run on ``backend`` here, on ``device`` (where speed is measured: the CPU or a GPU),
    else why not (one sentence)."""
    if device == "cuda":
        return gpu_unavailable(method.name, method.dtype, backend)
    if backend == "onnxruntime":
        return onnx_backend.int4_available() if method.dtype in ("int4", "mixed") else \
            onnx_backend.onnxruntime_available()
    if backend == "openvino":
        return onnx_backend.onnxruntime_available() or openvino_backend.openvino_available()
    return torch_backend.torch_int8_available() if method.dtype == "int8" else None


def shape_misfit(method: QuantMethod, backend: str, config: EncoderConfig) -> str | None:
    """Why ``method`` on ``backend`` cannot store a model of this shape (OpenVINO's int4 groups only channels its
    group size divides), or None."""
    if method.dtype == "int4" and backend == "openvino" and method.group_size:
        from compress.quantize.sizes import ov_int4_misfit

        return ov_int4_misfit(config, method.group_size)
    return None


def gpu_unavailable(name: str, dtype: str, backend: str) -> str | None:
    """None when the format ``name`` (of ``dtype``) on ``backend`` runs on a GPU here, else why not: PyTorch runs
    bf16 and fp16 there, and float8 on a card with float8 units, ONNX Runtime the fp32 model where its CUDA execution
    provider is installed; the integer formats compress makes (PyTorch's dynamic int8, ONNX Runtime's and OpenVINO's
    int8 and int4) and OpenVINO itself run on the CPU only."""
    if dtype in ("int8", "int4", "mixed"):
        return f"{name} is made for the CPU's integer kernels and has no GPU path in compress; time it with " \
               "--speed-device cpu."
    if backend == "torch":
        if dtype == "fp8":
            reason = fp8_unavailable()
            return f"{name} needs a GPU with float8 units to run on one: {reason}" if reason else None
        return None if dtype in torch_backend.HALF_DTYPES else f"{name} runs on the CPU only."
    if backend == "onnxruntime":
        return onnx_backend.onnxruntime_available() or ort_gpu_unavailable()
    return "OpenVINO runs on the CPU here (compress compiles its models for the CPU device)."


def needs_calibration(method: QuantMethod, backend: str) -> bool:
    """Whether ``method`` on ``backend`` reads training batches: to fix activation ranges (static int8; NNCF int8),
    or to measure each matrix's sensitivity (bits per matrix)."""
    return method.calibrated or method.dtype == "mixed" or (backend == "openvino" and method.dtype == "int8")


def weights_file(backend: str) -> str:
    return {"onnxruntime": "model.onnx", "openvino": "model.xml"}.get(backend, torch_backend.WEIGHTS)


def _files(directory: Path, weights: str) -> list[Path]:
    """The files holding the model: the weights file, and for OpenVINO its ``.bin`` beside the ``.xml``."""
    path = Path(directory) / weights
    return [path, path.with_suffix(".bin")] if path.suffix == ".xml" else [path]


def write_artefact(
    method: QuantMethod,
    backend: str,
    model: Encoder,
    directory: Path,
    *,
    calibration: Iterable[Mapping[str, np.ndarray]] | None = None,
    label_names: list[str] | None = None,
) -> None:
    """Quantize ``model`` (fp32, not modified) with ``method`` on ``backend`` into ``directory`` (it must exist)."""
    candidate_backends(method, backend)  # a backend the method does not run on is an error, not a fallback
    directory = Path(directory)
    weights = directory / weights_file(backend)
    if needs_calibration(method, backend) and calibration is None:
        raise ValueError(f"{method.name} on {backend} needs calibration batches")
    allocation = None
    if backend == "openvino":
        fp32 = directory / "fp32.onnx"
        onnx_backend.export_onnx(model, fp32)
        if method.dtype == "int8":
            openvino_backend.quantize_int8(fp32, weights, calibration)
        elif method.dtype == "int4":
            openvino_backend.compress_weights_int4(fp32, weights, _group_size(method))
        else:
            openvino_backend.write_ir(fp32, weights, weights_fp16=method.dtype != "fp32")
        fp32.unlink()
    elif backend == "onnxruntime":
        if method.dtype == "fp32":
            onnx_backend.export_onnx(model, weights)
        else:
            fp32 = directory / "fp32.onnx"
            onnx_backend.export_onnx(model, fp32)
            if method.dtype == "int4":
                onnx_backend.quantize_weights_int4(fp32, weights, _group_size(method))
            elif method.dtype == "mixed":
                allocation = onnx_backend.quantize_bits_per_matrix(
                    fp32, weights, model, method.int4_share or 0.0, _group_size(method), calibration or [])
            elif method.calibrated:
                onnx_backend.quantize_static_int8(fp32, weights, calibration)
            else:
                onnx_backend.quantize_dynamic_int8(fp32, weights)
            fp32.unlink()
    elif method.dtype == "int8":
        torch_backend.save_int8(torch_backend.quantize_int8(model), weights)
    elif method.dtype == "fp8":
        torch_backend.save_fp8(torch_backend.to_fp8(model), weights)
    else:
        torch_backend.save_half(torch_backend.to_half(model, method.dtype), weights)
    for path in _files(directory, weights.name):
        as_ordinary_file(path)
    manifest = {"format": "compress-quantized", "version": FORMAT_VERSION, "method": method.name,
                "backend": backend, "dtype": method.dtype, "weights": weights.name,
                **({"group_size": method.group_size} if method.group_size else {}),
                **({"int4_share": method.int4_share, "bits": [asdict(m) for m in allocation]} if allocation else {}),
                **({"int8_weight_levels": int8_weight_levels()}
                   if backend == "onnxruntime" and method.dtype in ("int8", "mixed") else {}),
                "encoder": model.config.to_dict(), "label_names": label_names}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2))


def _group_size(method: QuantMethod) -> int:
    if method.group_size is None:
        raise ValueError(f"{method.name} stores weights in groups and names no group size")
    return method.group_size


def load_artefact(directory: Path, threads: int, spinning: bool = False, device: str = "cpu") -> Predictor:
    """The predictor of an artefact directory written by :func:`write_artefact` (``spinning``: whether ONNX
    Runtime's workers spin-wait for the next call, see :func:`compress.quantize.ort_predictor.ort_session`), run on
    ``device`` (a GPU where the format has a path there: :func:`gpu_unavailable`)."""
    manifest = read_manifest(directory)
    weights = Path(directory) / manifest["weights"]
    if device == "cuda":
        reason = gpu_unavailable(manifest["method"], manifest["dtype"], manifest["backend"])
        if reason:
            raise CompressError(f"{directory}: {reason}")
    if manifest["backend"] in RUNTIME_BACKENDS:
        return runtime_predictor(directory, manifest, threads, spinning=spinning, device=device)
    config = EncoderConfig.from_dict(manifest["encoder"])
    if manifest["dtype"] == "int8":
        return TorchPredictor(torch_backend.load_int8(weights, config), dtype="int8")
    if manifest["dtype"] == "fp8":
        return TorchPredictor(torch_backend.load_fp8(weights, config, compute=device == "cuda", device=device),
                              dtype="fp8", device=device)
    return TorchPredictor(torch_backend.load_half(weights, config, manifest["dtype"]), dtype=manifest["dtype"],
                          device=device)


def artefact_bytes(directory: Path) -> int:
    """Bytes of the artefact's model files (OpenVINO: the ``.xml`` and its ``.bin``)."""
    return sum(path.stat().st_size for path in _files(directory, read_manifest(directory)["weights"]))
