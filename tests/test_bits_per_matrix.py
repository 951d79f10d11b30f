"""Bits per matrix (``mixed-bits``): the Fisher diagonal against one computed another way (Jacobians, summed over
classes), the rounding against the blockwise quantizer that test_low_bits checks ONNX Runtime with, an allocation
that keeps its budget and takes the least sensitive matrices first, a graph holding exactly the widths chosen, and
`compress run mixed-bits` end to end."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch
from helpers import run_cli, tiny_config, tiny_quantization_run
from onnx import numpy_helper
from test_low_bits import _model, _rounded

from compress.methods.quantization import quant_format
from compress.methods.quantization.options import with_options
from compress.models.config import INPUT_NAMES
from compress.quantize.artefacts import read_manifest, write_artefact
from compress.quantize.bit_allocation import allocate, candidates, fisher_diagonal
from compress.quantize.rounding import int4_rounded, int8_rounded, int8_weight_levels
from compress.quantize.sizes import allocated_bytes, stored_bytes


def _batches(vocab: int, rows: int = 6, length: int = 7, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, (rows, length))
    mask = np.ones_like(ids)
    mask[::2, -3:] = 0          # padding, which each example is cut before
    ids[:, 1] = ids[:, 0]       # a token used twice: its row's derivative is summed before it is squared
    ids[mask == 0] = 0
    return [{"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}]


@pytest.mark.parametrize("labels", [3, 1])   # a classifier (exact sum over classes) and a regression (Gauss-Newton)
def test_the_fisher_diagonal_is_the_expected_squared_score(labels):
    torch.manual_seed(0)
    from compress.models.encoder import Encoder

    model = Encoder(tiny_config(num_labels=labels)).eval()
    batches = _batches(101, rows=3)
    fisher = fisher_diagonal(model, batches)
    params = dict(candidates(model))
    expected = {name: torch.zeros_like(p) for name, p in params.items()}
    batch = batches[0]
    for row in range(len(batch["input_ids"])):
        length = int(batch["attention_mask"][row].sum())
        inputs = [torch.as_tensor(batch[k][row][:length])[None] for k in INPUT_NAMES]

        def outputs(weights, inputs=inputs):
            out = torch.func.functional_call(model, weights, tuple(inputs)).logits[0]
            return out if labels == 1 else torch.log_softmax(out, -1)

        jacobians = torch.func.jacrev(outputs)(params)     # d output_y / d w, every y at once
        with torch.no_grad():
            p = torch.ones(1) if labels == 1 else outputs(params).exp()
        for name, jacobian in jacobians.items():
            expected[name] += torch.einsum("y,y...->...", p, jacobian ** 2)
    for name in params:
        assert torch.allclose(fisher[name], expected[name] / len(batch["input_ids"]), rtol=1e-4, atol=1e-10), name


def test_the_rounding_is_the_schemes():
    weight = torch.randn(6, 48)
    assert torch.equal(int4_rounded(weight, 32), _rounded(weight, 32))   # groups padded, largest magnitude at -8
    for levels in (127, 64):   # 8-bit weights, or 7-bit where the CPU's int8 kernels would saturate
        rows = int8_rounded(weight, table=False, levels=levels)
        steps = weight.abs().amax(1, keepdim=True) / levels
        assert torch.all((rows - weight).abs() <= steps / 2 + 1e-7)
        assert len(torch.unique(rows[0])) <= 2 * levels + 1
    assert torch.equal(int8_rounded(weight, table=False), int8_rounded(weight, False, levels=int8_weight_levels()))
    table = int8_rounded(weight, table=True)
    assert torch.all((table - weight).abs() <= (weight.max() - weight.min()) / 255 / 2 + 1e-6)


def test_the_allocation_keeps_its_budget_and_moves_the_least_sensitive_first():
    model = _model()
    fisher = {name: torch.ones_like(p) for name, p in candidates(model).items()}
    fisher["ffn.1.intermediate.weight"] = torch.zeros_like(fisher["ffn.1.intermediate.weight"])   # insensitive
    fisher["attention.0.query.weight"] *= 1e6                                                     # very sensitive
    choices = allocate(model, fisher, 0.3, 32)
    four = [m for m in choices if m.bits == 4]
    total = sum(m.weights for m in choices)
    assert sum(m.weights for m in four) >= 0.3 * total
    by_name = {m.name: m for m in choices}
    assert by_name["ffn.1.intermediate.weight"].bits == 4 and by_name["attention.0.query.weight"].bits == 8
    assert all(m.loss_int4 >= m.loss_int8 for m in choices)   # 4 bits never round closer than 8 here
    # none of the 4-bit matrices could go back to 8 bits and the budget still be met
    spare = sum(m.weights for m in four) - 0.3 * total
    assert all(m.weights > spare for m in four)


def test_the_graph_holds_the_widths_chosen_and_the_bytes_counted(tmp_path):
    model = _model()
    fmt = with_options(quant_format("mixed-bits"), type("Options", (), {"group_size": 32, "int4_share": 0.5})())
    write_artefact(fmt, "onnxruntime", model, tmp_path, calibration=_batches(1000))
    manifest = read_manifest(tmp_path)
    bits = {m["name"]: m["bits"] for m in manifest["bits"]}
    graph = onnx.load(str(tmp_path / "model.onnx")).graph
    counts = {op: sum(n.op_type == op for n in graph.node)
              for op in ("MatMulNBits", "MatMulInteger", "GatherBlockQuantized")}
    tables = {name for name in bits if name.startswith("embeddings.") and "projection" not in name}
    assert counts["MatMulNBits"] == sum(b == 4 for n, b in bits.items() if n not in tables)
    assert counts["GatherBlockQuantized"] == sum(b == 4 for n, b in bits.items() if n in tables)
    heads = 2   # the pooler and classifier (Gemm): int8, as dynamic int8 makes them
    assert counts["MatMulInteger"] == sum(b == 8 for n, b in bits.items() if n not in tables) + heads
    assert set(bits.values()) == {4, 8}
    # the tensors stored (a tiny graph's file is mostly its structure) lie between int4's and int8's, where the
    # share of weights in 4 bits puts them
    stored = sum(len(t.raw_data) if t.raw_data else numpy_helper.to_array(t).nbytes for t in graph.initializer)
    int8 = stored_bytes(model.config, "int8", "onnxruntime")
    int4 = stored_bytes(model.config, "int4", "onnxruntime", group_size=32)
    share = sum(m["weights"] for m in manifest["bits"] if m["bits"] == 4) / sum(m["weights"] for m in manifest["bits"])
    assert int4 < stored < int8 and share >= 0.5
    four = {name for name, b in bits.items() if b == 4}
    # plus the few shape constants ONNX Runtime's pre-processing folds into initializers (under 1 KB)
    assert 0 <= stored - allocated_bytes(model.config, four, 32) < 1024
    # before any allocation (explain, the search), the share's bytes are counted as if spread evenly
    assert stored_bytes(model.config, "mixed", "onnxruntime", group_size=32, int4_share=share) == \
        pytest.approx(stored, rel=0.05)


def test_compress_run_mixed_bits_reports_every_matrix_and_refuses_a_bad_share(tmp_path):
    common, env = tiny_quantization_run(tmp_path)
    done = run_cli("run", "mixed-bits[int4_share=0.6]", *common, "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    bits = metrics["details"]["bits"]
    assert metrics["student"]["dtype"] == "mixed" and {m["bits"] for m in bits} <= {4, 8}
    assert sum(m["weights"] for m in bits if m["bits"] == 4) >= 0.6 * sum(m["weights"] for m in bits)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "### Bits per matrix" in report and all(m["name"] in report for m in bits)
    assert "](bits.png)" in report and (tmp_path / "run" / "bits.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = run_cli("run", "mixed-bits[int4_share=1]", *common, "--out", str(tmp_path / "bad"), env=env)
    assert bad.returncode == 2 and "int4_share is a share of the weights above 0 and below 1" in bad.stderr
    assert not (tmp_path / "bad").exists()
