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
from compress.quantize.predictors import TorchPredictor, ort_session
from compress.quantize.run import usable_backends
from helpers import padded_batch, tiny_config


@pytest.fixture(scope="module")
def model() -> Encoder:
    torch.manual_seed(0)
    # A wider vocabulary than the default tiny config so the embedding table dominates the bytes, as in BERT.
    return Encoder(tiny_config(vocab_size=2000, num_layers=2)).eval()


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in padded_batch(vocab_size=2000).items()}


def _calibration() -> list[dict[str, np.ndarray]]:
    """Other sentences than the ones scored, as calibration on training data would be."""
    return [{k: v.numpy() for k, v in padded_batch(vocab_size=2000, seed=seed).items()} for seed in (1, 2, 3, 4)]


def _write(method: str, backend: str, model: Encoder, directory):
    directory.mkdir()
    calibration = _calibration() if method == "static-int8" else None
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
    predictor = _write(method, backend, model, tmp_path / "q")
    reference = fp32(inputs)
    scale = np.abs(reference).max()
    assert np.abs(predictor(inputs) - reference).max() < 0.1 * scale  # quantization error, not a broken model
    assert predictor(inputs).shape == reference.shape and predictor(inputs).dtype == np.float32
    # bf16 halves every tensor; ONNX Runtime int8 quantizes the embedding table too, torch int8 only the Linears.
    expected_ratio = {("bf16", "torch"): 1.9, ("int8", "torch"): 1.2}.get((method, backend), 2.0)
    assert artefact_bytes(tmp_path / "fp32") / artefact_bytes(tmp_path / "q") > expected_ratio


def test_onnxruntime_sessions_leave_out_the_slow_skip_layer_norm_fusion(model, inputs, tmp_path):
    """ONNX Runtime would fuse our int8 graph's residual Adds into SkipLayerNormalization, which is
    slower on CPU; our sessions run the same graph without that fusion and give the same logits."""
    import onnx
    import onnxruntime as ort

    predictor = _write("int8", "onnxruntime", model, tmp_path / "q")
    graph = tmp_path / "q" / "model.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "all.onnx")
    default = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    ort_session(graph, threads=1, save_optimized=tmp_path / "ours.onnx")

    def ops(path):
        return [node.op_type for node in onnx.load(str(path)).graph.node]

    assert "SkipLayerNormalization" in ops(tmp_path / "all.onnx")
    assert "SkipLayerNormalization" not in ops(tmp_path / "ours.onnx")
    feeds = {i.name: inputs[i.name].astype(np.int64) for i in default.get_inputs()}
    np.testing.assert_allclose(predictor(inputs), default.run(["logits"], feeds)[0], atol=1e-5, rtol=0)


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


def test_fp16_artefact_runs_and_a_method_never_falls_back_to_another_backend(model, inputs, tmp_path):
    predictor = _write("fp16", "torch", model, tmp_path / "fp16")
    assert predictor.dtype == "fp16"
    np.testing.assert_allclose(predictor(inputs), TorchPredictor(model)(inputs), atol=1e-2, rtol=0)
    with pytest.raises(CompressError, match="static-int8 runs on onnxruntime, not torch"):
        write_artefact(QUANT_METHODS["static-int8"], "torch", model, tmp_path)
    (tmp_path / "fp16" / "quantized.json").write_text('{"format": "something-else"}')
    with pytest.raises(CompressError, match="not a version 1 compress quantized model"):
        load_artefact(tmp_path / "fp16", threads=1)


def test_backend_choice_is_checked():
    assert artefacts.candidate_backends(QUANT_METHODS["int8"], "auto") == ["onnxruntime", "torch"]
    with pytest.raises(CompressError, match="bf16 runs on torch, not onnxruntime"):
        artefacts.candidate_backends(QUANT_METHODS["bf16"], "onnxruntime")
    with pytest.raises(CompressError, match="unknown backend 'tensorrt'"):
        artefacts.candidate_backends(QUANT_METHODS["int8"], "tensorrt")
    with pytest.raises(CompressError, match="known: int8"):
        artefacts.get_quant_method("int4")


def test_a_missing_onnxruntime_is_one_clear_line(monkeypatch, model, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now raises ImportError
    reason = artefacts.unavailable(QUANT_METHODS["int8"], "onnxruntime")
    assert reason is not None and "pip install onnx onnxruntime" in reason and "\n" not in reason
    with pytest.raises(CompressError, match="pip install"):
        onnx_backend.export_onnx(model, tmp_path / "m.onnx")
    with pytest.raises(CompressError, match="onnx cannot run here: ONNX Runtime is not installed"):
        usable_backends(QUANT_METHODS["onnx"], "auto")
    assert usable_backends(QUANT_METHODS["int8"], "auto") == (["torch"], {"onnxruntime": reason})


def test_half_precision_needs_cpu_support_to_be_fast():
    assert torch_backend.half_available("bf16", {"avx512_bf16": True}) is None
    assert torch_backend.half_available("bf16", {"amx_bf16": True}) is None
    assert "emulated" in torch_backend.half_available("bf16", {"avx2": True})
    assert "try bf16" in torch_backend.half_available("fp16", {"avx512_bf16": True})
