"""An artefact's manifest (``quantized.json``) and the predictors of the artefacts that run without torch.

What :func:`compress.quantize.artefacts.write_artefact` writes is read here, with json and numpy alone, so a model on
ONNX Runtime or OpenVINO loads (:func:`runtime_predictor`) without importing torch; an artefact of the torch
backend is loaded by :func:`compress.quantize.artefacts.load_artefact`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from compress.bench.measurement import Predictor
from compress.errors import CompressError
from compress.models.config import EncoderConfigData
from compress.quantize.openvino_backend import OvPredictor
from compress.quantize.ort_predictor import OrtPredictor

MANIFEST = "quantized.json"
FORMAT_VERSION = 1
RUNTIME_BACKENDS = ("onnxruntime", "openvino")   # the backends whose artefacts run without torch


class ArtefactManifest(TypedDict, total=False):
    """quantized.json, what :func:`~compress.quantize.artefacts.write_artefact` writes beside the weights: the format
    and its version, how the model was quantized and run, the weights' file, the encoder's shape and the label names;
    ``group_size``, ``int4_share`` and ``bits`` (each matrix's :class:`~compress.quantize.formats.MatrixBits` as a
    dict) where the method has them, ``int8_weight_levels`` for ONNX Runtime's int8."""

    format: str
    version: int
    method: str
    backend: str
    dtype: str
    weights: str
    group_size: int
    int4_share: float
    bits: list[dict[str, str | int | float]]
    int8_weight_levels: int
    encoder: EncoderConfigData
    label_names: list[str] | None


def read_manifest(directory: Path) -> ArtefactManifest:
    """The manifest of an artefact directory; one sentence when it holds none of this version."""
    try:
        manifest = json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        raise CompressError(f"{directory} holds no quantized model ({MANIFEST} is missing or unreadable).") from None
    if manifest.get("format") != "compress-quantized" or manifest.get("version") != FORMAT_VERSION:
        raise CompressError(f"{directory}/{MANIFEST} is not a version {FORMAT_VERSION} compress quantized model.")
    return manifest



def runtime_predictor(directory: Path, manifest: ArtefactManifest, threads: int, spinning: bool = False,
                      device: str = "cpu") -> Predictor:
    """The predictor of an artefact on ONNX Runtime or OpenVINO (:data:`RUNTIME_BACKENDS`), whose ``manifest`` was
    read from ``directory``; ``spinning`` and ``device`` as :func:`compress.quantize.artefacts.load_artefact` takes
    them (OpenVINO runs on the CPU)."""
    weights = Path(directory) / manifest["weights"]
    if manifest["backend"] == "onnxruntime":
        return OrtPredictor(weights, threads=threads, dtype=manifest["dtype"], spinning=spinning, device=device)
    if manifest["backend"] == "openvino":
        return OvPredictor(weights, threads=threads, dtype=manifest["dtype"])
    raise ValueError(f"{directory}: a {manifest['backend']} artefact runs on torch, not on {RUNTIME_BACKENDS}")
