"""Quantization backends on a tiny encoder: real torch.ao, real ONNX export, real ONNX Runtime."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from compress.errors import CompressError
from compress.models.encoder import Encoder
from compress.quantize import artefacts, onnx_backend, torch_backend
from compress.quantize.artefacts import QUANT_METHODS, artefact_bytes, load_artefact, write_artefact
from compress.quantize.predictors import TorchPredictor
from helpers import padded_batch, tiny_config


@pytest.fixture(scope="module")
def model() -> Encoder:
    torch.manual_seed(0)
    # A wider vocabulary than the default tiny config so the embedding table dominates the bytes, as in BERT.
    return Encoder(tiny_config(vocab_size=2000, num_layers=2)).eval()


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in padded_batch(vocab_size=2000).items()}


def _write(method: str, backend: str, model: Encoder, directory, inputs=None):
    directory.mkdir()
    calibration = [inputs] * 4 if method == "static-int8" else None
    write_artefact(QUANT_METHODS[method], backend, model, directory, calibration=calibration, label_names=["a", "b", "c"])
    return load_artefact(directory, threads=1)


def test_onnx_fp32_matches_pytorch_within_1e_4(model, inputs, tmp_path):
    predictor = _write("onnx", "onnxruntime", model, tmp_path / "onnx")
    reference = TorchPredictor(model)(inputs)
    assert predictor.backend == "onnxruntime" and predictor.dtype == "fp32"
    np.testing.assert_allclose(predictor(inputs), reference, atol=1e-4, rtol=0)
    # Batch and sequence length are dynamic: another shape runs through the same graph.
    shorter = {k: v[:2, :5] for k, v in inputs.items()}
    np.testing.assert_allclose(predictor(shorter), TorchPredictor(model)(shorter), atol=1e-4, rtol=0)


@pytest.mark.parametrize("method, backend", [("int8", "torch"), ("int8", "onnxruntime"),
                                             ("static-int8", "onnxruntime"), ("bf16", "torch")])
def test_each_backend_stays_close_to_fp32_and_is_smaller(model, inputs, tmp_path, method, backend):
    fp32 = _write("onnx", "onnxruntime", model, tmp_path / "fp32")
    predictor = _write(method, backend, model, tmp_path / "q", inputs)
    reference = fp32(inputs)
    scale = np.abs(reference).max()
    assert np.abs(predictor(inputs) - reference).max() < 0.1 * scale  # quantization error, not a broken model
    assert predictor(inputs).shape == reference.shape and predictor(inputs).dtype == np.float32
    # bf16 halves every tensor; ONNX Runtime int8 quantizes the embedding table too, torch int8 only the Linears.
    expected_ratio = {("bf16", "torch"): 1.9, ("int8", "torch"): 1.2}.get((method, backend), 2.0)
    assert artefact_bytes(tmp_path / "fp32") / artefact_bytes(tmp_path / "q") > expected_ratio


def test_torch_int8_round_trips_bit_for_bit(model, inputs, tmp_path):
    quantized = torch_backend.quantize_int8(model)
    torch_backend.save_int8(quantized, tmp_path / "w.safetensors")
    reloaded = torch_backend.load_int8(tmp_path / "w.safetensors", model.config)
    np.testing.assert_array_equal(TorchPredictor(reloaded)(inputs), TorchPredictor(quantized)(inputs))
    linear = reloaded.attention[0].query
    assert linear.weight().dtype == torch.qint8


def test_half_artefact_holds_half_precision_tensors(model, tmp_path):
    half = torch_backend.to_half(model, "bf16")
    torch_backend.save_half(half, tmp_path / "w.safetensors")
    reloaded = torch_backend.load_half(tmp_path / "w.safetensors", model.config, "bf16")
    assert all(p.dtype == torch.bfloat16 for p in reloaded.parameters())
    assert model.attention[0].query.weight.dtype == torch.float32  # the source is left alone


def test_backend_choice_is_checked(monkeypatch):
    assert artefacts.candidate_backends(QUANT_METHODS["int8"], "auto") == ["onnxruntime", "torch"]
    with pytest.raises(CompressError, match="bf16 runs on torch, not onnxruntime"):
        artefacts.candidate_backends(QUANT_METHODS["bf16"], "onnxruntime")
    with pytest.raises(CompressError, match="unknown backend 'tensorrt'"):
        artefacts.candidate_backends(QUANT_METHODS["int8"], "tensorrt")
    with pytest.raises(CompressError, match="known: int8"):
        artefacts.get_quant_method("int4")


def test_a_missing_onnxruntime_is_one_clear_line(monkeypatch, model, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now raises ImportError
    reason = artefacts.unavailable("onnxruntime")
    assert reason is not None and "pip install onnx onnxruntime" in reason and "\n" not in reason
    with pytest.raises(CompressError, match="pip install"):
        onnx_backend.export_onnx(model, tmp_path / "m.onnx")
    assert artefacts.unavailable("torch") is None


def test_half_precision_needs_cpu_support_to_be_fast():
    assert torch_backend.half_available("bf16", {"avx512_bf16": True}) is None
    assert torch_backend.half_available("bf16", {"amx_bf16": True}) is None
    assert "emulated" in torch_backend.half_available("bf16", {"avx2": True})
    assert "try bf16" in torch_backend.half_available("fp16", {"avx512_bf16": True})
