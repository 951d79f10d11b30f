"""Quantization-aware training's fake quantization against the runtimes themselves: the PyTorch model with the rounding
in its forward pass answers as the real dynamic int8 (or weight-only int4) graph of its weights on ONNX Runtime does, or
PyTorch's own dynamic int8 model, sentence by
sentence, whatever its shape (plain, ALBERT-factorized embeddings, low-rank matrices); gradients pass the rounding;
removing it leaves plain fp32 weights; `compress run qat-int8` trains, exports and checks the export against the
trained model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import run_cli, tiny_quantization_run
from test_low_bits import _int4, _model

from compress.methods.quantization import quant_format
from compress.quantize.artefacts import load_artefact, write_artefact
from compress.quantize.fake_quant import FakeQuantized
from compress.quantize.rounding import uint8_rounded

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _sentences(vocab: int, count: int = 12, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        length = 3 + i % 9
        ids = rng.integers(1, vocab, (1, length))
        out.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
    return out


def _logits(model, sentence) -> np.ndarray:
    with torch.no_grad():
        return model(*(torch.as_tensor(sentence[k]) for k in INPUTS)).logits.numpy()


@pytest.mark.parametrize(("group_size", "backend"), [(None, "onnxruntime"), (16, "onnxruntime"), (None, "torch")],
                         ids=["int8", "int4", "int8-torch"])
@pytest.mark.parametrize("changes", [{}, {"embedding_size": 16},
                                     {"attention_ranks": ((8, 8, 8, 8),) * 4, "ffn_ranks": ((8, 8),) * 4}],
                         ids=["plain", "factorized-embedding", "low-rank"])
def test_the_fake_quantized_model_answers_as_the_runtime_does(tmp_path, changes, group_size, backend):
    model = _model(**changes)
    fmt = quant_format("int8") if group_size is None else _int4(group_size)
    write_artefact(fmt, backend, model, tmp_path)
    runtime = load_artefact(tmp_path, threads=1)
    sentences = _sentences(model.config.vocab_size)
    fp32 = [_logits(model, s) for s in sentences]
    fake = FakeQuantized(model, group_size, backend=backend)
    aware = [_logits(model, s) for s in sentences]
    real = [runtime(s) for s in sentences]
    fake.remove()
    rounding = max(np.abs(a - f).max() for a, f in zip(aware, fp32, strict=True))   # what int8 changes
    mismatch = max(np.abs(a - r).max() for a, r in zip(aware, real, strict=True))   # what we model wrongly
    assert rounding > 1e-3, rounding                  # the rounding is there, and visible in the logits
    assert mismatch < rounding / 50, (mismatch, rounding)
    assert [a.argmax() for a in aware] == [r.argmax() for r in real]


@pytest.mark.parametrize(("flags", "machine", "levels"), [
    ("avx2", "x86_64", 64), ("avx2 avx512f", "x86_64", 64), ("avx2 avx512f avx512_vnni", "x86_64", 127),
    ("avx2 avx_vnni", "x86_64", 127), ("avx2 amx_int8", "x86_64", 127), ("", "aarch64", 127)])
def test_int8_weights_are_stored_on_7_bits_where_the_cpus_int8_kernels_would_saturate(tmp_path, monkeypatch, flags,
                                                                                      machine, levels):
    """Without VNNI or AMX, ONNX Runtime's x86 int8 kernels add pairs of uint8 x int8 products in 16 bits, which
    saturate with 8-bit weights (2 x 255 x 127 > 32,767): there the weights are written on -64..64, the manifest says
    so, and fake quantization rounds as the graph stores them. (On such a CPU the test above fails with 8-bit weights:
    the runtime's logits 15-18x further from the exact product than the rounding moves them.)"""
    import platform

    import onnx
    from onnx import numpy_helper

    from compress.bench import machine as machine_info
    from compress.quantize.artefacts import read_manifest
    from compress.quantize.rounding import int8_weight_levels

    monkeypatch.setattr(machine_info, "_cpuinfo_field", lambda name: flags if name == "flags" else None)
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert int8_weight_levels() == levels
    model = _model()
    write_artefact(quant_format("int8"), "onnxruntime", model, tmp_path)
    assert read_manifest(tmp_path)["int8_weight_levels"] == levels
    graph = onnx.load(str(tmp_path / read_manifest(tmp_path)["weights"]))
    stored = [numpy_helper.to_array(t) for t in graph.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert stored and max(int(np.abs(a.astype(np.int32)).max()) for a in stored) == levels
    fake = FakeQuantized(model)
    with torch.no_grad():
        rounded = model.attention[0].query.weight
        steps = rounded / (rounded.abs().amax(1, keepdim=True) / levels)   # each entry a whole number of its row's steps
    assert torch.allclose(steps, steps.round(), atol=1e-4) and steps.abs().max().round() == levels
    fake.remove()


def test_the_rounding_passes_gradients_straight_through_and_removing_it_leaves_fp32_weights():
    model = _model().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fake = FakeQuantized(model)
    batch = _sentences(model.config.vocab_size, count=1)[0]
    model(*(torch.as_tensor(batch[k]) for k in INPUTS)).logits.sum().backward()
    original = model.attention[0].query.parametrizations.weight.original
    assert original.grad is not None and original.grad.abs().sum() > 0
    assert not torch.equal(model.attention[0].query.weight, original)   # the forward pass reads the rounded weight
    fake.remove()
    after = model.state_dict()
    assert set(after) == set(before) and all(torch.equal(after[k], before[k]) for k in before)


def test_activation_rounding_is_dynamic_quantize_linear():
    x = torch.tensor([-1.0, -0.26, 0.0, 0.5, 2.0])
    scale = 3.0 / 255
    zero = round(1.0 / scale)                         # 85: the range [-1, 2] holds 0
    expected = (torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale
    assert torch.allclose(uint8_rounded(x), expected)
    positive = torch.tensor([0.31, 1.0])               # the range is stretched to 0: zero point 0, scale 1/255
    assert torch.allclose(uint8_rounded(positive), torch.tensor([79.0, 255.0]) / 255)


def test_compress_run_qat_int8_trains_exports_and_checks_the_export(tmp_path):
    common, env = tiny_quantization_run(tmp_path)
    out = tmp_path / "run"
    done = run_cli("run", "qat-int8[recovery_epochs=2]", *common, "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    aware = metrics["details"]["aware"]
    assert metrics["details"]["backend"] == "onnxruntime" and metrics["student"]["dtype"] == "int8"
    assert aware["epochs"] == 2 and aware["agreement"] == 1.0 and aware["max_abs_logit_diff"] < 1e-3, aware
    steps = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    losses = [s["loss"] for s in steps if s.get("stage") == "qat-int8: aware" and "step" in s]
    assert losses and {"kd_kl", "hidden_mse"} <= set(next(s for s in steps if "step" in s))
    assert "with int8's rounding in the forward pass" in done.stdout
    assert "Quantization-aware: trained 2 epoch(s)" in (out / "report.md").read_text()
    # On PyTorch: its own rounding (weights per matrix, inputs on 7 bits), exported as its dynamic int8.
    done = run_cli("run", "qat-int8[recovery_epochs=1,backend=torch]", *common, "--out", str(tmp_path / "torch"),
                   env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "torch" / "metrics.json").read_text())
    aware = metrics["details"]["aware"]
    assert metrics["details"]["backend"] == "torch" and metrics["student"]["dtype"] == "int8"
    assert aware["epochs"] == 1 and aware["agreement"] == 1.0 and aware["max_abs_logit_diff"] < 1e-3, aware
    for bad, expected in [("qat-int8[recovery_epochs=0]", "0 epochs is post-training quantization"),
                          ("qat-int8[backend=openvino]", "onnxruntime"), ("qat-int4[backend=torch]", "onnxruntime"),
                          ("qat-int4[group_size=7]", "group_size must be"),
                          ("albert[rank=4,embedding_size=32]+qat-int8", "cannot train a relaxed ALBERT")]:
        refused = run_cli("run", bad, *common, "--out", str(tmp_path / "bad"), env=env)
        assert refused.returncode == 2 and expected in refused.stderr and \
            len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert not (tmp_path / "bad").exists()
