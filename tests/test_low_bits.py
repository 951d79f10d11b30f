"""Below 8 bits and in float8: int4 weights on ONNX Runtime and OpenVINO (the bytes it stores, shared weights once and
groups padded; each backend's rounding against a blockwise quantizer written here; `compress run int4` end to end) and float8 weights
(every stored value an e4m3 number, enumerated here from its bit layout; the rounding within e4m3's precision)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from helpers import run_cli, tiny_config, tiny_quantization_run
from onnx import numpy_helper
from torch import nn

from compress.methods.quantization import quant_format
from compress.methods.quantization.options import with_options
from compress.models.encoder import Encoder
from compress.quantize.artefacts import gpu_unavailable, load_artefact, read_manifest, write_artefact
from compress.quantize.sizes import stored_bytes
from compress.quantize.torch_backend import Float8Linear, fp8_encoder, load_fp8, save_fp8, to_fp8

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _model(**changes) -> Encoder:
    """An encoder with distinct values everywhere (no two tensors alike, so the ONNX export merges none)."""
    torch.manual_seed(0)
    model = Encoder(tiny_config(vocab_size=1000, **changes)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def _int4(group_size: int):
    return with_options(quant_format("int4"), type("Options", (), {"group_size": group_size})())


def _rounded(weight: torch.Tensor, group_size: int) -> torch.Tensor:
    """Blockwise symmetric 4-bit rounding along the last axis, as int4's scheme says: per group, s = the weight of
    largest magnitude / -8, q = round(w / s) clipped to [-8, 7], w' = q s."""
    rows, columns = weight.shape
    padded = torch.nn.functional.pad(weight, (0, -columns % group_size)).reshape(rows, -1, group_size)
    largest = padded.gather(-1, padded.abs().argmax(-1, keepdim=True))
    scale = largest / -8
    q = torch.where(scale == 0, 0, padded / scale).round().clamp(-8, 7)
    return (q * scale).reshape(rows, -1)[:, :columns]


@pytest.mark.parametrize("changes", [{"sharing": "all", "embedding_size": 16, "hidden_size": 48},
                                     {"sharing": "attention", "embedding_size": 32}])
def test_the_bytes_stored_are_the_bytes_counted_and_no_fp32_weight_is_left(tmp_path, changes):
    model = _model(**changes)   # shared layers (one weight, read by every layer) and groups padded (48 = 32 + 16)
    write_artefact(_int4(32), "onnxruntime", model, tmp_path)
    graph = onnx.load(str(tmp_path / "model.onnx")).graph
    stored = sum(len(t.raw_data) if t.raw_data else numpy_helper.to_array(t).nbytes for t in graph.initializer)
    assert stored == pytest.approx(stored_bytes(model.config, "int4", "onnxruntime", group_size=32), rel=0.002)
    weights = {t.name for t in graph.initializer}
    assert not [n.name for n in graph.node if n.op_type in ("MatMul", "Gemm") and set(n.input) & weights]
    projection = model.config.embedding_size != model.config.hidden_size
    heads = 2   # the pooler and the classifier: their Gemm rewritten as MatMul and Add, so quantized as the rest
    assert sum(n.op_type == "MatMulNBits" for n in graph.node) == 6 * model.config.num_layers + projection + heads
    assert read_manifest(tmp_path)["group_size"] == 32


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_each_backend_rounds_as_the_scheme_says(tmp_path, backend):
    if backend == "openvino":
        pytest.importorskip("nncf")
    model = _model(hidden_size=64, ffn_size=128)
    write_artefact(_int4(32), backend, model, tmp_path)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 1000, (8, 16))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    int4 = load_artefact(tmp_path, threads=1)(feeds)
    rounded = _model(hidden_size=64, ffn_size=128)
    with torch.no_grad():
        for module in rounded.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):   # the heads too, on both backends
                module.weight.copy_(_rounded(module.weight, 32))   # a Linear's rows are its output channels

        def logits(m: Encoder) -> np.ndarray:
            return m(*(torch.from_numpy(feeds[k]) for k in INPUTS)).logits.numpy()

        fp32, reference = logits(model), logits(rounded)
    # each backend's int4 is the rounding above (up to ONNX Runtime's int8 activations inside its 4-bit matmul and
    # OpenVINO's fp16 scales), far closer to it than to fp32
    assert np.abs(int4 - reference).max() < 0.25 * np.abs(int4 - fp32).max()


def test_compress_run_int4_writes_a_four_bit_model_and_refuses_a_bad_group_size(tmp_path):
    common, env = tiny_quantization_run(tmp_path)
    done = run_cli("run", "int4[group_size=64]", *common, "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    student, teacher_record = metrics["student"], metrics["teacher"]
    assert student["dtype"] == "int4" and student["backend"] in ("onnxruntime", "openvino")
    details = metrics["details"]   # --backend auto built both, timed both and kept one (which: this CPU's timing)
    assert set(details["measured"]) == {"onnxruntime", "openvino"} or "openvino" in details["skipped"]
    assert details["inference_precision"].get("openvino", "f32") == "f32"   # weight-only: activations stay fp32
    assert student["params"] == teacher_record["params"] and student["size_bytes"] < teacher_record["size_bytes"] / 4
    bad = run_cli("run", "int4[group_size=48]", *common, "--out", str(tmp_path / "bad"), env=env)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "group_size must be one of 16, 32, 64, 128, 256, got 48" in bad.stderr
    assert not (tmp_path / "bad").exists()


def _e4m3_values() -> np.ndarray:
    """Every finite e4m3 (fn) number, from its bits: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
    subnormal, and the all-ones pattern (exponent 15, mantissa 7) is NaN."""
    magnitudes = [m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
                  for e in range(16) for m in range(8) if (e, m) != (15, 7)]
    return np.unique(np.concatenate([magnitudes, np.negative(magnitudes)]))


def test_float8_stores_e4m3_numbers_one_scale_a_row_and_rounds_within_their_precision(tmp_path):
    model = _model(sharing="attention", hidden_size=64, ffn_size=128)
    tensors = to_fp8(model)
    values = _e4m3_values()
    assert values.max() == 448 and len(values) == 2 * 127 - 1   # 0 once: +0 and -0 are one number
    query = model.attention[0].query.weight.detach()
    stored, scale = tensors["attention.0.query.weight_fp8"].float(), tensors["attention.0.query.weight_scale"]
    assert np.isin(stored.numpy(), values).all()
    assert torch.equal(stored.abs().amax(dim=1), torch.full((query.shape[0],), 448.0))   # each row's largest: 448
    restored = stored * scale[:, None]
    normal = (query / scale[:, None]).abs() >= 2 ** -6
    error = (restored - query).abs()
    assert (error[normal] <= 2 ** -4 * query.abs()[normal] + 1e-9).all()   # 3 mantissa bits: half a step, 1/16
    assert (error[~normal] <= 2 ** -10 * scale[:, None].expand_as(query)[~normal] + 1e-12).all()
    # written and read back: every weight of the model is the restored one, the rest fp32 as it was
    save_fp8(tensors, tmp_path / "model.safetensors")
    loaded = load_fp8(tmp_path / "model.safetensors", model.config)
    assert torch.equal(loaded.attention[0].query.weight, restored)
    assert torch.equal(loaded.attention[0].query.bias, model.attention[0].query.bias)


def _scaled_mm_here() -> None:
    """Skip where this PyTorch cannot multiply float8 matrices on the CPU (the GPU check runs the same on a GPU)."""
    a = torch.ones(16, 16).to(torch.float8_e4m3fn)
    try:
        torch._scaled_mm(a, a.t(), scale_a=torch.ones(16, 1), scale_b=torch.ones(1, 16), out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError) as error:
        pytest.skip(f"this PyTorch has no float8 matrix product on the CPU: {error}")


def _nearest_e4m3(x: np.ndarray) -> np.ndarray:
    values = _e4m3_values()
    right = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    left = right - 1
    return np.where(np.abs(x - values[left]) <= np.abs(values[right] - x), values[left], values[right])


def test_a_float8_linear_layer_multiplies_e4m3_activations_by_the_stored_weights():
    _scaled_mm_here()
    model = _model(hidden_size=64, ffn_size=128)
    tensors = to_fp8(model)
    weight, scale = tensors["ffn.0.intermediate.weight_fp8"], tensors["ffn.0.intermediate.weight_scale"]
    bias = model.ffn[0].intermediate.bias
    layer = Float8Linear(weight, scale, bias)
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(1)) * torch.linspace(0.1, 3, 64)
    y = layer(x)
    assert y.shape == (3, 5, 128) and y.dtype == torch.bfloat16
    # the reference: each token's activations over its largest / 448, rounded to the nearest e4m3 number (from the
    # bit layout above), times the stored weights, in float64
    rows = x.reshape(15, 64).numpy().astype(np.float32)
    x_scale = np.abs(rows).max(axis=1, keepdims=True) / np.float32(448)
    rounded = _nearest_e4m3((rows / x_scale).astype(np.float64)) * x_scale
    restored = weight.float().numpy().astype(np.float64) * scale.numpy()[:, None]
    products, bf16_bias = rounded @ restored.T, bias.detach().to(torch.bfloat16).double().numpy()
    expected = products + bf16_bias
    got = y.reshape(15, 128).double().numpy()
    # out in bf16 (8 significant bits: half a step is up to 2^-8 of a value), then the bias added in bf16
    assert np.all(np.abs(got - expected) <= 2 ** -8 * (np.abs(products) + np.abs(expected)) + 1e-6)
    # and the activations' rounding is what it costs: against the exact fp32 activations it is further off
    exact = rows.astype(np.float64) @ restored.T + bias.detach().double().numpy()
    assert np.abs(exact - expected).max() > np.abs(got - expected).max()


def test_a_float8_model_multiplies_in_float8_where_the_shapes_fit_and_answers_as_its_widened_weights():
    _scaled_mm_here()
    model = _model(sharing="all", hidden_size=64, ffn_size=128, embedding_size=32)
    tensors = to_fp8(model)
    widened = fp8_encoder(tensors, model.config)
    computed = fp8_encoder(tensors, model.config, compute=True)
    layers = {name for name, m in computed.named_modules() if isinstance(m, Float8Linear)}
    # the one shared block's six matrices (each once), the pooler and the factorized embedding's 32 -> 64 projection:
    # 16 divides both sides of each; not the classifier (3 labels), which stays in bf16
    assert layers == {"attention.0.query", "attention.0.key", "attention.0.value", "attention.0.output",
                      "ffn.0.intermediate", "ffn.0.output", "pooler", "embeddings.projection"}
    assert isinstance(computed.classifier, nn.Linear) and computed.classifier.weight.dtype == torch.bfloat16
    stored = tensors["attention.0.query.weight_fp8"]   # the stored bytes themselves, not rounded again
    assert torch.equal(computed.attention[0].query.weight_fp8.view(torch.uint8), stored.view(torch.uint8))
    ids = torch.randint(1, 1000, (4, 12), generator=torch.Generator().manual_seed(2))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    with torch.no_grad():
        a, b = widened(**batch).logits, computed(**batch).logits.float()
    spread = (a.max() - a.min()).item()
    assert (a - b).abs().max().item() < 0.1 * spread


def test_float8_has_a_gpu_path_only_where_a_gpu_multiplies_in_it():
    reason = gpu_unavailable("fp8", "fp8", "torch")
    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        assert reason is None
    else:
        assert reason is not None and reason.startswith("fp8 needs a GPU with float8 units to run on one: ")
    assert "integer kernels" in gpu_unavailable("int4", "int4", "onnxruntime")


def test_openvino_int4_is_left_out_for_a_shape_its_group_size_does_not_divide():
    from compress.methods.quantization.verb import usable_backends

    fmt = _int4(32)
    usable, skipped = usable_backends(fmt, "auto", shape=tiny_config(hidden_size=48, embedding_size=48))
    assert usable == ["onnxruntime"] and "matrices 48 wide" in skipped["openvino"]
    assert usable_backends(fmt, "auto", shape=tiny_config())[0] == ["onnxruntime", "openvino"]
